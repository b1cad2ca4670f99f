"""Helpers for fault-injection tests: a routing agent, a proxy, healthy Twilio calls.

The agent picks its behaviour by the first segment of the request path (the
proxy passes the caller's path upstream), so one proxy and one agent serve a
faulty call and healthy ones side by side: ``/echo/...`` echoes media,
``/refuse/...`` answers the handshake 403, and tests add their own routes.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.http11 import Request, Response

from support.waiting import wait_until
from voxproxy.core.dialects.twilio import TwilioCallerWire
from voxproxy.core.ids import keyed_hash
from voxproxy.core.receipt import Receipt
from voxproxy.proxy.websocket import Proxy, ProxyConfig
from voxproxy.telemetry import Telemetry
from voxproxy.transports.websocket import RelayConfig

SECRET = b"fault-secret"
ULAW_SILENCE = b"\xff" * 160  # 20 ms of 8 kHz mu-law silence
Handler = Callable[[ServerConnection], Awaitable[None]]


def route_of(path: str) -> str:
    return path.lstrip("/").split("/", 1)[0].split("?", 1)[0]


def call_sid(name: str) -> str:
    """A Twilio-shaped call id for a test call name."""
    return "CA" + name.encode().hex().ljust(32, "0")[:32]


def call_hash(sid: str) -> str:
    """The receipt's ``call`` for a call whose wire id is ``sid``."""
    return keyed_hash(SECRET, sid, "c_")


@dataclass
class Router:
    routes: dict[str, Handler] = field(default_factory=dict)
    refuse: dict[str, int] = field(default_factory=dict)
    delay_handshake_s: dict[str, float] = field(default_factory=dict)
    received: dict[str, list[bytes | str]] = field(default_factory=lambda: defaultdict(list))
    close_codes: dict[str, int | None] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)  # every handshake's path, as it comes in
    port: int = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"


async def echo_media(ws: ServerConnection) -> None:
    """Echo every Twilio media message back (as the agent's audio)."""
    async for m in ws:
        if isinstance(m, str) and '"media"' in m:
            await ws.send(m)


@asynccontextmanager
async def router_agent(**routes: Handler) -> AsyncIterator[Router]:
    router = Router(routes={"echo": echo_media, **routes})

    async def process_request(conn: ServerConnection, request: Request) -> Response | None:
        router.asked.append(request.path)
        route = route_of(request.path)
        delay = router.delay_handshake_s.get(route)
        if delay:
            await asyncio.sleep(delay)
        status = router.refuse.get(route)
        if status is not None:
            return conn.respond(status, f"refused by the test agent ({route})\n")
        return None

    async def handler(ws: ServerConnection) -> None:
        assert ws.request is not None
        path = ws.request.path
        with suppress(ConnectionClosed):
            await router.routes[route_of(path)](ws)
        router.close_codes[path] = ws.close_code

    async with serve(
        handler,
        "127.0.0.1",
        0,
        process_request=process_request,
        compression=None,
        max_size=None,
        ping_interval=None,
        close_timeout=1,
    ) as server:
        router.port = next(iter(server.sockets)).getsockname()[1]
        yield router


@asynccontextmanager
async def running_proxy(
    upstream: str,
    dialect: str = "twilio",
    secret: bytes = SECRET,
    telemetry: Telemetry | None = None,
    **relay: Any,
) -> AsyncIterator[tuple[int, list[Receipt], Proxy]]:
    """A proxy in this process to ``upstream`` for the block: its port, the receipts it
    writes, and the proxy. Its admission on event-loop lag is off: the loop is the test
    process's, shared with the test's callers and agents and paused by its garbage
    collector (a 238 ms reading refused a test's caller; tests/proxy/test_overload.py
    tests that admission with its own proxies)."""
    receipts: list[Receipt] = []
    proxy = Proxy(
        ProxyConfig(
            RelayConfig(upstream, **relay), dialect=dialect, secret=secret, max_loop_lag_ms=None
        ),
        sinks=[receipts.append],
        telemetry=telemetry,
    )
    port = await proxy.start("127.0.0.1", 0)
    try:
        yield port, receipts, proxy
    finally:
        await proxy.stop()


@asynccontextmanager
async def proxy_before(
    handler: Callable[[ServerConnection], Awaitable[None]], telemetry: Telemetry | None = None
) -> AsyncIterator[tuple[int, list[Receipt], Proxy]]:
    """A websocket agent serving ``handler`` on loopback, behind a raw-wire proxy in this
    process (see :func:`running_proxy`), for the block."""
    async with serve(handler, "127.0.0.1", 0, compression=None) as agent:
        agent_port = next(iter(agent.sockets)).getsockname()[1]
        async with running_proxy(f"ws://127.0.0.1:{agent_port}", "raw", b"k", telemetry) as ctx:
            yield ctx


async def refused(url: str, **options: Any) -> Response:
    """The HTTP response that refused the websocket handshake to ``url`` (it must be
    refused)."""
    with pytest.raises(InvalidStatus) as info:
        async with connect(url, **options):
            pass
    return info.value.response


@dataclass
class Healthy:
    sid: str
    sent: list[str] = field(default_factory=list)
    echoed: list[bytes | str] = field(default_factory=list)
    rtt_s: list[float] = field(default_factory=list)
    close_code: int | None = None


async def healthy_call(
    port: int, name: str, frames: int = 40, interval_s: float = 0.02, scheme: str = "ws", **kw: Any
) -> Healthy:
    """A well-behaved Twilio call through the proxy to ``/echo``: every media frame comes back."""
    sid = call_sid(name)
    wire = TwilioCallerWire("MZ" + sid[2:], sid)
    out = Healthy(sid)
    async with connect(
        f"{scheme}://127.0.0.1:{port}/echo/{name}",
        compression=None,
        max_size=None,
        open_timeout=10,
        **kw,
    ) as ws:
        await ws.send(wire.connected())
        await ws.send(wire.start())
        for _ in range(frames):
            m = wire.media(ULAW_SILENCE)
            out.sent.append(m)
            t0 = time.monotonic()
            await ws.send(m)
            out.echoed.append(await asyncio.wait_for(ws.recv(), 10))
            out.rtt_s.append(time.monotonic() - t0)
            await asyncio.sleep(interval_s)
        await ws.send(wire.stop())
    out.close_code = ws.close_code
    return out


def receipts_of(receipts: list[Receipt], sid: str) -> list[Receipt]:
    h = call_hash(sid)
    return [r for r in receipts if r.call == h]


def assert_healthy(h: Healthy, receipts: list[Receipt]) -> None:
    """The call went through untouched and has exactly one clean receipt."""
    assert h.echoed == h.sent, "a healthy call lost or changed messages"
    mine = receipts_of(receipts, h.sid)
    assert len(mine) == 1, f"{len(mine)} receipts for one healthy call"
    r = mine[0]
    assert r.terminal == "completed"
    assert r.close.caller_code == 1000
    assert r.anomalies == {}
    assert r.traffic.caller_to_agent_messages == len(h.sent) + 3  # connected, start, stop
    assert r.traffic.agent_to_caller_messages == len(h.sent)


def twilio_start(sid: str, custom: dict[str, str] | None = None) -> str:
    return TwilioCallerWire("MZ" + sid[2:], sid).start(custom)


def media(payload_b64: str, sid: str = "MZ1") -> str:
    return json.dumps({"event": "media", "streamSid": sid, "media": {"payload": payload_b64}})


async def settle(receipts: list[Receipt], n: int, proxy: Proxy, timeout: float = 8.0) -> None:
    """Wait for ``n`` receipts and for the proxy to hold nothing more (no call in progress,
    no relay, nothing queued for measurement): a duplicate would have been written by then."""
    await wait_until(lambda: len(receipts) >= n, timeout, f"{n} receipts")
    await wait_until(
        lambda: proxy.active == 0 and not proxy.server.relays and proxy.measuring.queued == 0,
        timeout,
        "the proxy idle",
    )
    assert len(receipts) == n, [r.terminal for r in receipts]
