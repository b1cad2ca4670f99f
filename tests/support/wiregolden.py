"""Pinned wire bytes: scenarios of builder calls, and the JSON file that holds their output.

A scenario is a function that calls builders with fixed inputs and returns the messages
they built. The golden file maps each scenario's name to those messages, text as it is
and binary (or encoded audio) as ``{"hex": ...}``: a refactor of a builder must leave
every one the same, spacing, key order, escapes and counters included.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

Message = bytes | str
Scenario = Callable[[], list[Message]]


def as_json(messages: list[Message]) -> list[object]:
    """Text as it is; bytes as ``{"hex": ...}`` (JSON has no bytes)."""
    return [m if isinstance(m, str) else {"hex": m.hex()} for m in messages]


def pinned(golden: Path) -> dict[str, list[object]]:
    data: dict[str, list[object]] = json.loads(golden.read_text(encoding="utf-8"))
    return data


def check(golden: Path, scenarios: Mapping[str, Scenario], name: str) -> None:
    """Assert that scenario ``name`` builds, message for message, what ``golden`` pins."""
    got = as_json(scenarios[name]())
    want = pinned(golden)[name]
    assert len(got) == len(want), f"{name}: {len(got)} messages, pinned {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, f"{name} message {i}"


def write(golden: Path, scenarios: Mapping[str, Scenario]) -> None:
    """Re-pin: only after a deliberate wire change, said in the commit."""
    data = {name: as_json(run()) for name, run in sorted(scenarios.items())}
    golden.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def golden_tests(
    golden: Path, scenarios: Mapping[str, Scenario]
) -> tuple[Callable[[], None], Callable[[str], None]]:
    """``test_every_scenario_is_pinned`` and ``test_sends_the_pinned_bytes`` (one per scenario)."""

    def test_every_scenario_is_pinned() -> None:
        assert sorted(pinned(golden)) == sorted(scenarios)

    @pytest.mark.parametrize("scenario", sorted(scenarios))
    def test_sends_the_pinned_bytes(scenario: str) -> None:
        check(golden, scenarios, scenario)

    return test_every_scenario_is_pinned, test_sends_the_pinned_bytes


def main(golden: Path, scenarios: Mapping[str, Scenario]) -> None:
    """``python <test module> --write`` re-pins (see :func:`write`)."""
    if sys.argv[1:] != ["--write"]:
        raise SystemExit(f"usage: {sys.argv[0]} --write")
    write(golden, scenarios)
