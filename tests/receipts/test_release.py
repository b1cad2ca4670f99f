"""The release gate: stale writes, confirmation mismatches, unsafe retries, unverified
critical actions, each found with where it happened."""

from __future__ import annotations

from typing import Any

from support.flowkit import FLOWS_DIR, flow_receipts, healthy, retried_after_timeout
from support.flowkit import tool_event as ev
from support.scripted.flows import load_flows, replay

from voxproxy.receipts.policy import Policy
from voxproxy.receipts.release import Finding, release_gate, turn_at

POLICY = Policy()


def flow(name: str) -> Any:
    return replay(next(f for f in load_flows(FLOWS_DIR) if f.name == name))


def test_a_clean_call_passes() -> None:
    report = release_gate([flow("pass")], Policy(critical_tools=("update_order",)))
    assert report.passed and report.findings == []
    assert (report.calls, report.tool_calls, report.critical_calls, report.confirmations) == (
        1,
        1,
        1,
        1,
    )


def test_the_flows_fail_where_they_should() -> None:
    report = release_gate(flow_receipts(), POLICY)
    assert not report.passed
    assert report.counts() == {
        "stale_write": 2,
        "confirmation_mismatch": 0,
        "unsafe_retry": 1,
        "unverified_critical": 0,
    }
    retry = next(f for f in report.findings if f.check == "unsafe_retry")
    r = flow("unsafe_retry_after_timeout")
    assert retry == Finding(
        "unsafe_retry",
        r.call,
        0,
        "op_2",
        "book_appointment",
        "retry of op_1 without an idempotency key (previous attempt: timeout)",
        5800.0,
    )
    stale = {f.operation_id: f.cause for f in report.findings if f.check == "stale_write"}
    assert stale == {
        "op_7": "finished ok after a correction without a cancel",
        "op_3": "finished ok after a barge-in without a cancel",
    }
    assert report.failing_calls == 3


def test_a_confirmation_that_differs_from_the_backend() -> None:
    tools = [
        ev("tool.started", 1600, operation_id="a", tool="update", idempotency_key="k"),
        ev("tool.finished", 1900, operation_id="a", status="ok"),
        ev("backend.verified", 2000, operation_id="a", field="order", value_hash="vh_4281"),
        ev("confirmation", 2500, field="order", value_hash="vh_4821"),  # told the old value
        ev("confirmation", 2600, field="other", value_hash="x"),  # no backend value: no check
    ]
    r = healthy(tools=tools)
    (finding,) = release_gate([r], POLICY).findings
    assert finding == Finding(
        "confirmation_mismatch",
        r.call,
        0,
        None,
        None,
        "confirmed order differs from the backend's value",
        2500.0,
    )
    assert r.effects is not None and r.effects.confirmation_mismatches == 1  # agrees with derive


def test_a_retry_with_a_new_operation_id_after_a_timeout() -> None:
    tools = retried_after_timeout(1600, "pay", ("a", "k1"), ("b", "k2"))
    (finding,) = release_gate([healthy(tools=tools)], POLICY).findings
    assert finding.check == "unsafe_retry" and finding.operation_id == "b"
    assert finding.cause == (
        "retry of a with a new operation id after a timeout (previous attempt: timeout)"
    )


def test_critical_actions_must_be_verified_by_operation_or_field() -> None:
    policy = Policy(critical_tools=("book",))
    state = ev("state.updated", 1500, field="slot", version=3, value_hash="s")
    start = ev("tool.started", 1600, operation_id="a", tool="book", state_version=3,
               idempotency_key="k")  # fmt: skip
    done = ev("tool.finished", 1900, operation_id="a", status="ok")
    by_op = ev("backend.verified", 2000, operation_id="a", field="elsewhere", value_hash="s")
    by_field = ev("backend.verified", 2000, field="slot", value_hash="s")
    too_early = ev("backend.verified", 1550, field="slot", value_hash="s")
    lookup = [ev("tool.started", 2100, operation_id="l", tool="lookup", idempotency_key="k2"),
              ev("tool.finished", 2200, operation_id="l", status="ok")]  # fmt: skip

    assert release_gate([healthy(tools=[state, start, done, by_op, *lookup])], policy).passed
    assert release_gate([healthy(tools=[state, start, done, by_field])], policy).passed
    r = healthy(tools=[state, too_early, start, done, *lookup])
    report = release_gate([r], policy)
    assert report.critical_calls == 1  # lookup is not critical
    (finding,) = report.findings
    assert finding == Finding(
        "unverified_critical",
        r.call,
        0,
        "a",
        "book",
        "critical action (ok) with no backend.verified for operation a or field slot",
        1600.0,
    )
    # Without the policy listing it, nothing is critical.
    assert release_gate([r], POLICY).passed


def test_turn_at() -> None:
    r = healthy(caller=[(500, 1500), (4000, 5000)], agent=[(2100, 3000), (5600, 6000)], end_ms=7000)
    assert [turn_at(r, t) for t in (100, 500, 3999, 4000, 6500)] == [None, 0, 0, 1, 1]
