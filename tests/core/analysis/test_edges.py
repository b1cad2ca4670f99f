"""FrameLevels: the last frame levels of an utterance, as a deque with a maximum length."""

from __future__ import annotations

from collections import deque

import numpy as np

from voxproxy.core.analysis.edges import FrameLevels


def test_frame_levels_hold_what_a_bounded_deque_holds() -> None:
    rng = np.random.default_rng(9)
    levels, expected = FrameLevels(7), deque[float](maxlen=7)
    for step in range(100):
        if step in (40, 41, 77):
            levels.clear()
            expected.clear()
        value = float(rng.normal(-30.0, 10.0))
        levels.append(value)
        expected.append(value)
        assert len(levels) == len(expected)
        assert levels.array().tolist() == list(expected)
    assert FrameLevels(3).array().size == 0


def test_frame_levels_count_what_was_appended_and_give_the_last_ones() -> None:
    levels = FrameLevels(5)
    for i in range(12):
        levels.append(float(i))
    assert levels.total == 12  # since the last clear, beyond what is kept
    assert levels.last(3).tolist() == [9.0, 10.0, 11.0]
    assert levels.last(50).tolist() == levels.array().tolist() == [7.0, 8.0, 9.0, 10.0, 11.0]
    assert levels.last(0).size == 0
    levels.clear()
    assert levels.total == 0 and levels.last(3).size == 0
