"""The agent's audio leaking into the caller's channel of a recording: found, removed. Pure.

Telephony recordings often carry the agent's voice on the caller's channel too, a
delayed and attenuated copy (the handset's acoustic echo, a hybrid's line echo, a
recorder that mixes sidetone in). The caller's speech detector would take it for the
caller talking: barge-ins that never happened, caller offsets moved to the end of the
agent's words. So, before the caller's edges are taken:

1. **Find it.** Up to :data:`MAX_BLOCKS` blocks of :data:`BLOCK_MS` where the agent is
   loudest are cross-correlated with the caller channel at lags 0 to
   :data:`MAX_LAG_MS` (FFT). A leak is a lag that most blocks agree on (within 1 ms);
   speech of two independent talkers agrees on none.
2. **Measure it.** At that lag, a short filter (:data:`TAPS_BEFORE_MS` before to
   :data:`TAPS_AFTER_MS` after it: the delay and the colour of the echo path) is fitted
   by least squares over those blocks; ``leak_db`` is the filtered agent's energy
   against the agent's own.
3. **Remove it.** The filtered agent is subtracted from the whole caller channel.
4. **Check what is left.** Where the caller was silent (blocks where a leak at any lag
   explains most of the caller channel), what remains after the removal is the leak's
   residue: where the echo path changes over the call, or is not linear, part of the
   leak stays. Its level against the agent's (the 90th percentile over those blocks) is
   ``residual_db``. Where the leak so left around a caller edge (the agent's loudest
   50 ms window over the 300 ms the leak there could come from, less the removal) stands
   within 6 dB of that utterance's edge threshold (its active speech level less 35 dB, the
   truth rule's), it could still move the edge: the figure is withheld (``caller_echo``,
   and the action is ``withheld``: :func:`voxproxy.recordings.measure.withhold_echo`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.signal import oaconvolve

from voxproxy.core.analysis.truth import TRUTH_RANGE_DB
from voxproxy.core.audio.levels import active_speech_level
from voxproxy.core.audio.resample import resample_linear
from voxproxy.core.receipt import EchoRecord
from voxproxy.recordings.files import Channel

MAX_LAG_MS = 500.0
BLOCK_MS = 250.0
MAX_BLOCKS = 240  # a minute of the agent's loudest audio at most: the cost is bounded
TAPS_BEFORE_MS = 1.0
TAPS_AFTER_MS = 4.0
AGREE_MS = 1.0  # blocks whose peak lies this close to the common lag agree on it
AGREE_SHARE = 0.25  # ... a leak is a lag that more than this share of blocks agree on
# A block where the leak at that lag explains this share of the caller channel's energy
# is the leak alone (the caller silent): the filter is fitted, and what is left of the
# leak measured, on those blocks only (double talk would bias both).
ALONE_SHARE = 0.25
MIN_BLOCKS = 3
QUIET_DB = 30.0  # blocks of the agent this far under its loudest are not used
MIN_LEAK_DB = -80.0  # a leak this far under the agent is no leak (rounding, dither)
# The fit's regularisation, against the agent's energy: band-limited speech (a narrowband
# voice in a wideband file) leaves directions the fit cannot see, and a filter free
# there would add noise to every other voice; the least such filter leaves them alone.
RIDGE = 1e-6
MAX_FIT_BLOCKS = 24  # the filter is fitted on this many blocks at most (its cost)

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class EchoResult:
    """What was found (``leak_db``, ``lag_ms``), what is left after removing it
    (``residual_db``), the action, and the caller channel with the leak removed (None:
    nothing removed)."""

    leak_db: float | None
    lag_ms: float | None
    residual_db: float | None
    action: str  # none, removed, withheld
    caller: Channel | None

    @staticmethod
    def none() -> EchoResult:
        return EchoResult(None, None, None, "none", None)

    def record(self) -> EchoRecord:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 1)

        return EchoRecord(
            leak_db=r(self.leak_db),
            lag_ms=r(self.lag_ms),
            residual_db=r(self.residual_db),
            action=self.action,  # type: ignore[arg-type]
        )


def _agent_on_caller_grid(caller: Channel, agent: Channel) -> F64:
    """The agent's samples at the caller's rate, placed on the caller's sample grid."""
    rate = caller.sample_rate_hz
    pcm = agent.pcm
    if agent.sample_rate_hz != rate:
        pcm = resample_linear(pcm, agent.sample_rate_hz, rate)
    out = np.zeros(caller.pcm.size, dtype=np.float64)
    off = round((agent.start_ns - caller.start_ns) * rate / 1e9)
    lo, hi = max(0, off), min(out.size, off + pcm.size)
    if hi > lo:
        out[lo:hi] = pcm[lo - off : hi - off]
    return out


def _loud_blocks(a: F64, block: int, reach: int) -> list[int]:
    """Starts of the agent's loudest blocks (at most MAX_BLOCKS, none quieter than
    QUIET_DB under the loudest), each leaving ``reach`` samples after it."""
    n = (a.size - reach) // block
    if n <= 0:
        return []
    energy = np.square(a[: n * block]).reshape(n, block).sum(axis=1)
    top = float(energy.max())
    if top <= 0.0:
        return []
    order = np.argsort(energy)[::-1][:MAX_BLOCKS]
    keep = [int(i) for i in order if energy[i] > top * 10 ** (-QUIET_DB / 10)]
    return sorted(i * block for i in keep)


def _xcorr(c: F64, a: F64, start: int, block: int, first: int, count: int) -> F64:
    """``sum_n c[start+n+lag] * a[start+n]`` for lag ``first`` .. ``first+count-1`` (n over
    the block; ``c`` is zero outside its samples)."""
    lo = start + first
    seg_c = np.zeros(block + count)
    a0, a1 = max(0, lo), min(c.size, lo + seg_c.size)
    if a1 > a0:
        seg_c[a0 - lo : a1 - lo] = c[a0:a1]
    seg_a = a[start : start + block]
    nfft = 1 << int(np.ceil(np.log2(seg_c.size + block)))
    spec = np.fft.rfft(seg_c, nfft) * np.conj(np.fft.rfft(seg_a, nfft))
    out: F64 = np.fft.irfft(spec, nfft)[:count]
    return out


def _normal_equations(u: F64, y: F64, k: int) -> tuple[F64, F64]:
    """``(X'X, X'y)`` of the regression of ``y`` (a block of the caller) on ``k`` columns,
    column ``j`` being ``u[k-1-j : k-1-j+len(y)]`` (the agent at the ``j``-th delay).

    Exact, from prefix sums of lagged products and a direct correlation: no matrix
    product. (A product goes to a threaded BLAS whose idle threads spin: in a batch of
    worker processes that took 2-5x the CPU of the whole analysis.)"""
    n = y.size
    gram = np.zeros((k, k))
    for lag in range(k):
        prod = np.zeros(u.size)
        prod[lag:] = u[lag:] * u[: u.size - lag]
        q = np.concatenate(([0.0], np.cumsum(prod)))
        j = np.arange(k - lag)
        first = k - 1 - j  # column j's first sample in u; column j+lag's is first - lag
        gram[j, j + lag] = q[first + n] - q[first]
        gram[j + lag, j] = gram[j, j + lag]
    cross: F64 = np.correlate(u, y, mode="valid")[::-1].copy()
    return gram, cross


def _db(num: float, den: float) -> float:
    return 10.0 * float(np.log10(max(num, 1e-30) / max(den, 1e-30)))


def find_and_remove(caller: Channel, agent: Channel) -> EchoResult:
    """Look for the agent's audio in ``caller``; remove it when found (module doc)."""
    rate = caller.sample_rate_hz
    c = caller.pcm.astype(np.float64)
    a = _agent_on_caller_grid(caller, agent)
    block = int(rate * BLOCK_MS / 1000)
    lags = int(rate * MAX_LAG_MS / 1000) + 1
    before, after = int(rate * TAPS_BEFORE_MS / 1000), int(rate * TAPS_AFTER_MS / 1000)
    starts = _loud_blocks(a, block, 0)
    if len(starts) < MIN_BLOCKS:
        return EchoResult.none()
    # Each block's correlation at lags -before .. lags-1+after (index = lag + before).
    corr = [_xcorr(c, a, s, block, -before, lags + before + after) for s in starts]
    inner = slice(before, before + lags)
    total = np.sum(corr, axis=0)[inner]
    lag = int(np.argmax(np.abs(total)))
    peaks = [int(np.argmax(np.abs(r[inner]))) for r in corr]
    agree = int(rate * AGREE_MS / 1000)
    if sum(1 for p in peaks if abs(p - lag) <= agree) <= AGREE_SHARE * len(peaks):
        return EchoResult.none()
    ea = [float(np.dot(a[s : s + block], a[s : s + block])) for s in starts]
    ec = [float(np.dot(c[s : s + block], c[s : s + block])) for s in starts]

    def share(r: F64, x: float, y: float, at: int | None) -> float:
        peak = float(np.max(np.abs(r[inner]))) if at is None else float(r[at + before])
        return peak**2 / max(x * y, 1e-30)

    shares = list(zip(corr, ea, ec, strict=True))
    # Blocks where the leak at the common lag is alone: the filter is fitted on them. Blocks
    # where a leak at any lag is (the echo path may have moved): what is left is read there.
    alone = [i for i, (r, x, y) in enumerate(shares) if share(r, x, y, lag) >= ALONE_SHARE]
    leaky = [i for i, (r, x, y) in enumerate(shares) if share(r, x, y, None) >= ALONE_SHARE]
    if len(alone) < MIN_BLOCKS:
        alone = [i for i, p in enumerate(peaks) if abs(p - lag) <= agree]
    k = before + after + 1
    delays = np.arange(lag - before, lag + after + 1)
    pad = lags + after + before + 1
    a_pad = np.concatenate([np.zeros(pad), a, np.zeros(pad)])
    xtx = np.zeros((k, k))
    xty = np.zeros(k)
    # The blocks where the leak is most alone (the least of the caller in them).
    by_share = sorted(alone, key=lambda i: -share(*shares[i], lag))
    fit = sorted(by_share[:MAX_FIT_BLOCKS])
    for i in fit:
        s = starts[i]
        gram, cross = _normal_equations(
            a_pad[pad + s - delays[-1] : pad + s + block - delays[0]], c[s : s + block], k
        )
        xtx += gram
        xty += cross
    ridge = RIDGE * float(np.trace(xtx)) / k + 1e-12
    h = np.linalg.solve(xtx + ridge * np.eye(k), xty)
    leak_db = _db(float(h @ xtx @ h), float(xtx[before, before]))  # against the agent at the lag
    if leak_db < MIN_LEAK_DB:
        return EchoResult.none()
    # The whole leak: the agent through the fitted filter, delayed by the first tap's lag.
    conv = oaconvolve(a, h)  # conv[m] = sum_k h[k] a[m - k]
    d0 = lag - before
    full = np.zeros(c.size)
    lo, hi = max(0, d0), min(c.size, d0 + conv.size)
    full[lo:hi] = conv[lo - d0 : hi - d0]
    out = np.clip(np.round(c - full), -32768, 32767).astype(np.int16)

    # What is left where the leak was alone: its residue, whatever its cause.
    def delayed_energy(s: int) -> float:
        seg = a_pad[pad + s - lag : pad + s - lag + block]
        return float(np.dot(seg, seg))

    left = [
        _db(float(np.dot(seg, seg)), delayed_energy(starts[i]))
        for i in (leaky or alone)
        for seg in [out[starts[i] : starts[i] + block].astype(np.float64)]
    ]
    residual_db = float(np.percentile(left, 90))
    cleaned = Channel(out, rate, caller.encoding, caller.start_ns)
    return EchoResult(leak_db, lag * 1000 / rate, residual_db, "removed", cleaned)


def leak_left_dbfs(found: EchoResult, agent: Channel, t_ns: int, caller: Channel) -> float | None:
    """How loud the leak left after removal may be around ``t_ns`` (dBFS): the agent's
    loudest 50 ms over the 300 ms the leak there could come from, less what the removal
    took away."""
    if found.lag_ms is None or found.residual_db is None:
        return None
    at = t_ns - caller.start_ns - round(found.lag_ms * 1e6) - agent.start_ns
    rate = agent.sample_rate_hz
    i = at * rate // 1_000_000_000
    seg = agent.pcm[max(0, i - rate // 5) : max(0, i + rate // 10)].astype(np.float64)
    win = rate // 20
    if seg.size < win:
        return None
    power = np.convolve(seg**2, np.ones(win) / win, mode="valid")
    loudest = float(power.max()) / 32768.0**2
    return 10.0 * float(np.log10(max(loudest, 1e-12))) + found.residual_db


def caller_threshold_dbfs(caller: Channel, onset_ns: int, offset_ns: int) -> float | None:
    """The truth rule's edge threshold of the caller's words in ``[onset, offset]``: their
    active speech level less 35 dB (None: too little speech to tell)."""
    rate = caller.sample_rate_hz
    lo = max(0, (onset_ns - caller.start_ns) * rate // 1_000_000_000)
    hi = max(lo, (offset_ns - caller.start_ns) * rate // 1_000_000_000)
    level = active_speech_level(caller.pcm[lo:hi], rate)
    return None if level is None else level - TRUTH_RANGE_DB
