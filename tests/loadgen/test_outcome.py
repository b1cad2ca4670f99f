"""The outcome testbench's scorer, on receipts replayed from content-free flows."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from support.flowkit import call
from support.scripted.flows import FLOW_SECRET

from voxproxy.core.ids import value_digest
from voxproxy.core.receipt import Receipt
from voxproxy.loadgen.outcome import (
    AXES,
    CAUSE_AXIS,
    CAUSES,
    ExpectedOutcome,
    causes,
    score,
    tally,
)

S = FLOW_SECRET
EXPECTED = ExpectedOutcome(
    state={"order_number": "4281"},
    args={"order_number": "4281"},
    backend={"order_number": "4281"},
)


def v(value: Any) -> str:
    return value_digest(S, "value", value)


def a(args: Any) -> str:
    return value_digest(S, "args", args)


def ev(t: float, kind: str, **fields: Any) -> dict[str, Any]:
    return {"t_ms": t, "kind": kind, **fields}


def started(t: float, op: str, version: int, number: str = "4281", **more: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "operation_id": op,
        "tool": "update_order",
        "attempt": 1,
        "state_version": version,
        "args_hash": a({"order_number": number}),
        "idempotency_key": f"ik_{op}",
    }
    fields.update(more)
    return ev(t, "tool.started", **fields)


def verified(t: float, number: str, op: str | None = None) -> dict[str, Any]:
    """The backend holds ``number`` (after the call ``op``, if one is named)."""
    on = {} if op is None else {"operation_id": op}
    return ev(t, "backend.verified", **on, field="order_number", value_hash=v(number))


def finished(t: float, op: str, status: str, **more: Any) -> dict[str, Any]:
    return ev(t, "tool.finished", operation_id=op, status=status, **more)


def confirmed(t: float, number: str) -> dict[str, Any]:
    """The agent told the caller ``number``."""
    return ev(t, "confirmation", field="order_number", value_hash=v(number))


def good_tools() -> list[dict[str, Any]]:
    """Look-up, the caller's value, one call built from it, verified, then confirmed."""
    return [
        verified(1400, "0000"),
        ev(1450, "state.updated", field="order_number", version=1, value_hash=v("4281")),
        started(1800, "op_1", 1),
        verified(2300, "4281", "op_1"),
        finished(2310, "op_1", "ok", result_hash="rh_1"),
        confirmed(2400, "4281"),
    ]


def receipt(tools: list[dict[str, Any]], **kwargs: Any) -> Receipt:
    base: dict[str, Any] = {"caller": [(500, 1500)], "agent": [(2100, 4000)], "end_ms": 5000}
    base.update(kwargs)
    return call(tools=tools, **base)


def failed(r: Receipt, expected: ExpectedOutcome = EXPECTED) -> set[str]:
    return set(score(r, expected, S).failed)


def test_a_call_that_did_what_was_asked_holds_on_every_axis() -> None:
    s = score(receipt(good_tools()), EXPECTED, S)
    assert s.integrity and s.failed == () and s.causes == ()
    assert list(s.axes) == list(AXES)
    assert all(x.held and x.expected and x.ok for x in s.axes.values())


def test_hashes_are_compared_with_the_proxys_keyed_hash() -> None:
    # The same call judged with another secret: every expected value hashes differently.
    s = score(receipt(good_tools()), EXPECTED, b"another secret")
    assert {"captured", "active_state_correct", "tool_args_correct", "backend_correct"} <= set(
        s.failed
    )


def test_captured_fails_on_a_value_never_taken_up_or_a_phantom_interruption() -> None:
    tools = good_tools()
    tools[1] = ev(1450, "state.updated", field="order_number", version=1, value_hash=v("4821"))
    assert {"captured", "active_state_correct"} <= failed(receipt(tools))
    # A cancel that no caller speech and no newer state explains: a sound taken for speech.
    phantom = [
        *good_tools()[:2],
        started(1600, "op_0", 1),
        ev(1700, "tool.cancelled", operation_id="op_0"),
        *good_tools()[2:],
    ]
    s = score(receipt(phantom), EXPECTED, S)
    assert s.failed == ("captured",) and s.causes == ("noise_interruption",)
    assert "cancel(s) nothing explains" in s.axes["captured"].why
    # The same cancel while the caller speaks is a reaction to the caller.
    assert failed(receipt(phantom, caller=[(500, 1500), (1650, 1900)])) == set()


def test_captured_fails_when_the_agent_yields_to_a_sound_without_caller_speech() -> None:
    r = receipt(good_tools(), flushes=[3000])
    assert r.summary.yielded_without_caller_speech == 1
    s = score(r, EXPECTED, S)
    assert s.failed == ("captured",) and "noise_interruption" in s.causes


def test_active_state_takes_the_highest_version() -> None:
    tools = good_tools()
    tools.insert(2, ev(1500, "state.updated", field="order_number", version=2, value_hash=v("x")))
    tools[3] = started(1800, "op_1", 2)
    assert failed(receipt(tools)) == {"active_state_correct"}


def test_arguments_built_from_a_stale_version() -> None:
    tools = good_tools()
    tools.insert(
        2, ev(1500, "state.updated", field="order_number", version=2, value_hash=v("4281"))
    )
    s = score(receipt(tools), EXPECTED, S)  # op_1 says version 1; version 2 came before it
    assert {"tool_args_correct", "stale_write_prevented"} <= set(s.failed)
    assert "built from state version 1, the latest was 2" in s.axes["tool_args_correct"].why
    assert "stale_args" in s.causes
    # The right version but other arguments.
    other = good_tools()
    other[2] = started(1800, "op_1", 1, number="4821")
    assert "tool_args_correct" in failed(receipt(other))


def test_a_call_in_flight_at_a_correction_that_is_not_cancelled_is_a_stale_write() -> None:
    tools = good_tools()
    tools.insert(
        3, ev(2000, "state.updated", field="order_number", version=2, value_hash=v("4281"))
    )
    r = receipt(tools)
    assert r.tools[0].stale_write  # the proxy's own derived check agrees
    s = score(r, EXPECTED, S)
    assert "stale_write_prevented" in s.failed and "not_cancelled" in s.causes
    assert "in flight at a newer state" in s.axes["stale_write_prevented"].why
    # Cancelled, then re-issued from version 2: nothing stale took effect.
    fixed = [
        *good_tools()[:3],
        ev(2000, "state.updated", field="order_number", version=2, value_hash=v("4281")),
        ev(2050, "tool.cancelled", operation_id="op_1"),
        started(2200, "op_2", 2),
        verified(2600, "4281", "op_2"),
        finished(2610, "op_2", "ok"),
        confirmed(2700, "4281"),
    ]
    assert score(receipt(fixed), EXPECTED, S).integrity


def test_a_call_in_flight_while_the_caller_barges_in_is_a_stale_write() -> None:
    # The caller talks over the agent from 2200 to 2900; op_1 (1800-2310) runs on.
    r = receipt(good_tools(), caller=[(500, 1500), (2200, 2900)], flushes=[2350])
    assert r.turns[1].barge_in is not None
    s = score(r, EXPECTED, S)
    assert "stale_write_prevented" in s.failed and "not_cancelled" in s.causes


def test_the_backend_must_finally_hold_the_expected_value() -> None:
    tools = [
        *good_tools(),
        verified(2500, "4821"),
    ]
    assert {"backend_correct", "confirmation_matches_backend"} <= failed(receipt(tools))
    # Without any backend.verified there is nothing to show the value: the axis fails.
    bare = [t for t in good_tools() if t["kind"] != "backend.verified"]
    s = score(receipt(bare), EXPECTED, S)
    assert "backend_correct" in s.failed and "unchecked_result" in s.causes


def test_confirmations_must_follow_the_backend_and_the_last_one_must_match() -> None:
    early = good_tools()
    early[5] = confirmed(2250, "4281")
    s = score(receipt(early), EXPECTED, S)
    assert s.failed == ("confirmation_matches_backend",)
    assert s.causes == ("early_confirmation",)
    assert "before the backend held it" in s.axes["confirmation_matches_backend"].why
    silent = good_tools()[:-1]
    assert failed(receipt(silent)) == {"confirmation_matches_backend"}
    # A confirmation superseded by a later one (a second write) is fine: the last one counts.
    twice = [
        *good_tools(),
        ev(2800, "state.updated", field="order_number", version=2, value_hash=v("5000")),
        started(2900, "op_2", 2, number="5000"),
        verified(3200, "5000", "op_2"),
        finished(3210, "op_2", "ok"),
        confirmed(3300, "5000"),
    ]
    later = ExpectedOutcome(
        state={"order_number": "5000"},
        args={"order_number": "5000"},
        backend={"order_number": "5000"},
    )
    assert score(receipt(twice), later, S).integrity


def test_an_unsafe_retry_is_named() -> None:
    tools = [
        *good_tools()[:2],
        started(1800, "op_1", 1, idempotency_key=None),
        verified(2000, "4281", "op_1"),
        finished(2300, "op_1", "timeout"),
        started(2310, "op_2", 1, attempt=2, idempotency_key=None),
        verified(2600, "4281", "op_2"),
        finished(2610, "op_2", "ok"),
        confirmed(2700, "4281"),
    ]
    for t in tools:
        if t.get("idempotency_key", "") is None:
            del t["idempotency_key"]
    r = receipt(tools)
    assert any(t.unsafe_retry for t in r.tools)
    s = score(r, EXPECTED, S)
    assert s.causes == ("unsafe_retry",)
    assert s.integrity  # a set that lands twice leaves the backend right: no axis fails
    assert causes(r) == ("unsafe_retry",)


def test_an_action_the_caller_withdrew_must_not_take_effect() -> None:
    withdrawn = ExpectedOutcome(should_execute=False, state={"order_number": "4281"})
    s = score(receipt(good_tools()), withdrawn, S)
    assert s.failed == ("stale_write_prevented",)
    assert "withdrew" in s.axes["stale_write_prevented"].why
    cancelled = [
        *good_tools()[:3],
        ev(2000, "tool.cancelled", operation_id="op_1"),
        verified(2010, "0", "op_1"),
        confirmed(2100, "0"),
    ]
    nothing = ExpectedOutcome(
        should_execute=False, state={"order_number": "4281"}, backend={"order_number": "0"}
    )
    # The cancel is explained by nothing here (no caller speech, no newer state) ...
    assert score(receipt(cancelled), nothing, S).failed == ("captured",)
    # ... and by the caller speaking while the call ran.
    spoke = receipt(cancelled, caller=[(500, 1500), (1900, 2500)])
    assert score(spoke, nothing, S).integrity


def test_expected_values_and_axes() -> None:
    with pytest.raises(ValidationError, match="arguments of the call"):
        ExpectedOutcome(state={"x": 1})
    with pytest.raises(ValidationError, match="no call should take effect"):
        ExpectedOutcome(should_execute=False, args={"x": 1})
    with pytest.raises(ValidationError):
        ExpectedOutcome.model_validate({"args": {}, "averaged": True})
    # An axis the scenario expects to fail is "as expected" when it fails.
    odd = EXPECTED.model_copy(update={"backend_correct": False})
    tools = [*good_tools(), verified(2500, "1")]
    s = score(receipt(tools), odd, S)
    assert s.axes["backend_correct"].ok and not s.axes["backend_correct"].held
    assert s.failed == ("confirmation_matches_backend",)


def test_no_receipt_fails_every_axis_and_tally_counts_per_axis() -> None:
    none = score(None, EXPECTED, S)
    assert none.failed == AXES and none.causes == ("unexplained",)
    good = score(receipt(good_tools()), EXPECTED, S)
    early = good_tools()
    early[5] = confirmed(2250, "4281")
    bad = score(receipt(early), EXPECTED, S)
    t = tally([good, bad, none])
    assert t.calls == 3 and t.integrity == 1
    assert t.axes["confirmation_matches_backend"] == 1 and t.axes["captured"] == 2
    assert t.causes == {"early_confirmation": 1, "unexplained": 1}
    assert set(CAUSE_AXIS) == set(CAUSES)
