"""The outcome testbench: scenario files, the channel to the mock, and a live run of one
scenario per fault against the correct and the faulty mock agent (about 15 s)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest
import yaml

from support.groundtruth import LOAD_REASONS
from support.privacy import assert_content_free
from support.testbench import (
    AGENTS,
    FAULT_CAUSE,
    fault_checks,
    load_testbench,
    outcome_policy,
    run_testbench,
    scenarios_dir,
)
from voxproxy.core.errors import FixtureError
from voxproxy.loadgen.outcome import CAUSE_AXIS
from voxproxy.loadgen.runner import LoadPlan, _url
from voxproxy.loadgen.scenario import Scenario
from voxproxy.receipts.release import release_gate
from voxproxy.receipts.verdict import check
from voxproxy.simcall.script import TASK_FAULTS

SECRET = b"testbench-test"


def caller_values(scenario: Scenario) -> list[str]:
    """Every value the caller gives in the scenario: what must never reach a receipt."""
    assert scenario.setup is not None
    script = scenario.setup.task_script()
    values = [str(v) for t in script.turns for _, v in t.updates if not isinstance(v, bool)]
    assert values, scenario.name  # the check below has something to look for
    return values


# One scenario per fault of the faulty mock, and one where nothing should go wrong.
LIVE = {
    "c06_dont_send_during_build": ["stale_args"],
    "i04_hello_mid_flight": ["no_cancel"],
    "i06_cough_in_flight": ["noise_is_speech"],
    "f02_empty_result": ["unchecked_result"],
    "f04_server_error_booking": ["unsafe_retry"],
    "f08_async_pending": ["confirm_before_result"],
    "f09_slow_success": [],
}


def test_the_failure_matrix_is_thirty_calls_in_equal_parts() -> None:
    found = load_testbench()
    assert len(found) == 30
    assert Counter(s.category for s, _ in found) == {
        "correction": 10,
        "interruption": 10,
        "tool_failure": 10,
    }
    for s, _ in found:
        assert (scenarios_dir() / f"{s.name}.yaml").exists()
        assert s.setup is not None and s.expected is not None
        # The expected state is what the turns leave behind.
        state: dict[str, Any] = {}
        for t in s.setup.task_script().turns:
            state.update(dict(t.updates))
        assert state == s.expected.state, s.name
    assert [s.name for s, _ in load_testbench(["f09_slow_success"])] == ["f09_slow_success"]
    with pytest.raises(FixtureError, match="no testbench scenario named nope"):
        load_testbench(["nope"])


def test_setup_and_expected_blocks() -> None:
    doc = yaml.safe_load(
        """
        name: x
        steps: [{say: caller_yes}]
        category: correction
        setup:
          tool: update_order
          args: [order_number]
          backend: {order_number: "0"}
          turns:
            - {set: [{order_number: "1"}, {order_number: "2"}], act: true}
            - {}
          attempts: [timeout, {kind: ok, latency_ms: 10}]
        expected: {state: {order_number: "2"}, args: {order_number: "2"}}
        """
    )
    s = Scenario.model_validate(doc)
    assert s.setup is not None
    script = s.setup.task_script()
    assert script.turns[0].updates == (("order_number", "1"), ("order_number", "2"))
    assert [a.kind for a in script.attempts] == ["timeout", "ok"]
    with pytest.raises(ValueError, match="both setup and expected"):
        Scenario.model_validate({**doc, "expected": None})
    with pytest.raises(ValueError, match="append effect"):
        Scenario.model_validate({**doc, "setup": {**doc["setup"], "effect": "append"}})
    with pytest.raises(ValueError):
        Scenario.model_validate({**doc, "setup": {**doc["setup"], "tool": "not a name"}})


def test_the_scenario_name_rides_in_the_request_path() -> None:
    plan = LoadPlan(target="ws://127.0.0.1:9/?x=1", dialect="raw", scenarios=(), tag_path=True)
    assert _url(plan, "CA1", "c01") == "ws://127.0.0.1:9/CA1?x=1"
    tagged = LoadPlan(
        target="ws://127.0.0.1:9/?x=1",
        dialect="raw",
        scenarios=(),
        tag_path=True,
        tag_scenario=True,
    )
    assert _url(tagged, "CA1", "c01") == "ws://127.0.0.1:9/c01/CA1?x=1"


def test_every_fault_has_a_cause_and_an_axis() -> None:
    assert set(FAULT_CAUSE) == set(TASK_FAULTS)
    assert all(CAUSE_AXIS[c] is not None for c in FAULT_CAUSE.values())
    assert not any(getattr(AGENTS["correct"], f"fault_{f}", False) for f in TASK_FAULTS)
    assert AGENTS["faulty"].noise_is_speech and all(
        getattr(AGENTS["faulty"], f"fault_{f}") for f in TASK_FAULTS if f != "noise_is_speech"
    )


@pytest.mark.slow
async def test_each_fault_is_caught_by_its_axis_and_the_correct_agent_passes() -> None:
    scenarios = load_testbench(list(LIVE))
    policy = outcome_policy(scenarios)
    calls = await run_testbench(scenarios, secret=SECRET, policy=policy, together=True)
    assert len(calls) == 2 * len(LIVE)
    for c in calls:
        assert c.error is None and c.receipt is not None and c.task is not None, c.scenario.name
        assert c.task.errors == []
        # Content-free: the values the caller gave never reach the receipt, checked field
        # by field (a substring search finds "4281" inside random hashes by chance).
        assert_content_free(c.receipt.to_json_line(), caller_values(c.scenario))
    correct = [c for c in calls if c.agent == "correct"]
    faulty = [c for c in calls if c.agent == "faulty"]
    passed = 0
    for c in correct:
        assert c.receipt is not None
        # (A failure says which axes failed, and each barge-in as measured: its outcome, the
        # reason a figure was withheld, and how much measurement shed in the call.)
        barges = [(t.index, t.barge_in) for t in c.receipt.turns if t.barge_in is not None]
        assert c.score.integrity, (
            c.scenario.name,
            {a: r.why for a, r in c.score.axes.items() if not r.held},
            barges,
            c.receipt.anomalies,
        )
        assert c.task is not None and c.task.faults == []
        assert c.receipt is not None and c.receipt.verdict is not None
        verdict = c.receipt.verdict
        if verdict.verdict == "insufficient_evidence":
            # Figures withheld for the machine's load only (each reason in parentheses),
            # said out loud; any other reason, or any other verdict, fails.
            why = re.findall(r"\(([a-z_ ]+)\)", verdict.reason or "")
            assert why and all(r in LOAD_REASONS for r in why), (c.scenario.name, verdict)
            print(f"{c.scenario.name}: {verdict.reason} on a busy machine")
        else:
            assert verdict.verdict == "pass", (c.scenario.name, verdict.reason)
            passed += 1
    assert passed >= 1  # a busy machine may withhold figures, never every call's
    for c in faulty:
        name = c.scenario.name
        assert c.task is not None and c.task.faults == LIVE[name], name
        for f in fault_checks(c):
            assert f.caught, (name, f, {a: r.why for a, r in c.score.axes.items()})
        assert c.score.integrity == (not LIVE[name]), name
    by_name = {c.scenario.name: c for c in faulty}
    gate = {
        n: check("tool_effect", c.receipt, policy)
        for n, c in by_name.items()
        if c.receipt is not None
    }
    assert gate["f04_server_error_booking"].cause == "unsafe_retry"
    assert gate["i04_hello_mid_flight"].cause == "stale_write"
    release = release_gate([c.receipt for c in faulty if c.receipt is not None], policy)
    assert {"unsafe_retry", "stale_write", "confirmation_mismatch"} <= {
        f.check for f in release.findings
    }
    assert release_gate([c.receipt for c in correct if c.receipt is not None], policy).passed
