"""The capture round trip (issue 38 part 2's goal): live calls through the proxy with
``--capture``, one per wire (raw, Twilio, Telnyx, Plivo, Vonage, Exotel, OpenAI
Realtime, each a scripted call with a barge-in, tool events posted to the event API
during it) and a WebRTC call, then ``voxproxy analyze`` on the capture directory: each
replayed receipt equals the live one, field for field, but ``source``. The files are the
owner's alone, and a cut capture in the directory is one line, skipped, exit status 1.
"""

from __future__ import annotations

import asyncio
import stat
import time
from pathlib import Path

import aiohttp
import orjson
import pytest
from support.livecall import barge_script, drain, send_at
from support.scripted import (
    CallPlan,
    ScriptedCall,
    TurnPlan,
    WirePlan,
    order_status_turns,
    render,
)
from support.waiting import wait_until
from support.webrtckit import open_counts  # (ICE on loopback only)
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve

from voxproxy.captures.writer import CaptureSettings
from voxproxy.cli import main
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT
from voxproxy.core.receipt import Receipt
from voxproxy.core.timebase import NS_PER_S
from voxproxy.loadgen.webrtc import WebRtcCaller, WebRtcCallerConfig
from voxproxy.mockagent import MockAgentConfig
from voxproxy.mockagent.webrtc import WebRtcMockAgent
from voxproxy.proxy.server import EventsConfig, ProxyServer, ServeConfig
from voxproxy.proxy.webrtc import WebRtcProxyConfig
from voxproxy.proxy.websocket import ProxyConfig
from voxproxy.transports.webrtc import WebRtcRelayConfig
from voxproxy.transports.websocket import RelayConfig

pytestmark = pytest.mark.slow

SECRET = "capture-roundtrip-secret"
TOKEN = "capture-roundtrip-token-0123456789"
START_DELAY_NS = NS_PER_S // 10


def _turns(seed: int) -> tuple[TurnPlan, ...]:
    return order_status_turns(650.0, 900.0 + 50 * seed, 700.0)


def _calls() -> dict[str, ScriptedCall]:
    calls = {
        "raw": render(CallPlan("raw", "paced", _turns(0), lead_ms=400.0, tail_ms=800.0)),
        "twilio": render(CallPlan("twilio", "burst", _turns(1), lead_ms=400.0, tail_ms=800.0)),
    }
    modes = {"telnyx": "burst", "plivo": "paced", "vonage": "burst", "exotel": "paced"}
    for n, (dialect, mode) in enumerate(modes.items(), start=2):
        plan = WirePlan(dialect, mode, _turns(n), lead_ms=400.0, tail_ms=800.0, seed=n)  # type: ignore[arg-type]
        calls[dialect] = render(plan)
    realtime = WirePlan("openai-realtime", "burst", _turns(6), lead_ms=400.0, tool_every=2)
    calls["openai-realtime"] = render(realtime)
    return calls


class Agent:
    """Plays each call's agent side (chosen by the request's path) at its scripted times,
    and posts a tool's start and finish to the event API under the call's link id."""

    def __init__(self, calls: dict[str, ScriptedCall]) -> None:
        loop = asyncio.get_running_loop()
        self.calls = calls
        self.t0: dict[str, asyncio.Future[int]] = {k: loop.create_future() for k in calls}
        self.events_url = ""
        self.posted: dict[str, int] = dict.fromkeys(calls, 0)

    async def __call__(self, ws: ServerConnection) -> None:
        assert ws.request is not None
        name = ws.request.path.strip("/")
        link = ws.request.headers["X-Voxproxy-Call"]
        downstream = [(t, m) for t, d, m in self.calls[name].messages if d is AGENT_TO_CALLER]
        reader = asyncio.create_task(drain(ws))
        t0 = await self.t0[name]
        poster = asyncio.create_task(self._post(name, link, t0))
        await send_at(ws, t0, downstream)
        await reader
        await poster

    async def _post(self, name: str, link: str, t0: int) -> None:
        url = f"{self.events_url}/v1/calls/{link}/events"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        events = [
            (1.5, {"type": "tool.started", "operation_id": "op-1", "tool": "lookup_order"}),
            (2.4, {"type": "tool.finished", "operation_id": "op-1", "status": "ok"}),
        ]
        async with aiohttp.ClientSession() as http:
            for at_s, body in events:
                await asyncio.sleep(max(0.0, t0 / NS_PER_S + at_s - time.monotonic()))
                async with http.post(url, json=body, headers=headers) as answer:
                    assert answer.status == 202, await answer.text()
                    self.posted[name] += 1


async def _caller(url: str, name: str, call: ScriptedCall, agent: Agent) -> None:
    upstream = [(t, m) for t, d, m in call.messages if d is CALLER_TO_AGENT]
    expected = sum(1 for _t, d, _m in call.messages if d is AGENT_TO_CALLER)
    got: list[bytes | str] = []
    async with connect(f"{url}/{name}", max_size=None, compression=None) as ws:
        t0 = time.monotonic_ns() + START_DELAY_NS
        agent.t0[name].set_result(t0)
        reader = asyncio.create_task(drain(ws, got))
        await send_at(ws, t0, upstream)
        await wait_until(lambda: len(got) >= expected, call.end_ns / NS_PER_S + 15.0, name)
    await reader


async def _websocket_calls(caps: Path, out: Path) -> list[Receipt]:
    calls = _calls()
    agent = Agent(calls)
    receipts: list[Receipt] = []
    async with serve(agent, "127.0.0.1", 0, compression=None, max_size=None) as agent_server:
        port = next(iter(agent_server.sockets)).getsockname()[1]
        config = ServeConfig(
            ProxyConfig(
                RelayConfig(f"ws://127.0.0.1:{port}"), dialect="auto", secret=SECRET.encode()
            ),
            listen=("127.0.0.1", 0),
            receipts=out,
            events=EventsConfig(TOKEN, ("127.0.0.1", 0)),
            sinks=(receipts.append,),
            capture=CaptureSettings(caps),
        )
        server = ProxyServer(config)
        await server.start()
        assert server.events_api is not None
        agent.events_url = f"http://127.0.0.1:{server.events_api.port}"
        try:
            await asyncio.gather(*(_caller(server.url, n, c, agent) for n, c in calls.items()))
            await wait_until(lambda: len(receipts) == len(calls), 20.0, "every receipt")
        finally:
            await server.stop()
    assert agent.posted == dict.fromkeys(calls, 2)
    return receipts


async def _webrtc_call(caps: Path, out: Path) -> list[Receipt]:
    agent = WebRtcMockAgent(
        MockAgentConfig(delay_ms=700.0, reaction_ms=150.0, responses=("agent_confirm",))
    )
    await agent.start()
    receipts: list[Receipt] = []
    config = ServeConfig(
        WebRtcProxyConfig(WebRtcRelayConfig(agent.url("whip")), secret=SECRET.encode()),
        listen=("127.0.0.1", 0),
        receipts=out,
        sinks=(receipts.append,),
        capture=CaptureSettings(caps),
    )
    server = ProxyServer(config)
    await server.start()
    try:
        caller = WebRtcCaller(WebRtcCallerConfig(server.url), barge_script(barge_after_ms=600.0))
        record = await caller.run_webrtc()
        assert record.error is None, record.error
        await wait_until(lambda: receipts, 15.0, "the WebRTC receipt")
    finally:
        await server.stop()
        await agent.stop()
    return receipts


def _differences(a: object, b: object, at: str = "") -> list[str]:
    """Where two receipts (as JSON) differ: ``turns[1].ttfs_ms: 701.2 != 702.0``."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b))
        return [d for k in keys for d in _differences(a.get(k), b.get(k), f"{at}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        pairs = enumerate(zip(a, b, strict=True))
        return [d for i, (x, y) in pairs for d in _differences(x, y, f"{at}[{i}]")]
    return [] if a == b else [f"{at}: {a!r} != {b!r}"]


async def test_captured_calls_of_every_wire_replay_into_the_live_receipts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = open_counts()
    caps = tmp_path / "captures"
    live = await asyncio.gather(
        _websocket_calls(caps, tmp_path / "ws.jsonl"),
        _webrtc_call(caps, tmp_path / "rtc.jsonl"),
    )
    receipts = {r.call: r for group in live for r in group}
    assert open_counts() == before
    dialects = sorted(
        r.dialect if r.transport == "websocket" else "webrtc" for r in receipts.values()
    )
    assert dialects == sorted([*_calls(), "webrtc"]), dialects
    # Each call was heard (a turn at least; a CPU-starved machine can leave an agent
    # silent or merge turns, which changes the call, not whether its replay equals it),
    # and the calls together gave figures for the replay to reproduce.
    for r in receipts.values():
        assert r.summary.turns >= 1 and r.wire_looks_like is None, (r.dialect, r.summary)
    assert sum(t.ttfs_ms is not None for r in receipts.values() for t in r.turns) >= len(receipts)
    for r in receipts.values():
        # (the relay's own forwarding delays: carried over from the live call)
        assert r.forwarding is not None, r.transport
    assert stat.S_IMODE(caps.stat().st_mode) == 0o700
    files = sorted(caps.iterdir())
    assert [p.name for p in files] == sorted(f"{call}.vxcap" for call in receipts)
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o600}

    # A capture cut short (a proxy killed mid-call) lies beside them.
    (caps / "cut.vxcap").write_bytes(files[0].read_bytes()[: files[0].stat().st_size // 2])
    (caps / "cut.vxcap").chmod(0o600)
    capsys.readouterr()
    out = tmp_path / "again.jsonl"
    argv = ["analyze", str(caps), "--secret", SECRET, "--receipts", str(out)]
    code = main([*argv, "--report", "none", "--no-progress", "--jobs", "1"])
    err = capsys.readouterr().err.splitlines()
    skipped = [line for line in err if line.startswith("voxproxy analyze: skipped")]
    assert code == 1 and len(skipped) == 1 and "cut.vxcap: truncated capture" in skipped[0]

    again = {r["call"]: r for r in map(orjson.loads, out.read_text().splitlines())}
    assert set(again) == set(receipts)
    rows = []
    for call, r in sorted(receipts.items(), key=lambda kv: kv[1].dialect):
        mine, theirs = orjson.loads(r.model_dump_json(by_alias=True)), again[call]
        assert theirs["source"] == "capture" and mine["source"] == "proxy"
        diff = _differences(theirs, mine)
        assert diff == [".source: 'capture' != 'proxy'"], (r.dialect, diff)
        rows.append(
            f"{r.transport:9} {r.dialect:15} turns {r.summary.turns} "
            f"ttfs {[t.ttfs_ms for t in r.turns]} "
            f"stop {[(b.stop_latency_ms, b.reason) for t in r.turns if (b := t.barge_in)]} "
            f"reasons {[t.reason for t in r.turns if t.reason]} "
            f"events {len(r.events)}: equal"
        )
    print("\ncapture round trip, live receipt == replayed receipt (all fields but source):")
    print("\n".join(rows))
