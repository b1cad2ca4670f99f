"""The plain mock agent's simulated tool (``voxproxy/mockagent/tool.py``), driven with a
recording ``post`` and a stop event handed in: the events it tells the event API, in
order, and the cancel a barge-in brings. No sockets, no waiting: the tool's latency runs
out at once (0 ms) or the barge-in is already there."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from voxproxy.mockagent.config import MockAgentConfig
from voxproxy.mockagent.tool import simulated_tool
from voxproxy.simcall.log import ResponseLog

CONFIG = MockAgentConfig(tool_latency_ms=0.0)


def _response(index: int) -> ResponseLog:
    return ResponseLog(
        index=index,
        clip="agent_hours",
        greeting=False,
        stream_pos=0,
        caller_offset_ns=1,
        planned_delay_ms=600.0,
        actual_delay_ms=600.0,
        skipped_samples=0,
        t0_ns=0,
        speech_ns=0,
    )


async def _run(cfg: MockAgentConfig, barged_in: bool) -> list[tuple[str, list[dict[str, Any]]]]:
    posted: list[tuple[str, list[dict[str, Any]]]] = []

    async def post(call_id: str, events: list[dict[str, Any]]) -> bool:
        posted.append((call_id, events))
        return True

    stop = asyncio.Event()
    if barged_in:
        stop.set()
    await simulated_tool(post, cfg, 3, _response(2), "CA1", stop)
    return posted


async def test_an_uninterrupted_tool_finishes_and_its_effect_is_confirmed() -> None:
    posted = await _run(CONFIG, barged_in=False)
    assert [call for call, _ in posted] == ["CA1", "CA1"]
    (started,), finished = posted[0][1], posted[1][1]
    assert started == {
        "type": "tool.started",
        "operation_id": "op-3-2",
        "tool": "lookup_order",
        "attempt": 1,
        "state_version": 2,
        "args": {"response": 2},
        "idempotency_key": "op-3-2",
    }
    value = "lookup_order:agent_hours:2"
    assert finished == [
        {"type": "tool.finished", "operation_id": "op-3-2", "status": "ok", "result": value},
        {
            "type": "backend.verified",
            "operation_id": "op-3-2",
            "field": "lookup_order.result",
            "value": value,
        },
        {"type": "confirmation", "field": "lookup_order.result", "value": value},
        {"type": "outcome.verified", "verified": True},
    ]


async def test_a_barge_in_before_the_result_cancels_the_call() -> None:
    slow = dataclasses.replace(CONFIG, tool_latency_ms=60_000.0)  # the barge-in comes first
    posted = await _run(slow, barged_in=True)
    assert [events[0]["type"] for _, events in posted] == ["tool.started", "tool.cancelled"]
    assert posted[1][1] == [{"type": "tool.cancelled", "operation_id": "op-3-2"}]


async def test_an_agent_that_does_not_cancel_finishes_the_call_after_a_barge_in() -> None:
    keeps = dataclasses.replace(CONFIG, tool_cancel_on_barge_in=False)
    posted = await _run(keeps, barged_in=True)
    assert [events[0]["type"] for _, events in posted] == ["tool.started", "tool.finished"]
