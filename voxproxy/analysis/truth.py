"""Ground-truth speech edges of a clean recording.

Used once per fixture, on the clean clip before any noise is mixed in, and by
tests that build scripted timelines. The rule is deliberately simple, so that
anyone can recompute it: 1 ms windows; a window is active when its mean power
is above ``TRUTH_THRESHOLD_DBFS``; active runs closer than ``merge_gap_ms`` are
merged (the detector's own rule); runs shorter than ``min_speech_ms`` are
dropped.
"""

from __future__ import annotations

import numpy as np

from voxproxy.audio.levels import window_energy_db
from voxproxy.events import Pcm

TRUTH_THRESHOLD_DBFS = -50.0
TRUTH_RULE = (
    f"1 ms windows with mean power above {TRUTH_THRESHOLD_DBFS:g} dBFS on the clean clip; "
    "runs closer than 300 ms merged; runs shorter than 60 ms dropped"
)


def speech_edges(
    pcm: Pcm,
    sample_rate_hz: int,
    *,
    threshold_dbfs: float = TRUTH_THRESHOLD_DBFS,
    merge_gap_ms: float = 300.0,
    min_speech_ms: float = 60.0,
) -> list[list[float]]:
    """``[[onset_ms, offset_ms], ...]`` of the speech in a clean clip."""
    window = sample_rate_hz // 1000
    active = window_energy_db(pcm, window) > threshold_dbfs
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
