"""The plain mock agent's simulated tool: each answer (greeting aside) runs one tool
call, told to the proxy's event API as it goes (``--post-events``).

A testbench task (:mod:`voxproxy.mockagent.task`) replaces it when the call's path
names a script.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from voxproxy.mockagent.config import MockAgentConfig
from voxproxy.simcall.log import ResponseLog

Post = Callable[[str, list[dict[str, Any]]], Awaitable[bool]]
"""Posts events for a call id to the event API (``MockAgent.post_events``)."""


async def simulated_tool(
    post: Post,
    cfg: MockAgentConfig,
    call_index: int,
    r: ResponseLog,
    call_id: str,
    stop: asyncio.Event,
) -> None:
    """tool.started now; after tool_latency_ms tool.finished, backend.verified,
    confirmation and outcome.verified; tool.cancelled instead if a barge-in came first."""
    op = f"op-{call_index}-{r.index}"
    value = f"{cfg.tool_name}:{r.clip}:{r.index}"
    started = {
        "type": "tool.started",
        "operation_id": op,
        "tool": cfg.tool_name,
        "attempt": 1,
        "state_version": r.index,
        "args": {"response": r.index},
        "idempotency_key": op,
    }
    await post(call_id, [started])
    try:
        async with asyncio.timeout(cfg.tool_latency_ms / 1000):
            await stop.wait()
        interrupted = True
    except TimeoutError:
        interrupted = False
    if interrupted and cfg.tool_cancel_on_barge_in:
        await post(call_id, [{"type": "tool.cancelled", "operation_id": op}])
        return
    field = cfg.tool_name + ".result"
    await post(
        call_id,
        [
            {"type": "tool.finished", "operation_id": op, "status": "ok", "result": value},
            {"type": "backend.verified", "operation_id": op, "field": field, "value": value},
            {"type": "confirmation", "field": field, "value": value},
            {"type": "outcome.verified", "verified": True},
        ],
    )
