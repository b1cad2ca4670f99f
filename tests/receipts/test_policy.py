"""The verdict policy: defaults, validation with clear messages, a stable hash."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.flowkit import POLICIES_DIR

from voxproxy.core.errors import ConfigError
from voxproxy.receipts.policy import (
    GATE_ORDER,
    Policy,
    default_policy_text,
    load_policy,
    parse_policy,
)


def test_the_embedded_default_is_the_contracts() -> None:
    p = load_policy()
    assert p.max_first_response_ms == 1200
    assert p.max_interrupt_stop_ms == 300
    # An outcome check is required of the calls that carry task events (auto profile).
    assert p.require_outcome == "auto" and p.profile == "auto"
    assert (
        p.gates
        == GATE_ORDER
        == (
            "reachability",
            "turn_timing",
            "interruption",
            "tool_effect",
            "outcome",
        )
    )
    assert p.critical_tools == ()
    assert p.hash == Policy().hash  # every default spelled out changes nothing


def test_the_fixture_copy_matches_the_embedded_default() -> None:
    text = (POLICIES_DIR / "default.yaml").read_text(encoding="utf-8")
    assert text == default_policy_text()
    assert load_policy(POLICIES_DIR / "default.yaml") == load_policy()


def test_same_content_same_hash() -> None:
    a = parse_policy("version: 1\nmax_first_response_ms: 1200\nmax_interrupt_stop_ms: 300\n")
    b = parse_policy(
        "# a comment\nmax_interrupt_stop_ms: 300.0\nversion: '1'\n"
        "max_first_response_ms: 1200.0\ncritical_tools: []\n"
    )
    assert a.hash == b.hash
    assert a.hash.startswith("sha256:") and len(a.hash) == len("sha256:") + 16
    # The description does not judge anything, so it is not part of the hash.
    assert parse_policy("description: staging").hash == parse_policy("description: prod").hash
    # Critical tools are a set: order and repeats do not matter.
    assert (
        parse_policy("critical_tools: [b, a, a]").hash
        == parse_policy("critical_tools: [a, b]").hash
    )


@pytest.mark.parametrize(
    "change",
    [
        "max_first_response_ms: 1201",
        "max_first_response_ms: 1199.9",
        "max_interrupt_stop_ms: 301",
        "require_outcome: false",
        "gates: [reachability, turn_timing]",
        "critical_tools: [book_appointment]",
        "version: 2",
    ],
)
def test_any_threshold_or_gate_change_changes_the_hash(change: str) -> None:
    assert parse_policy(change).hash != load_policy().hash


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("max_first_respone_ms: 900", "max_first_respone_ms: unknown field (known: version,"),
        ("max_first_response_ms: -5", "max_first_response_ms: Input should be greater than 0"),
        ("max_interrupt_stop_ms: .nan", "max_interrupt_stop_ms: Input should be a finite number"),
        ("max_first_response_ms: fast", "max_first_response_ms: Input should be a valid number"),
        ("require_outcome: maybe", "require_outcome: Value error, must be true, false or auto"),
        ("gates: [turn_timing, reachability]", "list them in that order"),
        ("gates: [outcome, outcome]", "a gate is listed twice"),
        ("gates: []", "at least one gate is needed"),
        ("gates: [vibes]", "gates.0: Input should be 'reachability', 'turn_timing'"),
        ("version: ''", "version: String should have at least 1 character"),
        ("critical_tools: ['']", "a tool name is empty"),
        ("- a list", "a policy is a mapping of fields, got list"),
        ("max_first_response_ms: [1", "not valid YAML"),
    ],
)
def test_invalid_policies_say_what_and_where(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_policy(text, "policies/strict.yaml")
    assert str(info.value).startswith("policies/strict.yaml: ")
    assert message in str(info.value)


def test_an_empty_file_is_the_default_policy() -> None:
    assert parse_policy("").hash == load_policy().hash


def test_an_unreadable_policy_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match=r"nope\.yaml: cannot read policy"):
        load_policy(missing)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match=r"bin\.yaml: cannot read policy"):
        load_policy(binary)


def test_named_profiles_ship_in_the_package() -> None:
    latency = load_policy("latency-only")
    assert latency.profile == "latency-only"
    assert latency.gates == ("reachability", "turn_timing", "interruption")
    assert latency.require_outcome is False
    task = load_policy("task-outcome")
    assert task.gates == GATE_ORDER and task.require_outcome is True
    assert len({latency.hash, task.hash, load_policy("auto").hash}) == 3
    assert load_policy("auto") == load_policy()
    with pytest.raises(ConfigError, match="a profile name is one of auto, latency-only"):
        load_policy("latency_only")
