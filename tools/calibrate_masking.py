"""How much of a speech edge a bed of noise hides, by how far under the talker's level
the detector can still see (the masking table in ``voxproxy/core/analysis/vadconfig.py``).

The truth counts every 1 ms window within 35 dB of the talker's P.56 level
(MEASUREMENT.md 2). Under noise, the detector's edge walks stop ``edge_margin_db``
(6 dB) above the floor: it sees down to ``R = level - floor - 6`` dB under the level.
For each R, this takes every true segment of the project's speech clips and the
corpus's voices, and measures the time between the truth's onset and the first window
above ``level - R`` (the onset hidden), and between the last such window and the
truth's offset (the offset hidden). It prints the 95th percentile of each.

Run: .venv/bin/python tools/calibrate_masking.py
"""

from __future__ import annotations

import numpy as np

from voxproxy.clips import Clip, load_clips, load_corpus
from voxproxy.core.audio.levels import active_speech_level, window_energy_db

DEPTHS_DB = (0, 5, 10, 15, 20, 25, 28, 30, 31, 32, 33, 34, 35)


def voices() -> list[Clip]:
    clips = [*load_clips().values(), *load_corpus().values()]
    return [c for c in clips if c.kind == "speech" and not c.name.startswith("synth")]


def hidden_ms(depth_db: float) -> tuple[list[float], list[float]]:
    """Onset and offset hidden (ms) of every true segment, seen down to ``depth_db``."""
    onsets: list[float] = []
    offsets: list[float] = []
    for clip in voices():
        rate = clip.sample_rate_hz
        level = active_speech_level(clip.pcm, rate)
        if level is None:
            continue
        db = window_energy_db(clip.pcm, rate // 1000)
        for on, off in clip.segments_ms:
            seg = db[int(on) : int(off)]
            seen = np.nonzero(seg > level - depth_db)[0]
            if seen.size == 0:
                onsets.append(off - on)
                offsets.append(off - on)
                continue
            onsets.append(float(seen[0]))
            offsets.append(float(off - on - seen[-1] - 1))
    return onsets, offsets


def table() -> list[tuple[int, float, float]]:
    rows = []
    for depth in DEPTHS_DB:
        on, off = hidden_ms(depth)
        rows.append((depth, float(np.percentile(on, 95)), float(np.percentile(off, 95))))
    return rows


def main() -> None:
    print(f"{'seen down to':>14} {'onset hidden p95':>17} {'offset hidden p95':>18}")
    for depth, on, off in table():
        print(f"{depth:>11} dB {on:>14.0f} ms {off:>15.0f} ms")


if __name__ == "__main__":
    main()
