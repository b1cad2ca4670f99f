"""voxproxy.core.session.config: a session's settings, and the one rounding of its figures
from nanoseconds to the receipt's milliseconds."""

from __future__ import annotations

import dataclasses

import pytest

from voxproxy.core.analysis.playout import MAX_AHEAD_NS
from voxproxy.core.session.config import SessionConfig, ms
from voxproxy.core.timebase import NS_PER_MS


@pytest.mark.parametrize(
    ("ns", "expected"),
    [
        (None, None),
        (0, 0.0),
        (1_234_567, 1.2),  # to 0.1 ms
        (1_250_001, 1.3),
        (-2_049_999, -2.0),  # a negative figure (talk-over) rounds the same way
        (3_600_000 * NS_PER_MS, 3_600_000.0),
    ],
)
def test_nanoseconds_become_the_receipts_tenths_of_milliseconds(
    ns: int | None, expected: float | None
) -> None:
    assert ms(ns) == expected


def test_the_settings_are_frozen_and_hold_the_playout_bound_in_ms() -> None:
    config = SessionConfig()
    assert config.agent_queue_ahead_ms * NS_PER_MS == MAX_AHEAD_NS
    assert (config.transport, config.agent_playout) == ("websocket", "model")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.transport = "webrtc"  # type: ignore[misc]
