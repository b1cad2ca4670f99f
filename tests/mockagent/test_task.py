"""The mock agent's task (state, simulated backend, tool calls), driven directly: no sockets."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from support.waiting import wait_until

from voxproxy.mockagent.config import MockAgentConfig
from voxproxy.mockagent.task import SimBackend, Task
from voxproxy.simcall.log import TaskLog
from voxproxy.simcall.script import (
    Attempt,
    TaskScript,
    Turn,
)

GOOD = MockAgentConfig(responses=("agent_confirm",), tool_timeout_ms=150.0)
S = 0.001  # seconds per ms


def cfg(**faults: bool) -> MockAgentConfig:
    return dataclasses.replace(GOOD, **{f"fault_{k}": v for k, v in faults.items()})


def order(*attempts: Attempt, prep_ms: float = 10.0, second: str | None = "4281") -> TaskScript:
    turns = [Turn((("order_number", "4821"),), act=True)]
    if second is not None:
        turns.append(Turn((("order_number", second),)))
    return TaskScript(
        tool="update_order",
        args=("order_number",),
        turns=tuple(turns),
        backend={"order_number": "0000"},
        prep_ms=prep_ms,
        attempts=attempts or (Attempt("ok", latency_ms=40),),
    )


def send(*attempts: Attempt, prep_ms: float = 10.0) -> TaskScript:
    return TaskScript(
        tool="send_confirmation",
        args=("order_number",),
        effect="append",
        record="sent",
        turns=(
            Turn((("order_number", "4281"), ("send", True)), act=True),
            Turn((("send", False),), negate=True),
        ),
        backend={"sent": []},
        prep_ms=prep_ms,
        attempts=attempts or (Attempt("ok", latency_ms=40),),
    )


async def drive(
    config: MockAgentConfig, script: TaskScript, steps: list[tuple[float, str]]
) -> TaskLog:
    """Feed ``(delay_ms, what)`` steps (turn, noise, barge, quiet) and wait 300 ms at the end."""
    log = TaskLog("test")
    posted: list[list[dict[str, Any]]] = []

    async def post(batch: list[dict[str, Any]]) -> None:
        posted.append(batch)

    task = Task(script, config, SimBackend(), "r1", log, post)
    for delay, what in [*steps, (300.0, "end")]:
        await asyncio.sleep(delay * S)
        if what == "turn":
            task.on_caller_turn(True)
        elif what == "noise":
            task.on_caller_turn(False)
        elif what == "barge":
            task.on_barge_in()
        elif what == "quiet":
            task.on_caller_quiet()
    # Its poster hands the last batch over on its own task.
    await wait_until(lambda: sum(map(len, posted)) >= len(log.events), what="all of it posted")
    await task.aclose()
    assert [e for b in posted for e in b] == log.events  # all of it posted, in order
    assert log.errors == []
    return log


def kinds(log: TaskLog) -> list[str]:
    return [e["type"] for e in log.events]


def of(log: TaskLog, kind: str) -> list[dict[str, Any]]:
    return [e for e in log.events if e["type"] == kind]


async def test_correct_agent_cancels_on_a_barge_in_and_reissues_from_the_new_state() -> None:
    log = await drive(
        GOOD, order(Attempt("ok", latency_ms=80)), [(0, "turn"), (30, "barge"), (20, "turn")]
    )
    assert log.faults == [] and log.backend == {"order_number": "4281"}
    assert kinds(log) == [
        "backend.verified",  # the look-up
        "state.updated",
        "tool.started",
        "tool.cancelled",
        "backend.verified",  # what the record holds after the cancel
        "state.updated",
        "tool.started",
        "backend.verified",
        "tool.finished",
        "confirmation",
        "outcome.verified",
    ]
    first, second = of(log, "tool.started")
    assert (first["state_version"], first["args"]) == (1, {"order_number": "4821"})
    assert (second["state_version"], second["args"]) == (2, {"order_number": "4281"})
    assert first["idempotency_key"] == "ik-r1-v1" and second["idempotency_key"] == "ik-r1-v2"
    assert of(log, "confirmation") == [
        {"type": "confirmation", "field": "order_number", "value": "4281"}
    ]
    assert of(log, "outcome.verified")[-1]["verified"] is True


async def test_a_correction_without_a_barge_in_also_cancels() -> None:
    log = await drive(GOOD, order(Attempt("ok", latency_ms=80)), [(0, "turn"), (40, "turn")])
    assert "tool.cancelled" in kinds(log) and log.backend == {"order_number": "4281"}


async def test_no_cancel_lets_the_old_call_land_and_takes_it_for_the_new_state() -> None:
    log = await drive(
        cfg(no_cancel=True),
        order(Attempt("ok", latency_ms=80)),
        [(0, "turn"), (30, "barge"), (20, "turn")],
    )
    assert "tool.cancelled" not in kinds(log) and len(of(log, "tool.started")) == 1
    assert log.faults == ["no_cancel"] and log.backend == {"order_number": "4821"}
    # It read the backend back, so it confirms what is there (the old number).
    assert of(log, "confirmation")[-1]["value"] == "4821"


async def test_keeping_a_call_across_a_noise_is_not_a_fault() -> None:
    log = await drive(
        cfg(no_cancel=True),
        order(Attempt("ok", latency_ms=80), second=None),
        [(0, "turn"), (30, "barge"), (20, "noise")],
    )
    assert log.faults == ["noise_is_speech"] and log.backend == {"order_number": "4821"}


async def test_stale_args_sends_the_state_the_build_began_with() -> None:
    log = await drive(cfg(stale_args=True), order(prep_ms=60), [(0, "turn"), (20, "turn")])
    (started,) = of(log, "tool.started")
    assert started["state_version"] == 1 and started["args"] == {"order_number": "4821"}
    assert [e["version"] for e in of(log, "state.updated")] == [1, 2]
    assert log.faults == ["stale_args"] and log.backend == {"order_number": "4821"}
    # The correct builder restarts on the change: one call, from version 2.
    good = await drive(GOOD, order(prep_ms=60), [(0, "turn"), (20, "turn")])
    (started,) = of(good, "tool.started")
    assert started["state_version"] == 2 and good.backend == {"order_number": "4281"}


async def test_a_barge_in_holds_the_build_until_the_turn_ends_or_the_speech_fades() -> None:
    log = await drive(
        GOOD, order(prep_ms=30, second=None), [(0, "turn"), (10, "barge"), (80, "quiet")]
    )
    (started,) = of(log, "tool.started")
    assert log.events.index(started) > 0 and log.backend == {"order_number": "4821"}


async def test_checked_results_are_retried_with_the_same_operation_and_key() -> None:
    script = order(
        Attempt("empty", latency_ms=20),
        Attempt("wrong_record", latency_ms=20),
        Attempt("ok", latency_ms=20),
        second=None,
    )
    log = await drive(GOOD, script, [(0, "turn")])
    starts = of(log, "tool.started")
    assert [s["attempt"] for s in starts] == [1, 2, 3]
    assert {s["operation_id"] for s in starts} == {"op-r1-1"}
    assert {s["idempotency_key"] for s in starts} == {"ik-r1-v1"}
    assert [e["status"] for e in of(log, "tool.finished")] == ["malformed", "malformed", "ok"]
    assert log.backend == {"order_number": "4821"} and log.faults == []


async def test_unchecked_results_are_taken_for_success() -> None:
    for kind in ("empty", "wrong_record", "malformed"):
        log = await drive(
            cfg(unchecked_result=True),
            order(Attempt(kind, latency_ms=20), second=None),
            [(0, "turn")],
        )  # type: ignore[arg-type]
        assert [e["status"] for e in of(log, "tool.finished")] == ["ok"], kind
        assert log.faults == ["unchecked_result"] and log.backend == {"order_number": "0000"}
        # It confirms what it believes it wrote; the independent check says otherwise.
        assert of(log, "confirmation")[0]["value"] == "4821"
        assert of(log, "outcome.verified")[-1]["verified"] is False


async def test_a_timeout_after_the_write_is_retried_safely_or_duplicated() -> None:
    script = send(Attempt("timeout", latency_ms=20), Attempt("ok", latency_ms=20))
    good = await drive(GOOD, script, [(0, "turn")])
    assert good.backend == {"sent": [{"order_number": "4281"}]}
    assert [e["status"] for e in of(good, "tool.finished")] == ["timeout", "ok"]
    assert {e["operation_id"] for e in of(good, "tool.started")} == {"op-r1-1"}
    bad = await drive(cfg(unsafe_retry=True), script, [(0, "turn")])
    starts = of(bad, "tool.started")
    assert [s["operation_id"] for s in starts] == ["op-r1-1", "op-r1-2"]
    assert all("idempotency_key" not in s for s in starts)
    assert bad.faults == ["unsafe_retry"] and bad.backend["sent"] == [{"order_number": "4281"}] * 2


async def test_a_late_answer_and_an_error_after_the_write() -> None:
    late = send(Attempt("late", latency_ms=20, answer_ms=300), Attempt("ok", latency_ms=20))
    log = await drive(GOOD, late, [(0, "turn")])
    assert [e["status"] for e in of(log, "tool.finished")] == ["timeout", "ok"]
    assert log.backend == {"sent": [{"order_number": "4281"}]}
    error = send(Attempt("error", latency_ms=20), Attempt("ok", latency_ms=20))
    log = await drive(GOOD, error, [(0, "turn")])
    assert [e["status"] for e in of(log, "tool.finished")] == ["error", "ok"]
    assert log.backend == {"sent": [{"order_number": "4281"}]}


async def test_gives_up_after_the_last_attempt_and_says_what_is_there() -> None:
    script = order(Attempt("error", commit=False, latency_ms=10), second=None)
    log = await drive(GOOD, script, [(0, "turn")])
    assert len(of(log, "tool.started")) == GOOD.tool_max_attempts
    assert of(log, "confirmation") == [
        {"type": "confirmation", "field": "order_number", "value": "0000"}
    ]
    assert of(log, "outcome.verified")[-1]["verified"] is True


async def test_confirming_on_an_async_acknowledgement() -> None:
    script = order(Attempt("async", ack_ms=10, latency_ms=80), second=None)
    good = await drive(GOOD, script, [(0, "turn")])
    assert kinds(good).index("confirmation") > kinds(good).index("tool.finished")
    bad = await drive(cfg(confirm_before_result=True), script, [(0, "turn")])
    assert bad.faults == ["confirm_before_result"]
    assert kinds(bad).index("confirmation") < kinds(bad).index("tool.finished")
    assert of(bad, "outcome.verified")[0]["verified"] is False  # nothing written yet
    assert of(bad, "outcome.verified")[-1]["verified"] is True  # it came true later
    assert len(of(bad, "confirmation")) == 2  # it reads back and confirms again after


async def test_dont_send_cancels_and_says_nothing_went_out() -> None:
    script = send(Attempt("ok", latency_ms=80))
    good = await drive(GOOD, script, [(0, "turn"), (30, "turn")])
    assert good.backend == {"sent": []} and "tool.cancelled" in kinds(good)
    assert of(good, "confirmation")[-1]["value"] == []
    bad = await drive(
        cfg(no_cancel=True, unchecked_result=True), script, [(0, "turn"), (30, "turn")]
    )
    assert bad.backend == {"sent": [{"order_number": "4281"}]}
    assert of(bad, "confirmation")[-1]["value"] == []  # what it believes
    assert of(bad, "outcome.verified")[-1]["verified"] is False  # re-checked after the write


def test_backend_idempotency_and_records() -> None:
    b = SimBackend()
    script = send()
    b.open("r", script.backend)
    first, wrote = b.apply("r", script, {"order_number": "1"}, "k")
    again, wrote_again = b.apply("r", script, {"order_number": "1"}, "k")
    assert wrote and not wrote_again and first == again
    b.apply("r", script, {"order_number": "1"}, None)
    assert b.read("r") == {"sent": [{"order_number": "1"}] * 2}
    assert b.records["r"].version == 2 and b.writes == 2
