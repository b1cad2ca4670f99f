"""Ground-truth speech edges of a clean recording (MEASUREMENT.md section 2).

Used once per fixture, on the clean clip before any noise is mixed in, and by
tests that build scripted timelines. The rule is relative to the speech's own
level, so that anyone can recompute it and a quiet talker keeps the same edges
as a loud one:

1. L = the recording's active speech level (ITU-T P.56 method B,
   :func:`voxproxy.core.audio.levels.active_speech_level`);
2. a 1 ms window is speech when its mean power is within ``TRUTH_RANGE_DB`` (35 dB)
   of L, i.e. above ``L - 35`` dBFS (for speech at -20 dBFS: above -55 dBFS);
3. runs closer than ``merge_gap_ms`` (300) are merged, the detector's own rule;
   runs shorter than ``min_speech_ms`` (60) are dropped.

Under a noise bed the truth is what a listener can hear (:func:`audible_speech_edges`):
a window counts only where the clean speech also stands above the bed's own level in
the same window, the bed taken alone before it was mixed in. Speech under the noise is
masked, for a listener and for the agent's endpointer alike.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voxproxy.core.audio.levels import active_speech_level, window_energy_db
from voxproxy.core.events import Pcm

# A noise bed on the scale of 16-bit samples: as recorded, or in floats before mixing.
Noise = Pcm | npt.NDArray[np.float64]

TRUTH_RANGE_DB = 35.0
MERGE_GAP_MS = 300.0  # runs of speech windows closer than this are one
MIN_SPEECH_MS = 60.0  # a run shorter than this is no speech (a click)
TRUTH_RULE = (
    f"1 ms windows with mean power within {TRUTH_RANGE_DB:g} dB of the clip's active speech "
    "level (ITU-T P.56 method B) on the clean clip; runs closer than 300 ms merged; runs "
    "shorter than 60 ms dropped"
)


def truth_threshold_dbfs(pcm: Pcm, sample_rate_hz: int) -> float | None:
    """The level above which a 1 ms window of ``pcm`` is speech, or ``None`` if silent."""
    level = active_speech_level(pcm, sample_rate_hz)
    return None if level is None else level - TRUTH_RANGE_DB


def speech_edges(
    pcm: Pcm,
    sample_rate_hz: int,
    *,
    threshold_dbfs: float | None = None,
    merge_gap_ms: float = MERGE_GAP_MS,
    min_speech_ms: float = MIN_SPEECH_MS,
) -> list[list[float]]:
    """``[[onset_ms, offset_ms], ...]`` of the speech in a clean clip.

    ``threshold_dbfs`` overrides the level-relative threshold (for tests of the
    run logic itself)."""
    if threshold_dbfs is None:
        threshold_dbfs = truth_threshold_dbfs(pcm, sample_rate_hz)
        if threshold_dbfs is None:
            return []
    window = sample_rate_hz // 1000
    active = window_energy_db(pcm, window) > threshold_dbfs
    return speech_runs(active, merge_gap_ms=merge_gap_ms, min_speech_ms=min_speech_ms)


def audible_windows(
    speech: Pcm,
    noise: Noise,
    sample_rate_hz: int,
    threshold_dbfs: float,
) -> npt.NDArray[np.bool_]:
    """Which 1 ms windows of ``speech`` a listener hears over ``noise`` (MEASUREMENT.md 2):
    the clean speech's mean power is above ``threshold_dbfs`` (its level less 35 dB) and
    above the noise's own in the same window. ``noise`` is the bed alone, sample for
    sample under ``speech`` (as long, or longer: the rest is not read)."""
    window = sample_rate_hz // 1000
    if noise.size < speech.size:
        raise ValueError(f"noise of {noise.size} samples under speech of {speech.size}")
    s_db = window_energy_db(speech, window)
    n_db = window_energy_db(noise[: speech.size], window)
    heard: npt.NDArray[np.bool_] = (s_db > threshold_dbfs) & (s_db > n_db)
    return heard


def audible_speech_edges(
    speech: Pcm,
    noise: Noise | None,
    sample_rate_hz: int,
    *,
    threshold_dbfs: float | None = None,
    merge_gap_ms: float = MERGE_GAP_MS,
    min_speech_ms: float = MIN_SPEECH_MS,
) -> list[list[float]]:
    """``[[onset_ms, offset_ms], ...]`` of the speech a listener hears in ``speech`` once
    ``noise`` (the bed alone, sample for sample under it) is mixed in: the runs of
    :func:`audible_windows`, merged and dropped as :func:`speech_edges` does. With no
    noise, :func:`speech_edges` itself.

    ``threshold_dbfs``: the clean recording's level less 35 dB (default: read from
    ``speech``). A clip said over a bed is often at another rate than its recording, or
    cut: pass the recording's own threshold so that only the noise moves an edge."""
    if threshold_dbfs is None:
        threshold_dbfs = truth_threshold_dbfs(speech, sample_rate_hz)
        if threshold_dbfs is None:
            return []
    if noise is None:
        active = window_energy_db(speech, sample_rate_hz // 1000) > threshold_dbfs
    else:
        active = audible_windows(speech, noise, sample_rate_hz, threshold_dbfs)
    return speech_runs(active, merge_gap_ms=merge_gap_ms, min_speech_ms=min_speech_ms)


def speech_runs(
    active: npt.NDArray[np.bool_],
    *,
    merge_gap_ms: float = MERGE_GAP_MS,
    min_speech_ms: float = MIN_SPEECH_MS,
) -> list[list[float]]:
    """The runs of speech windows (1 ms each) in ``active``, as ``[[onset_ms, offset_ms],
    ...]``: runs closer than ``merge_gap_ms`` merged, runs shorter than ``min_speech_ms``
    dropped."""
    idx = np.nonzero(active)[0]
    if idx.size == 0:
        return []
    runs: list[list[float]] = []
    start = prev = int(idx[0])
    for i in idx[1:]:
        i = int(i)
        if i - prev - 1 >= merge_gap_ms:
            runs.append([float(start), float(prev + 1)])
            start = i
        prev = i
    runs.append([float(start), float(prev + 1)])
    return [r for r in runs if r[1] - r[0] >= min_speech_ms]


def speech_windows(pcm: Pcm, sample_rate_hz: int) -> npt.NDArray[np.bool_]:
    """Which 1 ms windows of a clean clip are speech by the truth rule (before merging)."""
    threshold = truth_threshold_dbfs(pcm, sample_rate_hz)
    if threshold is None:
        return np.zeros(0, dtype=np.bool_)
    mask: npt.NDArray[np.bool_] = window_energy_db(pcm, sample_rate_hz // 1000) > threshold
    return mask


_NAMED: dict[tuple[str, int, int], npt.NDArray[np.bool_]] = {}
_THRESHOLDS: dict[tuple[str, int, int], float | None] = {}


def named_truth_threshold(name: str, pcm: Pcm, sample_rate_hz: int) -> float | None:
    """:func:`truth_threshold_dbfs` of a named clip, computed once per clip (name, length
    and rate): a load of callers says the same clips again and again."""
    key = (name, pcm.size, sample_rate_hz)
    if key not in _THRESHOLDS:
        if len(_THRESHOLDS) > 256:
            _THRESHOLDS.clear()
        _THRESHOLDS[key] = truth_threshold_dbfs(pcm, sample_rate_hz)
    return _THRESHOLDS[key]


def named_speech_windows(name: str, pcm: Pcm, sample_rate_hz: int) -> npt.NDArray[np.bool_]:
    """:func:`speech_windows` of a named clip, computed once per clip (name, length and
    rate) and kept for the next call (a few hundred clips at most)."""
    key = (name, pcm.size, sample_rate_hz)
    mask = _NAMED.get(key)
    if mask is None:
        if len(_NAMED) > 256:
            _NAMED.clear()
        mask = _NAMED[key] = speech_windows(pcm, sample_rate_hz)
    return mask


_CARRIED: dict[tuple[str, int, int, int], npt.NDArray[np.bool_]] = {}


def carried_speech_windows(
    name: str, recording: Pcm, recording_rate: int, carried: Pcm, rate: int
) -> npt.NDArray[np.bool_]:
    """Which 1 ms windows of a recording, as a wire carries it, are speech: ``carried`` is
    ``recording`` brought to the wire's ``rate`` (before its codec quantises it), and a
    window counts when its mean power stands above the recording's own level less 35 dB.

    The truth is read from the audio the wire carries, at its rate: a band limit takes
    what lies above it out of every window, and a release whose energy lies mostly there
    (an affricate, a fricative) ends earlier on the wire than on the recording (the
    project's ``caller_topic_change``: 3,833 ms on its 16 kHz recording, 3,786 ms on 8 kHz;
    linear interpolation to 24 or 48 kHz attenuates it the same way). The threshold stays
    the recording's, as under a noise bed (:func:`audible_speech_edges`), so that only the
    wire moves an edge. Computed once per clip (name, length and rates)."""
    key = (name, recording.size, recording_rate, rate)
    mask = _CARRIED.get(key)
    if mask is None:
        threshold = named_truth_threshold(name, recording, recording_rate)
        if threshold is None:
            mask = np.zeros(0, dtype=np.bool_)
        else:
            mask = window_energy_db(carried, rate // 1000) > threshold
        if len(_CARRIED) > 256:
            _CARRIED.clear()
        _CARRIED[key] = mask
    return mask


def carried_speech_edges(
    name: str, recording: Pcm, recording_rate: int, carried: Pcm, rate: int
) -> list[list[float]]:
    """``[[onset_ms, offset_ms], ...]`` of :func:`carried_speech_windows` (the truth's runs:
    merged under 300 ms apart, dropped under 60 ms)."""
    return speech_runs(carried_speech_windows(name, recording, recording_rate, carried, rate))


def last_speech_end_ms(windows: npt.NDArray[np.bool_], start_ms: float, cut_ms: float) -> float:
    """Where the speech of a run that starts at ``start_ms`` ends when its audio is cut at
    ``cut_ms``: the end of its last speech window before the cut. A run's merged pauses
    are silence, so a cut inside one ends the speech before it, not at the cut (the
    offset is the last window within the range of the level). ``cut_ms`` when there are
    no windows to read (a silent clip)."""
    lo, hi = max(0, int(start_ms)), min(windows.size, int(cut_ms))
    idx = np.flatnonzero(windows[lo:hi])
    if idx.size == 0:
        return cut_ms
    return min(cut_ms, float(lo + int(idx[-1]) + 1))


def heard_runs(runs_ns: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The truth rule's runs over what a listener heard of an answer: its speech runs as
    they played (``[start, end)`` on the listener's clock, in order, each cut where its
    audio was cut), merged where closer than :data:`MERGE_GAP_MS`, less a last run shorter
    than :data:`MIN_SPEECH_MS` (a few ms of speech before a flush are a click to a
    listener, and to the rule). A lone run is kept, however short."""
    merged: list[tuple[int, int]] = []
    gap = int(MERGE_GAP_MS * 1_000_000)
    for a, b in runs_ns:
        if merged and a - merged[-1][1] < gap:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    shortest = int(MIN_SPEECH_MS * 1_000_000)
    while len(merged) > 1 and merged[-1][1] - merged[-1][0] < shortest:
        merged.pop()
    return merged
