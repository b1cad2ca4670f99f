"""Content-free call flows replay through the real turn and tool machinery to their verdicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest
from support.flowkit import FLOWS_DIR, POLICIES_DIR, events
from support.scripted.flows import Flow, load_flow, load_flows, parse_flow, replay

from voxproxy.core.errors import FixtureError
from voxproxy.receipts.policy import load_policy
from voxproxy.receipts.verdict import VERDICTS, ToolCause, judge

POLICY = load_policy(POLICIES_DIR / "default.yaml")
FLOW_FILES = sorted(p for p in FLOWS_DIR.iterdir() if p.suffix in (".yaml", ".yml", ".json"))


@pytest.mark.parametrize("path", FLOW_FILES, ids=[p.stem for p in FLOW_FILES])
def test_every_flow_gets_its_expected_verdict(path: Path) -> None:
    flow = load_flow(path)
    assert flow.expect is not None, f"{path.name} has no expected verdict"
    v = judge(replay(flow), POLICY)
    assert (v.verdict, v.gate, v.cause) == (
        flow.expect.verdict,
        flow.expect.gate,
        flow.expect.cause,
    )
    # The verdict names the gate it failed at, and it was the last one consulted.
    assert v.gate == (list(v.evidence)[-1] if v.verdict != "pass" else None)


def test_the_flows_cover_every_verdict_and_every_tool_cause_the_brief_names() -> None:
    flows = load_flows(FLOWS_DIR)
    assert len(flows) >= 8
    expected = [f.expect for f in flows if f.expect is not None]
    assert {e.verdict for e in expected} == set(VERDICTS)
    assert {e.cause for e in expected if e.cause} >= {"unsafe_retry", "stale_write", "unfinished"}
    assert {e.cause for e in expected if e.cause} <= set(get_args(ToolCause))
    insufficient = {e.gate for e in expected if e.verdict == "insufficient_evidence"}
    assert insufficient >= {"interruption", "outcome"}


def by_name(name: str) -> Flow:
    return next(f for f in load_flows(FLOWS_DIR) if f.name == name)


def test_the_pass_flow_exercises_the_machinery() -> None:
    r = replay(by_name("pass"))
    assert [t.kind for t in r.turns] == ["agent_initiated", "response", "response"]
    assert [t.ttfs_ms for t in r.turns] == [None, 600.0, 600.0]
    b = r.turns[2].barge_in
    assert b is not None
    assert (b.onset_ms, b.stop_ms, b.stop_latency_ms, b.outcome, b.evidence) == (
        5200.0,
        5350.0,
        150.0,
        "stopped",
        "flush",
    )
    assert r.turns[1].agent_offset_ms == 5350.0  # the flush cut the audible audio
    assert r.summary.flushes == 1
    assert r.effects is not None and r.effects.backend_verified == 1
    assert r.effects.confirmation_mismatches == 0 and r.effects.outcome_verified is True
    assert (r.dialect, r.transport, r.terminal, r.upstream_connect_ms) == (
        "flow",
        "offline",
        "completed",
        120.0,
    )


def test_stale_writes_carry_their_scenario() -> None:
    causes = {
        name: [c.stale_cause for c in replay(by_name(name)).tools if c.stale_write]
        for name in ("stale_write_after_correction", "stale_write_after_barge_in")
    }
    assert causes == {
        "stale_write_after_correction": ["correction"],
        "stale_write_after_barge_in": ["barge_in"],
    }


def test_replay_is_deterministic() -> None:
    for flow in load_flows(FLOWS_DIR):
        assert replay(flow).to_json_line() == replay(flow).to_json_line()


def flow_data(evs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": "bad", "events": evs}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda e: [x for x in e if x["kind"] != "ended"], "exactly one ended event (found 0)"),
        (lambda e: [x for x in e if x["kind"] != "connected"], "exactly one connected event"),
        (lambda e: [*e, {"t_ms": 50, "kind": "answered"}], "at most one answered event"),
        (
            lambda e: [*e, {"t_ms": 99_999, "kind": "flush"}],
            "flush at 99999.0 ms comes after ended",
        ),
        (
            lambda e: [*e, {"t_ms": 3000, "kind": "caller_speech_end"}],
            "caller_speech_end at 3000.0 ms has no start",
        ),
        (
            lambda e: [*e, {"t_ms": 700, "kind": "caller_speech_start"}],
            "caller_speech_start at 700.0 ms: the caller's edge opened at 500.0 ms has no end",
        ),
        (
            lambda e: [*e, {"t_ms": 700, "kind": "caller_speech_start", "text": "hello"}],
            "events.8.text: Extra inputs are not permitted",
        ),
        (
            lambda e: [*e, {"t_ms": 700, "kind": "flush", "operation_id": "x"}],
            "flush does not carry operation_id",
        ),
        (
            lambda e: [*e, {"t_ms": 700, "kind": "tool.finished", "status": "great"}],
            "events.8.status: Input should be 'ok'",
        ),
        (
            lambda e: [*e, {"t_ms": 700, "kind": "outcome.verified"}],
            "needs verified: true or false",
        ),
        (lambda e: [*e, {"t_ms": -1, "kind": "flush"}], "greater than or equal to 0"),
        (lambda e: [*e, {"t_ms": 700, "kind": "dtmf"}], "events.8.kind: Input should be"),
    ],
)
def test_invalid_flows_say_what_is_wrong(mutate: Any, message: str) -> None:
    evs = events(caller=[(500, 1500)], agent=[(2100, 3000)], end_ms=4000)
    assert len(evs) == 8
    with pytest.raises(FixtureError) as info:
        parse_flow(flow_data(mutate(evs)), "flows/bad.yaml")
    assert str(info.value).startswith("flows/bad.yaml: invalid flow:")
    assert message in str(info.value)


def test_a_flow_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("events: [", encoding="utf-8")
    with pytest.raises(FixtureError, match=r"broken\.yaml: cannot read flow"):
        load_flow(bad)
    with pytest.raises(FixtureError, match=r"missing\.yaml: cannot read flow"):
        load_flow(tmp_path / "missing.yaml")


def test_json_flows_load_too(tmp_path: Path) -> None:
    import json

    path = tmp_path / "f.json"
    evs = events(caller=[(500, 1500)], agent=[(2100, 3000)], end_ms=4000)
    path.write_text(json.dumps({"name": "j", "expect": {"verdict": "pass"}, "events": evs}))
    (flow,) = load_flows(tmp_path)
    assert judge(replay(flow), POLICY).verdict == "pass"
