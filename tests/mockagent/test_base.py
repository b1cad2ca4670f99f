"""What both mock agents share (``voxproxy/mockagent/base.py``): posting events to an
event API on loopback (202 is success; an error answer, a dead port or no URL is
``False``, never an exception), ``async with`` around start/stop, and serving until
cancelled with the banner naming the bound port."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from aiohttp import web

from voxproxy.mockagent.base import AgentBase, serve_until_cancelled
from voxproxy.mockagent.config import MockAgentConfig


class Recorded(AgentBase):
    """An agent that only records start and stop."""

    def __init__(self, config: MockAgentConfig | None = None) -> None:
        super().__init__(config)
        self.calls: list[str] = []

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        self.calls.append(f"start {host} {port}")
        return 4321

    async def stop(self) -> None:
        self.calls.append("stop")
        await self._close_http()


async def _event_api(status: int) -> tuple[web.AppRunner, int, list[dict[str, Any]]]:
    got: list[dict[str, Any]] = []

    async def events(request: web.Request) -> web.Response:
        got.append(
            {
                "path": request.raw_path,
                "auth": request.headers.get("Authorization"),
                "body": json.loads(await request.text()),
            }
        )
        return web.Response(status=status, text="nope" if status != 202 else "")

    app = web.Application()
    app.router.add_post("/v1/calls/{call}/events", events)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, port, got


def _agent(url: str | None) -> Recorded:
    token = "t0k" if url is not None else None
    return Recorded(MockAgentConfig(post_events_url=url, events_token=token))


async def test_events_go_to_the_call_s_path_with_the_token_and_202_is_success() -> None:
    runner, port, got = await _event_api(202)
    try:
        async with _agent(f"http://127.0.0.1:{port}/") as agent:
            events = [{"type": "tool.started", "operation_id": "op"}]
            assert await agent.post_events("CA 1/2", events) is True
    finally:
        await runner.cleanup()
    assert got == [{"path": "/v1/calls/CA%201%2F2/events", "auth": "Bearer t0k", "body": events}]
    assert agent.calls == ["start 127.0.0.1 0", "stop"]


async def test_an_error_answer_or_a_dead_api_is_false_and_never_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runner, port, got = await _event_api(500)
    try:
        agent = _agent(f"http://127.0.0.1:{port}")
        assert await agent.post_events("CA1", [{"type": "x"}]) is False
        await runner.cleanup()  # nothing listens there now
        assert await agent.post_events("CA1", [{"type": "x"}]) is False
        await agent.stop()
    finally:
        await runner.cleanup()
    assert len(got) == 1
    messages = [r.getMessage() for r in caplog.records]
    assert any("event API answered 500: nope" in m for m in messages)
    assert any("could not post events" in m for m in messages)


async def test_without_an_event_api_nothing_is_posted() -> None:
    agent = _agent(None)
    assert await agent.post_events("CA1", [{"type": "x"}]) is False
    assert agent._http is None  # no client made


async def test_serving_prints_the_bound_port_and_stops_the_agent_when_cancelled(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for host, shown in (("127.0.0.1", "127.0.0.1"), ("::1", "[::1]")):
        agent = Recorded()
        task = asyncio.create_task(
            serve_until_cancelled(agent, host, 0, "listening on ws://{host}:{port}")
        )
        while not agent.calls:
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert agent.calls == [f"start {host} 0", "stop"]
        assert capsys.readouterr().out == f"listening on ws://{shown}:4321\n"


def test_the_agent_has_its_config_and_the_clips_it_may_say() -> None:
    config = dataclasses.replace(MockAgentConfig(), responses=("agent_hours",))
    agent = Recorded(config)
    assert agent.config is config
    assert "agent_hours" in agent.clips
    assert Recorded().config == MockAgentConfig()
