"""voicing_rows: the voicing of many windows in one pass is each window's own voicing."""

from __future__ import annotations

import numpy as np
import pytest

from voxproxy.analysis.voicing import VOICING_THRESHOLD, voicing, voicing_rows
from voxproxy.clips import load_clips


@pytest.mark.parametrize(("length", "rate"), [(240, 8000), (480, 16000), (160, 8000)])
def test_rows_equal_one_window_at_a_time(length: int, rate: int) -> None:
    rng = np.random.default_rng(17)
    windows = []
    for clip in load_clips().values():
        pcm = clip.pcm
        for start in rng.integers(0, pcm.size - length, size=12):
            windows.append(pcm[start : start + length])
    windows.append(np.zeros(length, dtype=np.int16))  # silence: no pitch
    windows.append(np.full(length, 300, dtype=np.int16))  # DC only: nothing after the mean
    batch = np.stack(windows)
    rows = voicing_rows(batch, rate // 400, rate // 80, rate)
    one_by_one = [voicing(w, rate // 400, rate // 80, rate) for w in windows]
    assert rows == one_by_one  # the same floats, not merely close
    assert rows[-2] == rows[-1] == 0.0
    # Speech clips carry pitched frames and the fixtures' noise does not dominate them.
    assert sum(v > VOICING_THRESHOLD for v in rows) > len(rows) // 10
