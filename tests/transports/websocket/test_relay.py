"""The websocket relay over real loopback sockets: transparency, closes, failures."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import pytest
from support import faultkit
from support.waiting import wait_until
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.http11 import Request, Response

from voxproxy.core.receipt import Receipt
from voxproxy.proxy.lifecycle import CALL_ID_HEADER
from voxproxy.proxy.websocket import Proxy
from voxproxy.transports.websocket import RelayConfig

Handler = Callable[[ServerConnection], Awaitable[None]]


@dataclass
class AgentSide:
    received: list[bytes | str] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    subprotocols: list[str | None] = field(default_factory=list)
    close_codes: list[tuple[int | None, str | None]] = field(default_factory=list)


@asynccontextmanager
async def agent_server(handler: Handler, **kwargs: Any) -> AsyncIterator[tuple[int, AgentSide]]:
    side = AgentSide()

    async def wrapped(ws: ServerConnection) -> None:
        assert ws.request is not None
        side.requests.append(ws.request)
        side.subprotocols.append(ws.subprotocol)
        with suppress(ConnectionClosed):
            await handler(ws)
        side.close_codes.append((ws.close_code, ws.close_reason))

    async with serve(wrapped, "127.0.0.1", 0, compression=None, **kwargs) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield port, side


def running_proxy(
    upstream: str, dialect: str = "raw", **relay: Any
) -> AbstractAsyncContextManager[tuple[int, list[Receipt], Proxy]]:
    return faultkit.running_proxy(upstream, dialect, b"test-secret", **relay)


AGENT_SCRIPT: list[bytes | str] = [
    "hello",
    b"\x00\x01" * 160,
    json.dumps({"type": "clear"}),
    os.urandom(200_000),
    "ünïcødé ✓",
    b"",
    "",
]
CALLER_SCRIPT: list[bytes | str] = [
    json.dumps({"type": "start", "sample_rate": 16000}),
    b"\x10\x00" * 320,
    "not json at all",
    os.urandom(300_000),
    b"\xff",
    "{}",
]


async def scripted_agent(ws: ServerConnection) -> None:
    for m in AGENT_SCRIPT:
        await ws.send(m)
    async for m in ws:
        if m == "{}":
            await ws.close(4002, "agent done")
            return


async def exchange(url: str) -> tuple[list[bytes | str], int | None, str | None]:
    got: list[bytes | str] = []
    async with connect(url, max_size=None, compression=None) as ws:
        for _ in AGENT_SCRIPT:
            got.append(await ws.recv())
        for m in CALLER_SCRIPT:
            await ws.send(m)
        with pytest.raises(ConnectionClosed):
            await ws.recv()
        return got, ws.close_code, ws.close_reason


async def test_messages_are_byte_exact_and_in_order_with_and_without_proxy() -> None:
    async with agent_server(scripted_agent, max_size=None) as (agent_port, side):
        direct, code_d, reason_d = await exchange(f"ws://127.0.0.1:{agent_port}/")
        async with running_proxy(f"ws://127.0.0.1:{agent_port}", max_message_bytes=1 << 22) as (
            port,
            receipts,
            _,
        ):
            proxied, code_p, reason_p = await exchange(f"ws://127.0.0.1:{port}/")
            await wait_until(lambda: len(receipts) == 1)
    assert direct == AGENT_SCRIPT
    assert proxied == direct  # the caller saw exactly the same messages, types included
    assert [type(m) for m in proxied] == [type(m) for m in AGENT_SCRIPT]
    # The agent saw the caller's messages identically on both calls.
    assert side.received == []  # (not recorded by this handler)
    assert (code_p, reason_p) == (code_d, reason_d) == (4002, "agent done")
    r = receipts[0]
    assert r.terminal == "agent_closed"
    assert r.close.agent_code == 4002 and r.close.caller_code == 4002
    assert r.traffic.agent_to_caller_messages == len(AGENT_SCRIPT)
    assert r.traffic.caller_to_agent_messages == len(CALLER_SCRIPT)
    # "not json at all" is malformed for the raw dialect; "{}" has no known type.
    assert r.anomalies.get("malformed", 0) >= 1
    assert r.anomalies.get("unknown_event", 0) >= 1


async def test_caller_messages_reach_the_agent_unchanged() -> None:
    received: list[bytes | str] = []

    async def recorder(ws: ServerConnection) -> None:
        async for m in ws:
            received.append(m)
            if m == "{}":
                await ws.close()

    async with agent_server(recorder, max_size=None) as (agent_port, _side):
        async with running_proxy(f"ws://127.0.0.1:{agent_port}", max_message_bytes=None) as (
            port,
            receipts,
            _,
        ):
            async with connect(f"ws://127.0.0.1:{port}", max_size=None, compression=None) as ws:
                for m in CALLER_SCRIPT:
                    await ws.send(m)
                with pytest.raises(ConnectionClosed):
                    await ws.recv()
            await wait_until(lambda: len(receipts) == 1)
    assert received == CALLER_SCRIPT


async def test_fragmented_messages_pass_with_their_fragments() -> None:
    got: list[bytes | str] = []

    async def agent(ws: ServerConnection) -> None:
        await ws.send(["frag", "mented ", "text"])
        await ws.send([b"\x01\x02", b"\x03"])
        async for m in ws:
            got.append(m)
            await ws.close()

    async with agent_server(agent) as (agent_port, _side):
        async with running_proxy(f"ws://127.0.0.1:{agent_port}") as (port, receipts, _):
            async with connect(f"ws://127.0.0.1:{port}") as ws:
                assert await ws.recv() == "fragmented text"
                assert await ws.recv() == b"\x01\x02\x03"
                await ws.send(["a", "b"])
                with pytest.raises(ConnectionClosed):
                    await ws.recv()
            await wait_until(lambda: len(receipts) == 1)
    assert got == ["ab"]
    # Measured as whole messages: the two agent messages are two, not five.
    assert receipts[0].traffic.agent_to_caller_messages == 2


async def test_path_query_subprotocol_and_headers_pass_through() -> None:
    async def agent(ws: ServerConnection) -> None:
        await ws.send("ok")
        await ws.wait_closed()

    async with agent_server(agent, subprotocols=["audio.v2", "audio.v1"]) as (agent_port, side):
        async with running_proxy(f"ws://127.0.0.1:{agent_port}") as (port, receipts, _):
            async with connect(
                f"ws://127.0.0.1:{port}/stream/42?lang=es&x=1",
                subprotocols=["audio.v1"],  # type: ignore[list-item]
                additional_headers={"Authorization": "Bearer tok", "X-Custom": "v"},
            ) as ws:
                assert ws.subprotocol == "audio.v1"
                assert await ws.recv() == "ok"
            await wait_until(lambda: len(receipts) == 1)
    req = side.requests[0]
    assert req.path == "/stream/42?lang=es&x=1"
    assert req.headers["Authorization"] == "Bearer tok"
    assert req.headers["X-Custom"] == "v"
    assert len(req.headers[CALL_ID_HEADER]) == 32
    assert side.subprotocols == ["audio.v1"]
    assert receipts[0].terminal == "caller_closed"
    assert receipts[0].close.caller_code == 1000


async def test_upstream_path_is_kept_when_configured() -> None:
    async def agent(ws: ServerConnection) -> None:
        await ws.wait_closed()

    async with agent_server(agent) as (agent_port, side):
        async with running_proxy(f"ws://127.0.0.1:{agent_port}/agent?k=1") as (port, receipts, _):
            async with connect(f"ws://127.0.0.1:{port}/ignored?y=2"):
                pass
            await wait_until(lambda: len(receipts) == 1)
    # The path is the upstream's; the caller's query goes on, after the upstream's own.
    assert side.requests[0].path == "/agent?k=1&y=2"


@pytest.mark.parametrize(
    ("upstream", "pass_path", "pass_query", "caller", "expected"),
    [
        ("ws://a/", None, True, "/media/stream?tenant=42", "/media/stream?tenant=42"),
        ("ws://a/stream", None, True, "/media/stream?tenant=42", "/stream?tenant=42"),
        ("ws://a/stream?k=1", None, True, "/x?t=2", "/stream?k=1&t=2"),
        ("ws://a/stream?k=1", None, False, "/x?t=2", "/stream?k=1"),
        ("ws://a/stream", True, True, "/x?t=2", "/stream/x?t=2"),
        ("ws://a/", False, True, "/x?t=2", "/?t=2"),
        ("ws://a/", False, False, "/x?t=2", "/"),
    ],
)
def test_what_path_and_query_the_agent_is_asked_for(
    upstream: str, pass_path: bool | None, pass_query: bool, caller: str, expected: str
) -> None:
    config = RelayConfig(upstream, pass_path=pass_path, pass_query=pass_query)
    assert config.upstream_resource(caller) == expected


async def test_caller_close_code_and_reason_reach_the_agent() -> None:
    async def agent(ws: ServerConnection) -> None:
        await ws.wait_closed()

    async with agent_server(agent) as (agent_port, side):
        async with running_proxy(f"ws://127.0.0.1:{agent_port}") as (port, receipts, _):
            async with connect(f"ws://127.0.0.1:{port}") as ws:
                await ws.close(4100, "caller hung up")
            await wait_until(lambda: len(receipts) == 1 and len(side.close_codes) == 1)
    assert side.close_codes == [(4100, "caller hung up")]
    assert receipts[0].close.caller_code == 4100
    assert receipts[0].close.initiator == "caller"


async def test_upstream_refusal_is_mirrored_and_recorded(caplog: pytest.LogCaptureFixture) -> None:
    def refuse(conn: ServerConnection, request: Request) -> Response:
        return conn.respond(403, "forbidden by agent\n")

    async def agent(ws: ServerConnection) -> None:
        raise AssertionError("never reached")

    async with agent_server(agent, process_request=refuse) as (agent_port, _side):
        async with running_proxy(f"ws://127.0.0.1:{agent_port}") as (port, receipts, _):
            with pytest.raises(InvalidStatus) as info:
                async with connect(f"ws://127.0.0.1:{port}"):
                    pass
            await wait_until(lambda: len(receipts) == 1)
    assert info.value.response.status_code == 403
    r = receipts[0]
    assert r.terminal == "upstream_refused"
    assert r.close.upstream_status == 403
    assert r.turns == []
    # The proxy's log says, for this call, why it failed.
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "voxproxy.proxy"]
    assert f"call {r.call}: forbidden by agent (the caller was answered HTTP 403)" in lines


async def test_unreachable_upstream_gets_502_and_a_receipt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with running_proxy("ws://127.0.0.1:9") as (port, receipts, _):
        for _ in range(2):
            with pytest.raises(InvalidStatus) as info:
                async with connect(f"ws://127.0.0.1:{port}"):
                    pass
        await wait_until(lambda: len(receipts) == 2)
    assert info.value.response.status_code == 502
    assert [r.terminal for r in receipts] == ["upstream_unreachable"] * 2
    # One warning per call, naming the call and the cause.
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "voxproxy.proxy"]
    for r in receipts:
        (line,) = [ln for ln in lines if ln.startswith(f"call {r.call}: ")]
        assert "agent unreachable" in line and "refused" in line.lower(), line
        assert line.endswith("(the caller was answered HTTP 502)"), line


async def test_silent_upstream_handshake_times_out_with_504() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # reads the handshake, never answers, until the proxy gives up
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    agent_port = server.sockets[0].getsockname()[1]
    async with running_proxy(f"ws://127.0.0.1:{agent_port}", handshake_timeout_s=0.3) as (
        port,
        receipts,
        _,
    ):
        with pytest.raises(InvalidStatus) as info:
            async with connect(f"ws://127.0.0.1:{port}", open_timeout=5):
                pass
        await wait_until(lambda: len(receipts) == 1)
    server.close()
    await server.wait_closed()
    assert info.value.response.status_code == 504
    assert receipts[0].terminal == "upstream_timeout"


async def test_oversized_message_closes_with_1009_and_is_counted() -> None:
    async def agent(ws: ServerConnection) -> None:
        await ws.wait_closed()

    async with agent_server(agent, max_size=None) as (agent_port, side):
        async with running_proxy(f"ws://127.0.0.1:{agent_port}", max_message_bytes=10_000) as (
            port,
            receipts,
            _,
        ):
            async with connect(f"ws://127.0.0.1:{port}") as ws:
                await ws.send(b"x" * 20_000)
                with pytest.raises(ConnectionClosed):
                    await ws.recv()
                assert ws.close_code == 1009
            await wait_until(lambda: len(receipts) == 1 and len(side.close_codes) == 1)
    assert receipts[0].terminal == "message_too_big"
    assert receipts[0].anomalies.get("oversized") == 1
    assert side.close_codes[0][0] == 1009


async def test_caller_that_vanishes_gets_a_receipt_and_the_agent_a_going_away() -> None:
    async def agent(ws: ServerConnection) -> None:
        await ws.wait_closed()

    async with agent_server(agent) as (agent_port, side):
        async with running_proxy(f"ws://127.0.0.1:{agent_port}") as (port, receipts, _):
            ws = await connect(f"ws://127.0.0.1:{port}")
            await ws.send(b"\x00" * 640)
            ws.transport.abort()  # no close frame, the TCP connection just drops
            await wait_until(lambda: len(receipts) == 1 and len(side.close_codes) == 1)
    assert receipts[0].terminal == "caller_vanished"
    assert side.close_codes[0][0] == 1001


async def test_agent_that_drops_mid_call_closes_the_caller_with_1014() -> None:
    heard = asyncio.Event()  # the caller has the agent's first words: the call is under way

    async def agent(ws: ServerConnection) -> None:
        await ws.send("hi")
        await asyncio.wait_for(heard.wait(), 10)
        ws.transport.abort()

    async with agent_server(agent) as (agent_port, _side):
        async with running_proxy(f"ws://127.0.0.1:{agent_port}") as (port, receipts, _):
            async with connect(f"ws://127.0.0.1:{port}") as ws:
                assert await ws.recv() == "hi"
                heard.set()
                with pytest.raises(ConnectionClosed):
                    await ws.recv()
                assert ws.close_code == 1014
            await wait_until(lambda: len(receipts) == 1)
    assert receipts[0].terminal == "agent_vanished"


@pytest.mark.slow
async def test_stalled_agent_does_not_hold_other_calls_and_still_gets_a_receipt() -> None:
    async def stalled(ws: ServerConnection) -> None:
        await asyncio.sleep(2.5)  # never reads, never answers a close

    async def echo(ws: ServerConnection) -> None:
        async for m in ws:
            await ws.send(m)

    async with agent_server(stalled) as (stalled_port, _s), agent_server(echo) as (echo_port, _e):
        async with (
            running_proxy(f"ws://127.0.0.1:{stalled_port}", close_timeout_s=0.5) as (
                p1,
                receipts1,
                _,
            ),
            running_proxy(f"ws://127.0.0.1:{echo_port}") as (p2, receipts2, _),
        ):
            async with connect(f"ws://127.0.0.1:{p1}") as stuck:
                for _ in range(20):
                    await stuck.send(b"\x00" * 320)
                async with connect(f"ws://127.0.0.1:{p2}") as fine:
                    for i in range(20):
                        await fine.send(f"m{i}")
                        assert await fine.recv() == f"m{i}"
            await wait_until(lambda: len(receipts1) == 1 and len(receipts2) == 1, 5.0)
    assert receipts1[0].terminal == "caller_closed"
    assert receipts2[0].traffic.agent_to_caller_messages == 20


async def test_many_concurrent_calls_do_not_mix() -> None:
    async def echo(ws: ServerConnection) -> None:
        async for m in ws:
            await ws.send(m)

    async def one_call(port: int, n: int) -> list[bytes | str]:
        async with connect(f"ws://127.0.0.1:{port}/c{n}") as ws:
            out = []
            for i in range(10):
                await ws.send(f"call{n}-msg{i}")
                out.append(await ws.recv())
            return out

    async with agent_server(echo) as (agent_port, _side):
        async with running_proxy(f"ws://127.0.0.1:{agent_port}") as (port, receipts, proxy):
            results = await asyncio.gather(*(one_call(port, n) for n in range(60)))
            await wait_until(lambda: len(receipts) == 60)
            assert proxy.active == 0
    for n, out in enumerate(results):
        assert out == [f"call{n}-msg{i}" for i in range(10)]
    assert len({r.call for r in receipts}) == 60


@pytest.mark.usefixtures("lenient_sessions")  # counts injected failures
async def test_a_measurement_failure_is_counted_and_forwarding_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from voxproxy.core.dialects import raw

    calls = 0

    def broken(self: object, direction: object, payload: object, t_ns: int) -> list[object]:
        nonlocal calls
        calls += 1
        raise RuntimeError("injected")

    monkeypatch.setattr(raw.RawDecoder, "decode", broken)

    async def echo(ws: ServerConnection) -> None:
        async for m in ws:
            await ws.send(m)

    async with agent_server(echo) as (agent_port, _side):
        async with running_proxy(f"ws://127.0.0.1:{agent_port}") as (port, receipts, _):
            async with connect(f"ws://127.0.0.1:{port}") as ws:
                for _i in range(5):
                    await ws.send(b"\x00\x00" * 160)
                    assert await ws.recv() == b"\x00\x00" * 160
            await wait_until(lambda: len(receipts) == 1)
    assert calls == 10
    assert receipts[0].anomalies["measurement_error"] == 10
    assert receipts[0].traffic.caller_to_agent_messages == 5


def test_headers_type_is_what_websockets_uses() -> None:
    # The relay copies end-to-end headers with Headers.raw_items(); keep that API honest.
    h = Headers([("A", "1"), ("a", "2")])
    assert list(h.raw_items()) == [("A", "1"), ("a", "2")]


async def test_twilio_bad_input_is_forwarded_and_counted() -> None:
    received: list[bytes | str] = []

    async def recorder(ws: ServerConnection) -> None:
        async for m in ws:
            received.append(m)

    bad: list[bytes | str] = [
        json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}),
        "{this is not json",
        json.dumps({"event": "media", "streamSid": "MZ1", "media": {"payload": "%%%notb64"}}),
        json.dumps({"event": "teleport", "streamSid": "MZ1"}),
        b"\x00\x01binary where Twilio sends text",
        json.dumps({"event": "media", "streamSid": "MZ1", "media": {"payload": "//8="}}),
        json.dumps([1, 2, 3]),
    ]
    async with agent_server(recorder) as (agent_port, _side):
        async with running_proxy(f"ws://127.0.0.1:{agent_port}", dialect="twilio") as (
            port,
            receipts,
            _,
        ):
            async with connect(f"ws://127.0.0.1:{port}") as ws:
                for m in bad:
                    await ws.send(m)
                await wait_until(lambda: len(received) == len(bad), what="all of it at the agent")
            await wait_until(lambda: len(receipts) == 1)
    assert received == bad  # every message went through unchanged
    a = receipts[0].anomalies
    assert a == {"invalid_base64": 1, "malformed": 2, "unexpected_binary": 1, "unknown_event": 1}
    assert receipts[0].traffic.caller_to_agent_messages == len(bad)
