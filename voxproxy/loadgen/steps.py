"""A scripted caller's settings (:class:`CallerConfig`) and script: the steps it follows,
the noise bed under its audio, and the clips it says at its wire's rate."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

# Loaded with the load generator, before any call keeps time: every level it reads of a
# clip (``analysis.truth``) runs scipy's filters, which the core imports only when first
# asked (its per-message paths never need them). Imported on that first reading, beside
# a call or a proxy in the same loop, it stalled the loop for a second or more.
import scipy.signal  # noqa: F401

from voxproxy.clips import Clip
from voxproxy.core.analysis.truth import (
    audible_speech_edges,
    carried_speech_edges,
    carried_speech_windows,
    named_speech_windows,
    named_truth_threshold,
)
from voxproxy.core.audio.resample import resample_linear
from voxproxy.core.events import Pcm

DEFAULT_TAIL_MS = 800.0
"""The caller's silence after its script, before it hangs up."""


_AT_RATE: OrderedDict[tuple[int, int], tuple[Pcm, Pcm]] = OrderedDict()
_AT_RATE_KEEP = 64  # clips (at a rate) kept: a run's scenarios say a few


def clip_at_rate(c: Clip, rate: int) -> Pcm:
    """``c``'s samples at ``rate`` (read-only). Converted once per clip and rate for the
    whole process: every caller of a run says the same clips, and converting a clip of
    a few seconds takes milliseconds, which a load of callers starting together would
    take from the loop (every caller's pacing) again and again."""
    pcm = c.pcm
    if c.sample_rate_hz == rate:
        return pcm
    key = (id(pcm), rate)
    hit = _AT_RATE.get(key)
    if hit is not None and hit[0] is pcm:  # the same array (an id can be reused)
        _AT_RATE.move_to_end(key)
        return hit[1]
    if c.sample_rate_hz % rate:
        out = resample_linear(pcm, c.sample_rate_hz, rate)  # e.g. 16 -> 24 kHz
    else:
        f = c.sample_rate_hz // rate
        n = (pcm.size // f) * f
        out = pcm[:n].reshape(-1, f).astype(np.int32).mean(axis=1).astype(np.int16)
    out.flags.writeable = False  # shared by every caller
    _AT_RATE[key] = (pcm, out)
    if len(_AT_RATE) > _AT_RATE_KEEP:
        _AT_RATE.popitem(last=False)
    return out


def segments_at_rate(c: Clip, rate: int) -> tuple[tuple[float, float], ...]:
    """``c``'s true speech runs (ms) in its audio as a wire at ``rate`` carries it
    (:func:`clip_at_rate`, before the codec): the truth rule read from that audio, against
    the recording's level (``analysis.truth.carried_speech_windows``). At the recording's
    own rate or above it, its stored segments: a wire that carries more than the recording's
    band carries all of the talker (the tests' linear interpolation to 24 or 48 kHz dims
    what lies near 8 kHz, a resampler's doing, not the wire's: a WebRTC caller's Opus
    audio kept it, and its truth read from the interpolated audio ended
    ``caller_topic_change`` 40 ms early). A clip the rule finds no speech in keeps them
    too."""
    if c.sample_rate_hz <= rate or not c.segments_ms:
        return c.segments_ms
    edges = carried_speech_edges(c.name, c.pcm, c.sample_rate_hz, clip_at_rate(c, rate), rate)
    return tuple((a, b) for a, b in edges) if edges else c.segments_ms


def speech_windows_at_rate(c: Clip, rate: int) -> npt.NDArray[np.bool_]:
    """Which 1 ms windows of ``c`` are speech as a wire at ``rate`` carries it (see
    :func:`segments_at_rate`): for where a cut run's speech ends."""
    if c.sample_rate_hz <= rate:
        return named_speech_windows(c.name, c.pcm, c.sample_rate_hz)
    return carried_speech_windows(c.name, c.pcm, c.sample_rate_hz, clip_at_rate(c, rate), rate)


def edges_at_rate(c: Clip, rate: int) -> tuple[float, float]:
    """``c``'s true onset and offset (ms into it) as a wire at ``rate`` carries it."""
    segments = segments_at_rate(c, rate)
    return segments[0][0], segments[-1][1]


def active_rms(pcm: Pcm, c: Clip, rate: int) -> float:
    """RMS of a clip over its true speech segments (its active speech level)."""
    parts = [pcm[round(a * rate / 1000) : round(b * rate / 1000)] for a, b in c.segments_ms]
    x = np.concatenate(parts).astype(np.float64) if parts else pcm.astype(np.float64)
    return float(np.sqrt(np.mean(x**2))) if x.size else 0.0


def audible_clip_edges(
    c: Clip, pcm: Pcm, bed: npt.NDArray[np.float64] | None, pos: int, rate: int, gain_db: float
) -> tuple[float, float]:
    """A said clip's true onset and offset (ms into it) as a listener hears them over the
    noise bed under it (MEASUREMENT.md 2: windows within 35 dB of the recording's level
    and above the bed's own in the same window): ``pcm`` is the clip as said (at ``rate``,
    ``gain_db`` applied) from stream position ``pos``, and the bed under position ``p`` is
    ``bed[p % len(bed)]`` (the caller loops it from the stream's first sample). The clip's
    own edges at ``rate`` (:func:`edges_at_rate`) with no bed, or when nothing of it stands
    above the bed."""
    quiet = edges_at_rate(c, rate)
    if bed is None:
        return quiet
    threshold = named_truth_threshold(c.name, c.pcm, c.sample_rate_hz)
    if threshold is None:
        return quiet
    under = bed[(np.arange(pos, pos + pcm.size)) % bed.size]
    edges = audible_speech_edges(pcm, under, rate, threshold_dbfs=threshold + gain_db)
    if not edges:
        return quiet
    return edges[0][0], edges[-1][1]


# The rates a caller's wire may carry besides a clip's own (G.711 and the 8 kHz dialects,
# OpenAI Realtime's pcm16): the truth of each clip said at them is read before the call.
WIRE_RATES_HZ = (8000, 24000)


def prepare_heard_truth(script: list[Step], rates: tuple[int, ...] = WIRE_RATES_HZ) -> None:
    """Read the level of every clip the script says (:func:`audible_clip_edges` needs it
    under a bed, and :func:`edges_at_rate` at a wire's rate) and its edges at ``rates``
    now, once per clip for the process, rather than on a caller's clock: the first
    reading imports scipy (over a second) and each takes tens of ms."""
    for step in script:
        if isinstance(step, (Say, BargeIn, Interject)):
            named_truth_threshold(step.clip.name, step.clip.pcm, step.clip.sample_rate_hz)
            for rate in rates:
                segments_at_rate(step.clip, rate)


@dataclass(frozen=True, slots=True)
class Say:
    clip: Clip
    gain_db: float = 0.0


@dataclass(frozen=True, slots=True)
class Silence:
    ms: float


@dataclass(frozen=True, slots=True)
class WaitAgentStart:
    timeout_ms: float = 10000.0


@dataclass(frozen=True, slots=True)
class WaitAgentEnd:
    quiet_ms: float = 600.0  # agent silent this long counts as done
    timeout_ms: float = 30000.0
    start_timeout_ms: float = 10000.0  # how long to wait for the agent to begin


@dataclass(frozen=True, slots=True)
class BargeIn:
    """Wait until the agent speaks, let it talk ``after_ms``, then say ``clip`` over it."""

    after_ms: float
    clip: Clip
    timeout_ms: float = 10000.0


@dataclass(frozen=True, slots=True)
class Interject:
    """Wait until the agent speaks, let it talk ``after_ms``, then make a noise (a cough,
    a door) over it. Recorded as noise, not speech: a good agent keeps talking."""

    after_ms: float
    clip: Clip
    timeout_ms: float = 10000.0


@dataclass(frozen=True, slots=True)
class NoiseBed:
    """Background noise under everything the caller sends, at ``snr_db`` below speech.

    The speech level is the active level of the caller's clips (RMS over their true
    speech segments); the bed loops."""

    clip: Clip
    snr_db: float


Step = Say | Silence | WaitAgentStart | WaitAgentEnd | BargeIn | Interject


def _step_bounds_ms(step: Step) -> tuple[float, float]:
    """(the caller's own audio, the longest the step can take) of one step, in ms."""
    if isinstance(step, Say):
        return step.clip.duration_ms, step.clip.duration_ms
    if isinstance(step, Silence):
        return step.ms, step.ms
    if isinstance(step, WaitAgentStart):
        return 0.0, step.timeout_ms
    if isinstance(step, WaitAgentEnd):
        return 0.0, step.start_timeout_ms + step.timeout_ms
    # BargeIn, Interject: wait for the agent, let it talk, then the clip.
    return step.clip.duration_ms, step.timeout_ms + step.after_ms + step.clip.duration_ms


def caller_audio_s(steps: list[Step]) -> float:
    """Seconds of audio the caller plays by itself (clips and silences): the least a
    call following ``steps`` lasts."""
    return sum(_step_bounds_ms(s)[0] for s in steps) / 1000


def longest_call_s(steps: list[Step], tail_ms: float) -> float:
    """The longest a call following ``steps`` can last: every clip and silence, every
    wait for the agent to its timeout, and the tail before hanging up."""
    return (sum(_step_bounds_ms(s)[1] for s in steps) + tail_ms) / 1000


@dataclass(frozen=True, slots=True)
class CallerConfig:
    """How one scripted caller connects and speaks (what it says is its script)."""

    url: str
    dialect: Literal["raw", "twilio", "telnyx", "plivo", "vonage", "exotel", "openai-realtime"]
    sample_rate_hz: int = 16000  # raw and vonage; twilio, telnyx, plivo and exotel are 8 kHz
    frame_ms: int = 20
    headers: dict[str, str] = field(default_factory=dict)
    subprotocols: tuple[str, ...] = ()
    call_id: str = "CA00000000000000000000000000000000"
    tail_ms: float = DEFAULT_TAIL_MS  # silence after the script before hanging up
    noise_dbfs: float | None = None  # steady white noise under the caller's audio
    noise_bed: NoiseBed | None = None  # recorded background noise at an SNR
    keep_messages: bool = True  # keep every message sent and received (transparency tests)
    seed: int = 0
    # twilio: start.customParameters; telnyx: start.custom_parameters (NAME, VALUE) pairs
    custom_parameters: tuple[tuple[str, str], ...] = ()
    # openai-realtime: the caller is a Realtime client (formats by their beta names).
    realtime_input_format: str = "pcm16"
    realtime_output_format: str = "pcm16"
    realtime_beta: bool = False
    truncate_after_ms: float = 150.0  # barge-in speech onset -> truncate + response.cancel
    answer_tools: bool = True  # answer function calls: function_call_output + response.create
    tool_latency_ms: float = 300.0  # function_call_arguments.done -> function_call_output
