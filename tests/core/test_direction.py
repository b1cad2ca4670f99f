"""voxproxy.core.direction: which way a message travels, and its short name."""

from __future__ import annotations

from voxproxy.core.direction import AGENT_TO_CALLER, CALLER_TO_AGENT, Direction


def test_the_two_directions_and_their_short_names() -> None:
    assert list(Direction) == [CALLER_TO_AGENT, AGENT_TO_CALLER]
    assert (CALLER_TO_AGENT.short, AGENT_TO_CALLER.short) == ("caller", "agent")


def test_the_values_are_the_indexes_the_core_keeps_per_direction() -> None:
    # Per-direction state is kept in two-slot lists indexed by the direction.
    assert (int(CALLER_TO_AGENT), int(AGENT_TO_CALLER)) == (0, 1)
    assert ["a", "b"][AGENT_TO_CALLER] == "b"
