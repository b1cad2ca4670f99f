"""Speech edges under a bed of noise: where the speech rises out of it.

Under a noise bed the true edges are the first and last 1 ms windows where the clean
speech stands within 35 dB of its level *and* above the noise's own level in the same
window (MEASUREMENT.md 2). The detector hears only the mixture, so it estimates both
sides from what it has:

- **the noise**, from a stretch of it next to the edge (before an onset, after an
  offset): its mean power, the quantile :data:`NOISE_QUANTILE` of its 1 ms windows'
  power (a window of speech above that stands above most of the noise's windows), and
  how high its smoothed power reaches on its own;
- **the speech**, as the mixture's power less the noise's mean, over
  :data:`SMOOTH_MS`, read on the audio high-passed at :data:`HIGHPASS_HZ` (rumble, a car's
  cabin, brown and street noise have most of their power below it, speech little) and
  brought back to the whole band by the speech's own ratio of the two near the anchor.

A window is heard when the high-passed mixture stands clearly above anything the noise
reached alone (:data:`SIGNIFICANCE` times its highest smoothed excursion over its
mean), and the estimated speech stands above the noise's quantile and the truth's
level threshold. The edge is the last such window reached from the anchor (a window
of the spurt's loud part) with pauses up to :data:`GAP_MS` bridged.

How far the edge moves when the speech estimate is taken :data:`BAND_DB` lower or
higher is its stated uncertainty (``Spurt.masked_onset_ms`` / ``masked_offset_ms``):
a steep edge moves a few ms, a tail that hovers on the noise moves by its length.

:class:`AudibleEdges` applies this to a detector's rings (samples, window energies);
:func:`audible_edge` is the rule itself, on arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from voxproxy.core.analysis.truth import TRUTH_RANGE_DB
from voxproxy.core.analysis.vadconfig import LEVEL_SLACK_DB, masked_ms
from voxproxy.core.events import Pcm

F64 = npt.NDArray[np.float64]

HIGHPASS_HZ = 150.0  # the detector's speech estimate is read above this
SMOOTH_MS = 15  # windows averaged for the speech estimate and its significance
DIP_QUANTILE = 0.05  # a bed's dips: how far under its mean this share of its windows lie
NOISE_QUANTILE = 0.1  # a window of speech counts above this share of the noise's windows
SIGNIFICANCE = 1.5  # x the noise's own highest smoothed excursion above its mean
GAP_MS = 60  # pauses bridged by the walk
BAND_DB = 3.0  # the edge's uncertainty: how far it moves with the estimate this far off
# ... and never less than half the SMOOTH_MS average the walk reads: the truth counts each
# 1 ms window where the speech tops that window's own noise, which the average cannot
# place closer (white noise 10 dB under the caller: offsets 6.7-8.9 ms early, the 3 dB
# moves 2 ms).
READ_BAND_MS = SMOOTH_MS // 2
BAND_SIGNIFICANCE = 2.0  # ... and the significance asked this many times higher (lower)
REFERENCE_MS = 300  # noise windows read beside an edge (before an onset)
REFERENCE_GAP_MS = 200  # ... ending this far before the anchor of an onset
OFFSET_REFERENCE = (200, 320)  # ... and from/to this far after the anchor of an offset
NO_NEXT_ONSET = 1 << 62  # ... and REFERENCE_GAP_MS before the next spurt's (none come)
# The heard truth counts a window of speech wherever the noise dips under it: over a bed
# whose windows dip more than HIDDEN_FREE_DB under its mean one time in twenty (white
# noise: 3-4.5 dB, pink 5-7, street 7-9, brown 13-15), it counts a tail under the bed's
# level the mixture does not show; each edge states HIDDEN_MS_PER_DB for each dB past it
# (a slow release's decay), at most HIDDEN_MAX_MS (see hidden_ms).
HIDDEN_FREE_DB = 4.0
HIDDEN_MS_PER_DB = 10.0
HIDDEN_MAX_MS = 90.0
# A voiced release fades for 100-130 ms after the last loud syllable, its 1 ms pulses
# 15-24 dB under the talker's level and its mean 8-12 dB under those. Once the talker
# stands over the bed by TAIL_RISK_DB less the bed's dips, the truth counts such pulses
# where the bed dips under them, while the mixture cannot show a tail that far under
# the bed: an offset then states TAIL_HIDDEN_MS (see tail_hidden_ms). From TAIL_SEEN_DB
# over the bed plus its dips the pulses stand out of its swells and the walk reads them.
TAIL_RISK_DB = 18.0
TAIL_HIDDEN_MS = 120
TAIL_SEEN_DB = 24.0
# On an 8 kHz wire a 1 ms window holds 8 samples, and the bed's windows dip 7-10 dB under
# its mean one time in 100 to 1,000: a word-final burst or a release 5-10 dB under the
# bed beats it in some window in about half of the bed's realisations (the truth's join
# carries the offset out to it), from a talker 8 dB over the bed up. The
# rule then asks NARROW_TAIL_RISK_DB, not TAIL_RISK_DB (white and pink 10 dB under
# Twilio callers: 19 of 137 published ttfs figures 44-82 ms outside a band of 18-48 ms).
NARROW_WINDOW_SAMPLES = 8
NARROW_TAIL_RISK_DB = 10.0
# A bed is steady under a spurt when its high-passed level read before the spurt and
# after it stand within STEADY_SHIFT_DB of each other and its 1 ms windows dip at most
# STEADY_DIP_DB under its mean one time in twenty: an edge read against it lies within
# its band, however wide, so a figure withheld for that band still bounds the truth.
# A street's swells (its level drifting 5-11 dB across a spurt) and a rumble (dips of
# 13-15 dB) carry an offset's walk on: 130-650 ms past the truth against 131-224 stated.
STEADY_SHIFT_DB = 3.0
STEADY_DIP_DB = 10.0
# The dips are read on the 1 ms windows of the quiet frames between spurts over the bed,
# each over the bed's mean around it (the last BED_POOL_WINDOWS of them), once
# BED_POOL_MIN are at hand, else on the 300 ms read before the onset: one time in twenty
# of the 120 windows read after an offset is a noisy estimate (the demo's recorded pink
# on an 8 kHz wire: 7.0-11.5 dB beside the edges of one clip, 8.3 at the median, pooled
# 8.8-9.2; generated pink 6.6-6.9 pooled; brown noise 11.3-15.9 beside them, 14-15 pooled).
BED_POOL_WINDOWS = 4096
BED_POOL_MIN = 200
POOL_MEAN_FRAMES = 15
CENSORED_MS = 2  # an edge this close to the end of what a walk reads was not found
MIN_REFERENCE_MS = 60  # fewer noise windows than this: no estimate
# Applies when the talker stands less than this far above the floor (the noise is a bed
# under the speech); farther, in quiet or over a codec's idle, the quiet rules apply.
AUDIBLE_SEEN_DB = 30.0
# A talker less than this above the bed's mean (SNR near 0 dB) is one no listener could
# follow word by word either: its edges keep the masking table's band (withheld). From 7
# dB up the walk's bands hold: the noise sweep at 6-10 dB (five beds, raw and Twilio)
# published 196 ttfs figures with 4 outside and bounded 524 with none outside at 7 dB,
# against 146 (3) and 404 (0) at 8 dB; stops published 168 against 121, none outside.
UNRESOLVED_SNR_DB = 7.0
# A bed within this of the caller's level could hide a barge-in: the detector opens a
# spurt over a bed on pitched frames BED_START_DB over its mean, 2 dB under a talker here.
UNHEARD_SNR_DB = 8.0
BED_START_DB = 6.0  # over a bed, a pitched frame is loud this far above the noise's mean
# An edge that could not be read against the noise beside it (none at hand) states what
# the masking table does for a talker at the noise's level.
UNRESOLVED_BAND_MS = masked_ms(0.0)
_POWER_FLOOR = 1e-12
_FULL_SCALE_SQ = 32768.0 * 32768.0


def highpass(x: F64, sample_rate_hz: int) -> F64:
    """``x`` less its centred moving average over 1/:data:`HIGHPASS_HZ` s: nothing at
    the average's nulls (150 Hz and up its harmonics' band is kept), -4.6 dB at 100 Hz,
    -15 dB at 50 Hz, -30 dB at 20 Hz. A few numpy calls (no filter state): the edge
    walks high-pass a second or two of audio a few times a second."""
    m = max(2, round(sample_rate_hz / HIGHPASS_HZ))
    if x.size <= m:
        return x - float(x.mean()) if x.size else x
    c = np.concatenate(([0.0], np.cumsum(x)))
    lo = np.clip(np.arange(x.size) - m // 2, 0, x.size)
    hi = np.clip(lo + m, 0, x.size)
    out: F64 = x - (c[hi] - c[lo]) / np.maximum(hi - lo, 1)
    return out


def window_power(x: F64, win: int) -> F64:
    """Mean power re full scale of each whole ``win``-sample window of ``x``."""
    n = (x.size // win) * win
    rows = x[:n].reshape(-1, win)
    out: F64 = np.einsum("ij,ij->i", rows, rows) / (win * _FULL_SCALE_SQ)
    return out


def smooth(p: F64, k: int) -> F64:
    """Centred moving average over ``k`` values (fewer at the ends)."""
    if k <= 1 or p.size == 0:
        return p
    c = np.concatenate(([0.0], np.cumsum(p)))
    lo = np.clip(np.arange(p.size) - k // 2, 0, p.size)
    hi = np.clip(lo + k, 0, p.size)
    out: F64 = (c[hi] - c[lo]) / np.maximum(hi - lo, 1)
    return out


@dataclass(frozen=True, slots=True)
class NoiseStats:
    """What a stretch of noise alone says (powers re full scale)."""

    mean_hp: float  # mean power of the high-passed noise (its highest 5% left out)
    top_hp: float  # the smoothed high-passed power the speech must stand above
    low: float  # NOISE_QUANTILE of its 1 ms windows' power, the whole band
    mean: float  # its mean power, the whole band
    dip: float = 0.0  # how far (dB) under its mean its 1 ms windows dip one time in twenty


def noise_stats(power: F64, power_hp: F64) -> NoiseStats | None:
    """:class:`NoiseStats` of noise windows (whole band, high-passed); None for too few."""
    if power.size < MIN_REFERENCE_MS:
        return None
    ordered = np.sort(power_hp)
    mean_hp = float(ordered[: max(1, int(ordered.size * 0.95))].mean())
    smoothed = smooth(power_hp, SMOOTH_MS)
    inner = smoothed[SMOOTH_MS // 2 : smoothed.size - SMOOTH_MS // 2]
    reach = float(inner.max() if inner.size else smoothed.max()) - mean_hp
    return NoiseStats(
        mean_hp=mean_hp,
        top_hp=mean_hp + SIGNIFICANCE * max(reach, 0.0),
        low=float(np.quantile(power, NOISE_QUANTILE)),
        mean=float(power.mean()),
        dip=_dip_db(power),
    )


def _dip_db(power: F64) -> float:
    """How far under the mean power of noise windows ``power`` their DIP_QUANTILE lies."""
    low = float(np.quantile(power, DIP_QUANTILE))
    mean = float(power.mean())
    return 10.0 * float(np.log10(mean / low)) if low > 0.0 and mean > 0.0 else 99.0


def audible_edge(
    power: F64,
    power_hp: F64,
    anchor: int,
    noise: NoiseStats,
    threshold: float,
    direction: int,
    *,
    scale: float = 1.0,
    significance: float = 1.0,
) -> int:
    """The edge reached from window ``anchor`` of ``power`` / ``power_hp`` (the mixture's
    1 ms windows, whole band and high-passed) walking ``direction`` (-1: back to the
    onset, the first heard window; +1: on to the offset, the end of the last): the last
    heard window with pauses up to :data:`GAP_MS` bridged. ``threshold``: the truth's
    level threshold (power); ``scale`` multiplies the speech estimate and ``significance``
    how far above the noise's own excursions the mixture must stand (the band)."""
    smoothed = smooth(power_hp, SMOOTH_MS)
    speech_hp = smoothed - noise.mean_hp
    lo, hi = max(0, anchor - 20), min(power.size, anchor + 21)
    near_hp = float(power_hp[lo:hi].mean()) - noise.mean_hp
    near = float(power[lo:hi].mean()) - noise.mean
    ratio = min(max(near / near_hp, 1.0), 3.0) if near_hp > _POWER_FLOOR else 1.0
    top = noise.mean_hp + significance * (noise.top_hp - noise.mean_hp)
    heard = (smoothed > top) & (scale * ratio * speech_hp > max(noise.low, threshold))
    walk = heard[: anchor + 1][::-1] if direction < 0 else heard[anchor:]
    hits = np.flatnonzero(walk)
    if hits.size == 0 or hits[0] > GAP_MS:
        return anchor if direction < 0 else anchor + 1
    cut = np.flatnonzero(np.diff(hits) > GAP_MS)
    last = int(hits[cut[0]] if cut.size else hits[-1])
    return anchor - last if direction < 0 else anchor + last + 1


def hidden_ms(noise: NoiseStats, threshold: float = 0.0) -> int:
    """How far past what the mixture shows the heard truth may reach over this noise: it
    counts a 1 ms window of speech wherever the noise dips under it, and a bed whose windows
    dip far under its mean (brown noise, a street's rumble) lets it count a tail far under
    the bed's level that no reading of the mixture sees. HIDDEN_MS_PER_DB for each dB the
    bed dips (one window in twenty) past HIDDEN_FREE_DB: a slow release's decay. But the
    truth counts no speech under its level threshold (``threshold``, power; 0: not
    given), whatever the bed does there: a bed whose mean stands less than its dips over
    that threshold hides only the tail between the two (a rumble 30-40 dB under the
    talker, whose mean lies near the threshold, hides next to nothing)."""
    depth = noise.dip
    if threshold > 0.0 and noise.mean > 0.0:
        over_threshold = 10.0 * float(np.log10(noise.mean / threshold))
        depth = min(depth, over_threshold + HIDDEN_FREE_DB)
    hidden = (depth - HIDDEN_FREE_DB) * HIDDEN_MS_PER_DB
    return int(min(max(hidden, 0.0), HIDDEN_MAX_MS))


def tail_hidden_ms(
    noise: NoiseStats, threshold: float, window_samples: int = NARROW_WINDOW_SAMPLES * 2
) -> int:
    """How far past an offset the heard truth may reach on a release the mixture cannot
    show: :data:`TAIL_HIDDEN_MS` when the talker (``threshold`` is the truth's level
    threshold, its level less 35 dB) stands over the bed's mean by :data:`TAIL_RISK_DB` or
    more less the bed's dips (a release's pulses then reach above the bed's dips) but
    less than :data:`TAIL_SEEN_DB` plus them (a bed that dips deep swells high too: above
    that the pulses stand out of its swells), else 0. Under the first bound the pulses
    lie under the bed's deepest windows and the truth ends where the mixture does. (The
    talker's level is read back from ``threshold`` with the default 35 dB range.) On a
    wire of ``window_samples`` up to :data:`NARROW_WINDOW_SAMPLES` a 1 ms window (8 kHz)
    the first bound is :data:`NARROW_TAIL_RISK_DB`."""
    if threshold <= 0.0 or noise.mean <= 0.0:
        return 0
    over_db = 10.0 * float(np.log10(threshold / noise.mean)) + TRUTH_RANGE_DB + LEVEL_SLACK_DB
    narrow = window_samples <= NARROW_WINDOW_SAMPLES
    risk = over_db + noise.dip >= (NARROW_TAIL_RISK_DB if narrow else TAIL_RISK_DB)
    return TAIL_HIDDEN_MS if risk and over_db - noise.dip < TAIL_SEEN_DB else 0


def audible_edge_band(
    power: F64,
    power_hp: F64,
    anchor: int,
    noise: NoiseStats,
    threshold: float,
    direction: int,
    window_samples: int = NARROW_WINDOW_SAMPLES * 2,
) -> tuple[int, int]:
    """:func:`audible_edge` and how far (windows) it moves with the speech estimate
    :data:`BAND_DB` lower or higher. An edge the walk placed at the end of what it could
    read (the look-back, the look-ahead, the spurt before) was never found: the speech is
    still heard there (a bed whose level rose under it, say), and the band is the masking
    table's for a talker at the noise's level (unresolved). ``window_samples``: samples in
    a 1 ms window (the wire's rate / 1000), for :func:`tail_hidden_ms`."""
    edge = audible_edge(power, power_hp, anchor, noise, threshold, direction)
    if edge <= CENSORED_MS if direction < 0 else edge >= power.size - CENSORED_MS:
        return edge, int(UNRESOLVED_BAND_MS[0 if direction < 0 else 1])
    band = max(hidden_ms(noise, threshold), READ_BAND_MS)
    if direction > 0:
        band = max(band, tail_hidden_ms(noise, threshold, window_samples))
    for db in (-BAND_DB, BAND_DB):
        other = audible_edge(
            power,
            power_hp,
            anchor,
            noise,
            threshold,
            direction,
            scale=10 ** (db / 10),
            significance=BAND_SIGNIFICANCE if db < 0 else 1.0 / BAND_SIGNIFICANCE,
        )
        band = max(band, abs(other - edge))
    return edge, band


class AudibleEdges:
    """The audible-edge walks of one direction's detector (a base of its edge rules),
    over the rings it keeps (declared here)."""

    sample_rate_hz: int
    _win: int
    _ring: Pcm
    _ring_mask: int
    _framed: int
    _written_win: int
    _prev_offset_win: int
    _first_above_win: int
    _onset_noise: NoiseStats | None
    _offset_noise: NoiseStats | None
    _next_onset_win: int
    _bed_pool: F64  # the 1 ms windows' power of quiet frames over the bed / its mean, a ring
    _bed_pool_n: int  # windows written to it (of a longer chunk, as many as it holds)
    _bed_pool_ref: float  # the bed's mean power around the last of them (0: none yet)
    _onset_band: float
    _offset_band: float
    _opened_quiet: bool

    def steady_edges(
        self, onset_band: float, offset_band: float, walked: bool, offset_found: bool = True
    ) -> tuple[bool, bool]:
        """Whether the closing spurt's onset and offset, ``walked`` over a bed with these
        bands, were each read against a bed that stayed steady across the spurt
        (:data:`STEADY_SHIFT_DB`, :data:`STEADY_DIP_DB`), not left unresolved: a walk that
        found no edge or no noise to read it against states :data:`UNRESOLVED_BAND_MS`
        exactly, and an offset not found within the look-ahead is ``offset_found`` False.
        A walked band may be wider than that (a tail hovering on a steady bed, 220-280
        ms): it bounds the truth all the same (the noise sweep: 48 more ttfs figures and
        6 stops bounded so, none outside their span)."""
        before, after = self._onset_noise, self._offset_noise
        if not walked or self._opened_quiet or before is None or after is None:
            return False, False
        if after is before:  # no noise read after the spurt: its level there is unknown
            return False, False
        shift = abs(
            10.0
            * float(np.log10(max(after.mean_hp, _POWER_FLOOR) / max(before.mean_hp, _POWER_FLOOR)))
        )
        dip = self._pooled_dip()
        dip = before.dip if dip is None else dip
        if shift > STEADY_SHIFT_DB or dip > STEADY_DIP_DB:
            return False, False
        on_band, off_band = UNRESOLVED_BAND_MS
        return onset_band != on_band, offset_found and offset_band != off_band

    def _pool_bed(self, frame: Pcm) -> None:
        """Keep the 1 ms windows' power of a quiet frame over the bed, between spurts,
        each over the bed's mean around it (POOL_MEAN_FRAMES: as the noise read beside
        an edge is taken, so that a bed's level wandering over seconds is no dip)."""
        power = window_power(frame.astype(np.float64), self._win)
        mean = float(power.mean())
        ref = self._bed_pool_ref
        ref = mean if ref <= 0.0 else ref + (mean - ref) / POOL_MEAN_FRAMES
        self._bed_pool_ref = ref
        if ref > 0.0:
            self._pool_windows(power / ref)

    def _pool_bed_between(self, lo: int, hi: int) -> None:
        """... or of windows ``[lo, hi)`` found to be the bed (a spurt opened on it)."""
        lo = max(lo, self._ring_start_win())
        if hi - lo >= MIN_REFERENCE_MS:
            power = self._mixture(lo, hi)[0]
            mean = float(power.mean())
            if mean > 0.0:
                self._bed_pool_ref = mean
                self._pool_windows(power / mean)

    def _pool_windows(self, power: F64) -> None:
        pool = self._bed_pool
        size = pool.size
        power = power[-size:]
        start = self._bed_pool_n % size
        first = min(power.size, size - start)
        pool[start : start + first] = power[:first]
        pool[: power.size - first] = power[first:]
        self._bed_pool_n += power.size

    def _pooled_dip(self) -> float | None:
        """How far the learned bed's 1 ms windows dip under their mean one time in twenty
        (dB; None: fewer than BED_POOL_MIN of them yet)."""
        n = self._bed_pool_n
        if n < BED_POOL_MIN:
            return None
        pool = self._bed_pool
        return _dip_db(pool if n >= pool.size else pool[:n])

    def _ring_start_win(self) -> int:
        """The earliest window whose samples the ring still holds (with a margin), and
        none before the stream's first (the ring's unwritten zeros are no noise)."""
        first = -(-(self._written_win * self._win - self._ring.size) // self._win) + 8
        return first if first > 0 else 0

    def _mixture(self, lo: int, hi: int) -> tuple[F64, F64]:
        """Windows ``[lo, hi)``'s power, whole band and high-passed (from the ring)."""
        win = self._win
        pad = self.sample_rate_hz // int(HIGHPASS_HZ) + win
        start = max(lo * win - pad, self._ring_start_win() * win)
        stop = min(hi * win + pad, self._written_win * win)
        idx = np.arange(start, stop) & self._ring_mask
        x = self._ring[idx].astype(np.float64)
        hp = highpass(x, self.sample_rate_hz)
        skip = lo * win - start
        n = (hi - lo) * win
        return window_power(x[skip : skip + n], win), window_power(hp[skip : skip + n], win)

    def _noise_between(self, lo: int, hi: int) -> NoiseStats | None:
        lo = max(lo, self._ring_start_win())
        if hi - lo < MIN_REFERENCE_MS:
            return None
        return noise_stats(*self._mixture(lo, hi))

    def _audible_back(self, win: int, lower: int, threshold: float) -> int | None:
        """The onset of the run that reaches ``win``, not before ``lower``, as heard over
        the noise before it (None: too little of it, or of the audio, is at hand).
        Records its band and the noise it was read against."""
        lower = max(lower, self._ring_start_win())
        if lower >= win:
            return None
        ref_hi = win - REFERENCE_GAP_MS
        floor = max(self._prev_offset_win + 20, self._ring_start_win())
        noise = self._noise_between(max(floor, ref_hi - REFERENCE_MS), ref_hi)
        if noise is None:
            noise = self._noise_between(floor, min(lower, win - MIN_REFERENCE_MS))
        if noise is None:  # no noise to read the edge against: unresolved
            self._onset_band = UNRESOLVED_BAND_MS[0]
            return None
        hi = min(win + 21, self._written_win)
        power, power_hp = self._mixture(lower, hi)
        onset, band = audible_edge_band(
            power, power_hp, win - lower, noise, 10 ** (threshold / 10), -1
        )
        self._onset_noise = noise
        self._onset_band = float(band)
        return lower + onset

    def _audible_forward(self, win: int, upper: int, threshold: float) -> int | None:
        """The end of the run from ``win``, not after ``upper``, as heard over the noise
        after it, up to the next spurt's onset where it has come (or, until that noise is
        heard, the noise before the spurt's onset)."""
        a, b = OFFSET_REFERENCE
        cap = self._next_onset_win - REFERENCE_GAP_MS
        noise = self._noise_between(win + a, min(win + b, upper, cap))
        if noise is None:
            noise = self._onset_noise
        if noise is None:
            self._offset_band = UNRESOLVED_BAND_MS[1]
            return None
        self._offset_noise = noise
        if upper <= win + 1:
            return None
        lo = max(win - 20, self._ring_start_win())
        if lo > win:  # the run's last window has left the ring: nothing to read it on
            self._offset_band = UNRESOLVED_BAND_MS[1]
            return None
        power, power_hp = self._mixture(lo, upper)
        level = 10 ** (threshold / 10)
        end, band = audible_edge_band(power, power_hp, win - lo, noise, level, +1, self._win)
        self._offset_band = float(band)
        return lo + end
