"""Verdict gates (MEASUREMENT.md section 6): ordered, first failure wins, never averaged."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from support.flowkit import call, healthy, retried_after_timeout
from support.flowkit import tool_event as tool

from voxproxy.core.receipt import Receipt
from voxproxy.receipts import verdict as verdict_module
from voxproxy.receipts.policy import GATE_ORDER, GateName, Policy, load_policy
from voxproxy.receipts.verdict import (
    CHECKS,
    FAILURE,
    GateResult,
    check,
    gate_results,
    judge,
    judged,
    judging,
)

POLICY = load_policy()


def stale(op: str, at: float) -> list[dict[str, Any]]:
    """A tool call in flight across a correction at ``at``: a stale write."""
    return [
        {"t_ms": at - 400, "kind": "state.updated", "field": "f", "version": 1, "value_hash": "a"},
        {"t_ms": at - 300, "kind": "tool.started", "operation_id": op, "tool": "w",
         "state_version": 1, "idempotency_key": "k"},
        {"t_ms": at, "kind": "state.updated", "field": "f", "version": 2, "value_hash": "b"},
        {"t_ms": at + 200, "kind": "tool.finished", "operation_id": op, "status": "ok"},
    ]  # fmt: skip


def every_gate_fails() -> Receipt:
    """Never answered, a slow first response, a barge-in that plays on, a stale write and a
    failed outcome check: one failure for each gate."""
    return call(
        answered_ms=None,
        terminal="agent_closed",
        caller=[(500, 1500), (4000, 4500)],
        agent=[(3000, 9000)],
        tools=stale("op_1", 5000),
        outcome=False,
        end_ms=9500,
    )


def with_gates(*gates: GateName, **fields: Any) -> Policy:
    return Policy(gates=gates, **fields)


# -- order --------------------------------------------------------------------------------


@pytest.mark.parametrize("first", range(len(GATE_ORDER)))
def test_the_first_failing_gate_names_the_verdict(first: int) -> None:
    receipt = every_gate_fails()
    policy = with_gates(*GATE_ORDER[first:])
    v = judge(receipt, policy)
    gate = GATE_ORDER[first]
    assert (v.verdict, v.gate) == (FAILURE[gate], gate)
    # Only the failing gate was consulted: its evidence is the only evidence.
    assert list(v.evidence) == [gate]


def test_later_gates_are_not_consulted(monkeypatch: pytest.MonkeyPatch) -> None:
    consulted: list[str] = []
    for gate, fn in list(CHECKS.items()):

        def spy(r: Receipt, p: Policy, fn: Any = fn, gate: str = gate) -> GateResult:
            consulted.append(gate)
            result: GateResult = fn(r, p)
            return result

        monkeypatch.setitem(CHECKS, gate, spy)  # type: ignore[arg-type]
    slow = healthy(agent=[(3000, 3900)])  # 1500 ms first response
    assert judge(slow, POLICY).verdict == "slow_first_response"
    assert consulted == ["reachability", "turn_timing"]
    consulted.clear()
    assert judge(healthy(), POLICY).verdict == "pass"
    assert consulted == list(GATE_ORDER)


def test_a_pass_lists_every_gate_it_consulted_with_its_evidence() -> None:
    v = judge(healthy(), POLICY)
    assert v.verdict == "pass" and v.gate is None and v.cause is None
    assert list(v.evidence) == list(GATE_ORDER)
    assert v.evidence["turn_timing"] == {
        "limit_ms": 1200.0,
        "turns": [{"turn": 0, "ttfs_ms": 600.0}],
    }
    assert v.reason == "passed 5 gate(s): " + ", ".join(GATE_ORDER)


def test_gates_left_out_of_the_policy_are_not_checked() -> None:
    receipt = every_gate_fails()
    assert judge(receipt, with_gates("outcome")).verdict == "false_complete"
    assert judge(healthy(outcome=None), with_gates("reachability", "turn_timing")).verdict == "pass"


def test_gate_results_stop_at_the_first_gate_that_does_not_pass() -> None:
    results = gate_results(healthy(agent=[(3000, 3900)]), POLICY)
    assert [(r.gate, r.verdict) for r in results] == [
        ("reachability", "pass"),
        ("turn_timing", "slow_first_response"),
    ]
    # One gate alone, whatever the policy lists (for a testbench scoring one axis).
    assert check("outcome", every_gate_fails(), with_gates("reachability")).verdict == (
        "false_complete"
    )


# -- 1. reachability ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("terminal", "status", "reason"),
    [
        ("upstream_timeout", None, "the agent did not answer in time"),
        ("upstream_unreachable", None, "no connection to the agent could be made"),
        ("upstream_refused", 503, "the agent refused the call (HTTP 503)"),
        ("caller_closed", None, "the call ended (caller_closed) before the agent answered"),
    ],
)
def test_unreachable(terminal: str, status: int | None, reason: str) -> None:
    receipt = call(answered_ms=None, terminal=terminal, outcome=None, end_ms=3000)
    receipt = receipt.model_copy(
        update={"close": receipt.close.model_copy(update={"upstream_status": status})}
    )
    v = judge(receipt, POLICY)
    assert (v.verdict, v.gate, v.reason) == ("unreachable", "reachability", reason)
    assert v.evidence["reachability"] == {
        "terminal": terminal,
        "upstream_status": status,
        "upstream_connect_ms": None,
    }


# -- 2. turn timing -----------------------------------------------------------------------


def test_the_limit_itself_passes_and_a_tenth_over_fails() -> None:
    assert judge(healthy(agent=[(2700, 3000)]), POLICY).verdict == "pass"  # 1200.0 ms
    v = judge(healthy(agent=[(2700.1, 3000)]), POLICY)
    assert (v.verdict, v.gate) == ("slow_first_response", "turn_timing")
    assert v.reason == "turn 0: first response after 1200.1 ms; limit 1200 ms"
    assert judge(healthy(agent=[(2700.1, 3000)]), Policy(max_first_response_ms=1500)).verdict == (
        "pass"
    )


def test_one_slow_turn_among_fast_ones_fails_the_call() -> None:
    r = healthy(
        caller=[(500, 1500), (4000, 5000), (8000, 9000)],
        agent=[(2100, 3000), (6500, 7000), (9600, 9800)],
        end_ms=10_000,
    )
    v = judge(r, POLICY)
    assert v.verdict == "slow_first_response"
    assert v.reason == "turn 1: first response after 1500.0 ms; limit 1200 ms"
    assert v.evidence["turn_timing"]["turns"] == [  # type: ignore[index]
        {"turn": 0, "ttfs_ms": 600.0},
        {"turn": 1, "ttfs_ms": 1500.0},
        {"turn": 2, "ttfs_ms": 600.0},
    ]


def test_no_response_is_slow() -> None:
    # The caller speaks, nothing for longer than the response timeout, then speaks again.
    r = healthy(caller=[(500, 1500), (10_000, 10_500)], agent=[(11_100, 11_500)], end_ms=12_000)
    assert [t.kind for t in r.turns] == ["no_response", "response"]
    v = judge(r, POLICY)
    assert v.verdict == "slow_first_response"
    assert v.reason == "turn 0: no response within 8000 ms; limit 1200 ms"


def test_an_unanswered_turn_at_the_end_is_a_lower_bound_never_a_value() -> None:
    # Hung up 2 s after speaking, never answered: at least 2000 ms, over the limit.
    long_wait = healthy(caller=[(500, 1500), (4000, 5000)], end_ms=7000)
    v = judge(long_wait, POLICY)
    assert v.verdict == "slow_first_response"
    assert v.reason == "turn 1: no response in the 2000.0 ms before the end; limit 1200 ms"
    # Hung up 300 ms after speaking ("bye"): no answer was due yet; nothing to judge.
    short_wait = healthy(caller=[(500, 1500), (4000, 5000)], end_ms=5300)
    assert judge(short_wait, POLICY).verdict == "pass"
    turns = judge(short_wait, POLICY).evidence["turn_timing"]["turns"]  # type: ignore[index]
    assert turns[1] == {"turn": 1, "unanswered_at_end_after_ms": 300.0}


def _with_turn(receipt: Receipt, index: int, **fields: Any) -> Receipt:
    turns = [t.model_copy(update=fields) if t.index == index else t for t in receipt.turns]
    return receipt.model_copy(update={"turns": turns})


def test_a_missing_caller_speech_end_is_insufficient_evidence() -> None:
    r = _with_turn(healthy(), 0, caller_offset_ms=None, ttfs_ms=None, reason="caller_end_missing")
    v = judge(r, POLICY)
    assert (v.verdict, v.gate) == ("insufficient_evidence", "turn_timing")
    assert v.reason == "turn 0: the caller's speech end is missing (caller_end_missing)"
    assert v.evidence["turn_timing"]["turns"] == [  # type: ignore[index]
        {"turn": 0, "missing": "caller_speech_end"}
    ]


def _withheld(gap_ms: float, reason: str, uncertainty_ms: float = 52.0) -> Receipt:
    """One turn whose ttfs (``gap_ms`` between its edges) was withheld for ``reason``."""
    r = healthy(agent=[(1500 + gap_ms, 4000)], end_ms=5000)
    return _with_turn(r, 0, ttfs_ms=None, reason=reason, ttfs_uncertainty_ms=uncertainty_ms)


@pytest.mark.parametrize(
    "reason", ["caller_edge_ambiguous", "agent_edge_ambiguous", "clock_lag", "downstream_jitter"]
)
def test_a_withheld_ttfs_whose_whole_span_is_within_the_limit_passes(reason: str) -> None:
    # Over the bound that publishes it (52 ms > 50), but 600 +- 52 ms is under 1200.
    v = judge(_withheld(600, reason), POLICY)
    assert v.verdict == "pass", v.reason
    assert v.evidence["turn_timing"]["turns"] == [  # type: ignore[index]
        {"turn": 0, "ttfs_at_most_ms": 652.0, "withheld": reason}
    ]


def test_a_withheld_ttfs_whose_whole_span_is_over_the_limit_fails() -> None:
    v = judge(_withheld(1300, "caller_edge_ambiguous"), POLICY)
    assert (v.verdict, v.gate) == ("slow_first_response", "turn_timing")
    assert v.reason == (
        "turn 0: first response after at least 1248.0 ms (withheld as caller_edge_ambiguous); "
        "limit 1200 ms"
    )


def test_a_withheld_ttfs_whose_span_holds_the_limit_is_insufficient_evidence() -> None:
    v = judge(_withheld(1180, "caller_edge_ambiguous"), POLICY)
    assert (v.verdict, v.gate) == ("insufficient_evidence", "turn_timing")
    assert v.reason == ("turn 0: no ttfs (caller_edge_ambiguous, between 1128.0 and 1232.0 ms)")


@pytest.mark.parametrize(
    "reason",
    ["caller_noise", "agent_noise", "caller_never_quiet", "measurement_shed", "caller_unanalysed"],
)
def test_a_ttfs_withheld_for_what_may_move_its_edges_past_any_band_is_never_judged(
    reason: str,
) -> None:
    # Noise's band is no bound (at 10 dB SNR an edge read hundreds of ms off lies outside
    # it); a never-quiet, shed or unheard stretch puts the edges themselves in doubt.
    v = judge(_withheld(600, reason, uncertainty_ms=80.0), POLICY)
    assert (v.verdict, v.gate) == ("insufficient_evidence", "turn_timing")
    assert v.reason == f"turn 0: no ttfs ({reason})"


def test_the_receipt_says_which_withheld_ttfs_bounds_the_truth() -> None:
    # ttfs_bounded, where the receipt has it, decides: caller noise over a steady bed is
    # judged on its span (130 ms of band, 600 + 130 under 1200), the same reason over a
    # bed that swells is not, and a receipt that says an ambiguous edge does not bound it
    # is believed.
    steady = _with_turn(_withheld(600, "caller_noise", 130.0), 0, ttfs_bounded=True)
    v = judge(steady, POLICY)
    assert v.verdict == "pass", v.reason
    assert v.evidence["turn_timing"]["turns"] == [  # type: ignore[index]
        {"turn": 0, "ttfs_at_most_ms": 730.0, "withheld": "caller_noise"}
    ]
    over = _with_turn(_withheld(1400, "caller_noise", 130.0), 0, ttfs_bounded=True)
    assert judge(over, POLICY).verdict == "slow_first_response"
    swelling = _with_turn(_withheld(600, "caller_noise", 130.0), 0, ttfs_bounded=False)
    assert judge(swelling, POLICY).verdict == "insufficient_evidence"
    unbound = _with_turn(_withheld(600, "caller_edge_ambiguous"), 0, ttfs_bounded=False)
    assert judge(unbound, POLICY).verdict == "insufficient_evidence"


def test_a_withheld_ttfs_without_both_edges_is_never_judged() -> None:
    r = _with_turn(_withheld(600, "caller_edge_ambiguous"), 0, agent_onset_ms=None)
    assert judge(r, POLICY).verdict == "insufficient_evidence"


def test_a_proven_failure_beats_missing_evidence_in_the_same_gate() -> None:
    r = healthy(caller=[(500, 1500), (4000, 5000)], agent=[(2100, 3000), (6500, 7000)], end_ms=8000)
    r = _with_turn(r, 0, caller_offset_ms=None, ttfs_ms=None)
    assert judge(r, POLICY).verdict == "slow_first_response"


@pytest.mark.parametrize(
    ("update", "reason"),
    [
        ({"measurement_disabled": True, "turns": []}, "measurement was disabled"),
        ({"dialect": "undetected", "turns": []}, "dialect was not recognised"),
    ],
)
def test_an_unmeasured_call_never_passes_on_empty_turns(
    update: dict[str, Any], reason: str
) -> None:
    r = healthy().model_copy(update=update)
    v = judge(r, POLICY)
    assert (v.verdict, v.gate) == ("insufficient_evidence", "turn_timing")
    assert reason in (v.reason or "")
    assert check("interruption", r, POLICY).verdict == "insufficient_evidence"


def test_a_call_without_caller_speech_has_no_turn_to_judge() -> None:
    r = call(agent=[(300, 1800)], end_ms=2500)
    assert check("turn_timing", r, POLICY).reason == "no response turns to judge"
    assert judge(r, POLICY).verdict == "pass"


# -- 3. interruption ----------------------------------------------------------------------


def barge(
    flush_ms: float | None,
    agent_end_ms: float | None = 6000,
    end_ms: float = 8000,
    caller_end_ms: float | None = 3800,
) -> Receipt:
    """Caller talks over the agent at 3000 ms; the agent flushes (or not)."""
    agent_first = (2100, flush_ms if flush_ms is not None else agent_end_ms)
    return healthy(
        caller=[(500, 1500), (3000, caller_end_ms)],
        agent=[agent_first, *([(4400, 5000)] if flush_ms is not None else [])],
        flushes=[flush_ms] if flush_ms is not None else [],
        end_ms=end_ms,
    )


def test_a_barge_in_stopped_within_the_limit_passes() -> None:
    r = barge(flush_ms=3300)
    b = r.turns[1].barge_in
    assert b is not None and (b.stop_latency_ms, b.outcome, b.evidence) == (
        300.0,
        "stopped",
        "flush",
    )
    assert judge(r, POLICY).verdict == "pass"


def test_a_barge_in_stopped_too_late_fails() -> None:
    v = judge(barge(flush_ms=3301), POLICY)
    assert (v.verdict, v.gate) == ("barge_in_failed", "interruption")
    assert v.reason == "turn 1: agent audio stopped 301.0 ms after the caller started; limit 300 ms"
    assert v.evidence["interruption"]["barge_ins"][0]["evidence"] == "flush"  # type: ignore[index]
    assert judge(barge(flush_ms=3301), Policy(max_interrupt_stop_ms=400)).verdict == "pass"


def test_a_barge_in_the_agent_talks_through_fails() -> None:
    # (It ends 300 ms after the agent's audio: no silence for turn timing to judge.)
    v = judge(barge(flush_ms=None, agent_end_ms=6000, end_ms=6300), POLICY)
    assert v.verdict == "barge_in_failed"
    assert (
        v.reason == "turn 1: agent audio played on 3000.0 ms after the caller started; limit 300 ms"
    )


def test_audio_still_playing_at_the_end_is_no_stop() -> None:
    # The call ends 200 ms after the interruption with the agent still audible: no evidence.
    r = barge(flush_ms=None, agent_end_ms=None, end_ms=3200, caller_end_ms=None)
    b = r.turns[1].barge_in
    assert b is not None and (b.outcome, b.evidence, b.stop_ms) == ("stopped", "ceased", 3200.0)
    v = judge(r, POLICY)
    assert (v.verdict, v.gate) == ("insufficient_evidence", "interruption")
    # ... but 500 ms of it is already a proven failure (a lower bound over the limit).
    v = judge(barge(flush_ms=None, agent_end_ms=None, end_ms=3500, caller_end_ms=None), POLICY)
    assert v.verdict == "barge_in_failed"
    assert v.reason == (
        "turn 1: agent audio was still playing 500.0 ms after the caller started, when the call "
        "ended; limit 300 ms"
    )


def test_a_ceased_stop_the_call_cut_short_is_unconfirmed() -> None:
    # The agent's audio ceases 150 ms in, but the call ends 350 ms later while the caller
    # still talks: within agent_turn_gap_ms the agent could have resumed over them.
    ceased = dict(caller=[(500, 1500), (3000, None)], agent=[(2100, 3150)], end_ms=3500)
    v = judge(healthy(**ceased), POLICY)
    assert (v.verdict, v.gate) == ("insufficient_evidence", "interruption")
    assert v.reason == (
        "turn 1: agent audio ceased 150.0 ms after the caller started, but the call ended "
        "350.0 ms later, before a resumption over the caller could be ruled out"
    )
    # Once the caller has finished speaking, a resumption would be an answer: confirmed.
    finished = dict(caller=[(500, 1500), (3000, 3300)], agent=[(2100, 3150)], end_ms=3500)
    assert check("interruption", healthy(**finished), POLICY).passed


def test_the_interruption_gate_on_a_measured_call(clips: Any) -> None:
    """Real audio through the session's VAD, playout and turn machine."""
    import numpy as np

    from voxproxy.core.dialects.base import DialectOptions
    from voxproxy.core.dialects.raw import RawDecoder
    from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT
    from voxproxy.core.receipt import CloseInfo
    from voxproxy.core.session import CallSession

    ms = 1_000_000
    caller, answer, interrupt = (
        clips["caller_order_number"],
        clips["agent_long_answer"],
        clips["caller_interrupt"],
    )
    rate = 16_000
    assert caller.sample_rate_hz == answer.sample_rate_hz == interrupt.sample_rate_hz == rate
    per_ms = rate // 1000
    agent_start = round(500 + caller.offset_ms + 600)
    barge_at = agent_start + 1500
    line = np.zeros(20_000 * per_ms, dtype=np.int16)
    line[500 * per_ms : 500 * per_ms + caller.pcm.size] = caller.pcm
    b0 = round(barge_at - interrupt.onset_ms) * per_ms
    line[b0 : b0 + interrupt.pcm.size] = interrupt.pcm

    def measured(end_after_ms: int, agent_quits_after_ms: int | None) -> Receipt:
        s = CallSession(
            RawDecoder(DialectOptions(sample_rate_hz=rate)), 0, secret=b"s", link_id="x"
        )
        s.on_upstream_connected(50 * ms)
        end, sent, t = barge_at + end_after_ms, 0, 0
        quits = barge_at + (agent_quits_after_ms if agent_quits_after_ms is not None else 10**9)
        while t + 20 <= end:
            t += 20
            s.on_message(CALLER_TO_AGENT, line[(t - 20) * per_ms : t * per_ms].tobytes(), t * ms)
            if agent_start <= t < quits and sent < answer.pcm.size:
                s.on_message(
                    AGENT_TO_CALLER, answer.pcm[sent : sent + 20 * per_ms].tobytes(), t * ms
                )
                sent += 20 * per_ms
        return s.close(
            end * ms, "caller_vanished", CloseInfo(initiator="none", upstream_status=101)
        )

    # The caller hangs up 150 ms into the interruption with the agent still talking.
    assert check("interruption", measured(150, None), POLICY).verdict == "insufficient_evidence"
    # ... 600 ms in: the agent demonstrably talked over them for longer than the limit.
    assert check("interruption", measured(600, None), POLICY).verdict == "barge_in_failed"
    # The agent goes quiet 150 ms in and the call goes on: a stop within the limit.
    quiet = check("interruption", measured(3000, 150), POLICY)
    assert quiet.passed and quiet.reason == "1 barge-in(s) stopped within 300 ms", quiet.reason


def _with_barge(receipt: Receipt, **fields: Any) -> Receipt:
    turns = []
    for t in receipt.turns:
        if t.barge_in is not None:
            t = t.model_copy(update={"barge_in": t.barge_in.model_copy(update=fields)})
        turns.append(t)
    return receipt.model_copy(update={"turns": turns})


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"outcome": "no_agent_audio"}, "an interruption with no agent audio to stop"),
        ({"stop_ms": None, "stop_latency_ms": None}, "no evidence the agent stopped"),
    ],
)
def test_an_interruption_without_stop_evidence_is_insufficient(
    fields: dict[str, Any], reason: str
) -> None:
    r = _with_barge(barge(flush_ms=3200), **fields)
    v = judge(r, POLICY)
    assert (v.verdict, v.gate) == ("insufficient_evidence", "interruption")
    assert reason in (v.reason or "")


def test_a_withheld_stop_that_bounds_the_truth_is_judged_on_its_span() -> None:
    # A stop withheld for caller noise over a steady bed keeps the stop the proxy read and
    # says it bounds the truth (stop_bounded): read 200 ms after the onset with 60 ms of
    # uncertainty it passes a 300 ms limit, read 400 ms after it fails, read 280 ms after
    # it is unjudged (the limit lies in 220-340); one that does not bound it is not judged.
    def withheld(stop_ms: float, bounded: bool) -> Receipt:
        fields = {"stop_latency_ms": None, "outcome": "unknown", "reason": "caller_noise"}
        fields |= {"stop_ms": stop_ms, "stop_uncertainty_ms": 60.0, "stop_bounded": bounded}
        return _with_barge(barge(flush_ms=3200), **fields)

    v = judge(withheld(3200.0, True), POLICY)
    assert v.verdict == "pass", v.reason
    judged_barge = v.evidence["interruption"]["barge_ins"][0]  # type: ignore[index]
    assert judged_barge["stop_latency_span_ms"] == [140.0, 260.0]
    assert judged_barge["withheld"] == "caller_noise"
    v = judge(withheld(3400.0, True), POLICY)
    assert (v.verdict, v.gate) == ("barge_in_failed", "interruption")
    assert v.reason == (
        "turn 1: agent audio stopped between 340.0 and 460.0 ms (withheld as caller_noise) "
        "after the caller started; limit 300 ms"
    )
    v = judge(withheld(3280.0, True), POLICY)
    assert (v.verdict, v.gate) == ("insufficient_evidence", "interruption")
    assert "the limit of 300 ms lies within it" in (v.reason or "")
    for stop_ms in (3200.0, 3400.0):
        v = judge(withheld(stop_ms, False), POLICY)
        assert (v.verdict, v.gate) == ("insufficient_evidence", "interruption"), stop_ms
        assert "no evidence the agent stopped" in (v.reason or "")


def test_a_ceased_stop_mid_call_counts_as_stopped() -> None:
    # The agent stopped without a flush (its audio ceased) 200 ms in, long before the end.
    r = healthy(caller=[(500, 1500), (3000, 3800)], agent=[(2100, 3200), (4400, 5000)], end_ms=8000)
    b = r.turns[1].barge_in
    assert b is not None and (b.evidence, b.ambiguous) == ("ceased", True)
    assert judge(r, POLICY).verdict == "pass"


# -- 4. tool effect -----------------------------------------------------------------------


def test_tool_effect_causes_in_order_first_names_the_verdict() -> None:
    r = healthy(
        tools=[
            tool("tool.started", 2000, tool="lookup", idempotency_key="k0"),  # no operation id
            *stale("op_1", 2500),
        ]
    )
    v = judge(r, POLICY)
    assert (v.verdict, v.gate, v.cause) == (
        "tool_effect_failed",
        "tool_effect",
        "missing_operation_id",
    )
    causes = v.evidence["tool_effect"]["causes"]  # type: ignore[index]
    assert list(causes) == ["missing_operation_id", "stale_write"]
    assert causes["stale_write"] == [
        {"operation_id": "op_1", "tool": "w", "turn": 0, "stale_cause": "correction"}
    ]


@pytest.mark.parametrize(
    ("events", "detail"),
    [
        (
            [tool("tool.started", 2000, operation_id="a", tool="w", args_hash="h1",
                  idempotency_key="k"),
             tool("tool.finished", 2100, operation_id="b", status="ok")],
            "tool.finished for an operation id that never started",
        ),
        (
            [tool("tool.started", 2000, operation_id="a", tool="w", args_hash="h1",
                  idempotency_key="k"),
             tool("tool.finished", 2100, operation_id="a", status="ok"),
             tool("tool.started", 2200, operation_id="a", tool="w", args_hash="h2",
                  idempotency_key="k2"),
             tool("tool.finished", 2300, operation_id="a", status="ok")],
            "one operation id names two different calls",
        ),
    ],
)  # fmt: skip
def test_unstable_operation_ids(events: list[dict[str, Any]], detail: str) -> None:
    v = judge(healthy(tools=events), POLICY)
    assert (v.verdict, v.cause) == ("tool_effect_failed", "unstable_operation_id")
    assert detail in (v.reason or "")


def test_a_safe_retry_with_the_same_operation_id_passes() -> None:
    events = retried_after_timeout(2000, "w", ("a", "k"), ("a", "k"))
    assert judge(healthy(tools=events), POLICY).verdict == "pass"


def test_a_cancelled_call_is_finished_and_not_stale() -> None:
    events = [
        tool("state.updated", 1900, field="f", version=1, value_hash="a"),
        tool("tool.started", 2000, operation_id="a", tool="w", state_version=1,
             idempotency_key="k"),
        tool("state.updated", 2100, field="f", version=2, value_hash="b"),
        tool("tool.cancelled", 2150, operation_id="a"),
    ]  # fmt: skip
    v = judge(healthy(tools=events), POLICY)
    assert v.verdict == "pass"
    assert v.evidence["tool_effect"] == {"tool_calls": 1, "causes": {}}


# -- 5. outcome ---------------------------------------------------------------------------


def test_outcome() -> None:
    assert judge(healthy(outcome=True), POLICY).verdict == "pass"
    v = judge(healthy(outcome=False), POLICY)
    assert (v.verdict, v.gate) == ("false_complete", "outcome")
    strict = load_policy("task-outcome")
    v = judge(healthy(outcome=None), strict)
    assert (v.verdict, v.gate) == ("insufficient_evidence", "outcome")
    assert v.evidence["outcome"] == {"outcome_verified": None, "checks": 0, "required": True}
    relaxed = Policy(require_outcome=False)
    assert judge(healthy(outcome=None), relaxed).verdict == "pass"
    assert judge(healthy(outcome=False), relaxed).verdict == "false_complete"


def test_the_last_outcome_check_counts() -> None:
    recheck = [tool("outcome.verified", 3500, verified=False)]
    assert judge(healthy(tools=recheck, outcome=True), POLICY).verdict == "pass"


# -- receipts carry verdict and policy ----------------------------------------------------


def test_judged_attaches_the_verdict_and_the_policy_hash_and_survives_json() -> None:
    r = judged(healthy(agent=[(3000, 3900)]), POLICY)
    assert r.policy == POLICY.hash
    assert r.verdict is not None and r.verdict.verdict == "slow_first_response"
    again = Receipt.model_validate_json(r.to_json_line())
    assert again == r


def test_judging_again_replaces_an_earlier_verdict() -> None:
    r = judged(healthy(agent=[(3000, 3900)]), Policy(max_first_response_ms=2000))
    assert r.verdict is not None and r.verdict.verdict == "pass"
    strict = judged(r, POLICY)
    assert strict.verdict is not None and strict.verdict.verdict == "slow_first_response"
    assert strict.policy == POLICY.hash != r.policy


def test_the_judging_sink_never_loses_a_receipt(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    got: list[Receipt] = []
    sink = judging(got.append, POLICY)
    sink(healthy())
    assert got[-1].verdict is not None and got[-1].verdict.verdict == "pass"

    def broken(receipt: Receipt, policy: Policy) -> Receipt:
        raise RuntimeError("bug")

    monkeypatch.setattr(verdict_module, "judged", broken)
    with caplog.at_level(logging.ERROR, logger="voxproxy.verdict"):
        sink(healthy())
    assert got[-1].verdict is None and got[-1].policy == POLICY.hash
    assert "could not judge a receipt" in caplog.text


# -- profiles --------------------------------------------------------------------------------


def test_a_latency_only_call_gets_a_verdict_under_the_default_policy() -> None:
    # An agent that only speaks the media wire posts no events: the outcome gate is not
    # evaluated (auto), and the verdict says which gates the call was held to.
    quiet_agent = healthy(outcome=None)
    v = judge(quiet_agent, POLICY)
    assert v.verdict == "pass", v.reason
    assert v.profile == "auto"
    assert v.required == ["reachability", "turn_timing", "interruption", "tool_effect"]
    assert v.not_evaluated == ["outcome"]
    assert "not evaluated: outcome" in (v.reason or "")
    # The same call under task-outcome lacks the evidence the profile requires.
    strict = judge(quiet_agent, load_policy("task-outcome"))
    assert (strict.verdict, strict.gate) == ("insufficient_evidence", "outcome")
    assert strict.not_evaluated == []
    # Under latency-only, tool effects and outcomes are not evaluated at all.
    latency = judge(quiet_agent, load_policy("latency-only"))
    assert latency.verdict == "pass"
    assert latency.not_evaluated == ["tool_effect", "outcome"]


def test_a_call_with_task_events_still_needs_its_outcome_check_under_auto() -> None:
    tools = [
        {"t_ms": 2200, "kind": "tool.started", "operation_id": "op1", "tool": "book",
         "state_version": 0, "idempotency_key": "k1"},
        {"t_ms": 2500, "kind": "tool.finished", "operation_id": "op1", "status": "ok"},
    ]  # fmt: skip
    task_call = healthy(outcome=None, tools=tools)
    v = judge(task_call, POLICY)
    assert (v.verdict, v.gate) == ("insufficient_evidence", "outcome"), v.reason
    assert judge(healthy(tools=tools), POLICY).verdict == "pass"
