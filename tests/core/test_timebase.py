"""Units and the epoch anchor (pure), and the shells' anchor that reads the clocks."""

from __future__ import annotations

import time

from voxproxy import clock
from voxproxy.core import timebase


def test_units() -> None:
    assert timebase.NS_PER_S == 1000 * timebase.NS_PER_MS == 10**9


def test_an_anchor_maps_monotonic_to_wall_time() -> None:
    anchor = timebase.EpochAnchor(mono_ns=5 * timebase.NS_PER_S, wall_ns=1_700_000_000 * 10**9)
    assert anchor.wall_ns_at(6 * timebase.NS_PER_S) == 1_700_000_001 * 10**9
    assert anchor.iso_at(5 * timebase.NS_PER_S + 250 * timebase.NS_PER_MS) == (
        "2023-11-14T22:13:20.250Z"
    )


def test_the_shells_anchor_reads_both_clocks_together() -> None:
    before = time.time_ns()
    anchor = clock.EpochAnchor.now()
    after = time.time_ns()
    assert isinstance(anchor, timebase.EpochAnchor)
    assert before <= anchor.wall_ns <= after
