"""The accepting side (``voxproxy/transports/websocket/server.py``), on loopback: a relay
per caller on the port it bound, and the graceful stop: no new caller, calls that end
within the drain end by themselves, the rest are closed with 1001 (going away), and a
caller that never answers the close is cut off."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest
from support.observers import EndsKept
from support.waiting import wait_until
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from voxproxy.core.events import Direction
from voxproxy.transports.websocket import EndCause, RelayConfig, RelayServer


@dataclass
class Kept(EndsKept):
    messages: list[bytes | str] = field(default_factory=list)

    def on_message(self, direction: Direction, payload: bytes | str, t_ns: int) -> bool | None:
        del direction, t_ns
        self.messages.append(payload)
        return True


async def _echo(ws: ServerConnection) -> None:
    async for message in ws:
        await ws.send(message)


@asynccontextmanager
async def _relay(
    close_timeout_s: float = 1.0,
) -> AsyncIterator[tuple[RelayServer, int, list[Kept]]]:
    observers: list[Kept] = []

    def factory(t_ns: int) -> Kept:
        del t_ns
        observers.append(Kept())
        return observers[-1]

    async with serve(_echo, "127.0.0.1", 0) as agent:
        agent_port = agent.sockets[0].getsockname()[1]
        config = RelayConfig(f"ws://127.0.0.1:{agent_port}", close_timeout_s=close_timeout_s)
        server = RelayServer(config, factory)
        port = await server.start("127.0.0.1", 0)
        try:
            yield server, port, observers
        finally:
            await server.stop()


async def test_each_caller_gets_a_relay_on_the_port_the_server_bound() -> None:
    async with _relay() as (server, port, observers):
        assert port > 0 and server.server is not None
        async with (
            connect(f"ws://127.0.0.1:{port}/a") as one,
            connect(f"ws://127.0.0.1:{port}/b") as two,
        ):
            await one.send("hello")
            await two.send(b"\x01\x02")
            assert await asyncio.wait_for(one.recv(), 5) == "hello"
            assert await asyncio.wait_for(two.recv(), 5) == b"\x01\x02"
            assert len(server.relays) == 2 and len(observers) == 2
        await wait_until(lambda: not server.relays, what="both relays gone")
    assert sorted(len(o.ends) for o in observers) == [1, 1]


async def test_a_stop_closes_calls_in_progress_with_going_away_and_takes_no_new_caller() -> None:
    async with _relay() as (server, port, observers):
        async with connect(f"ws://127.0.0.1:{port}") as caller:
            await caller.send("before")
            assert await asyncio.wait_for(caller.recv(), 5) == "before"
            await server.stop(drain_s=0.0)
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(caller.recv(), 5)
            assert caller.close_code == 1001
        assert not server.relays
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)
    (ended,) = observers
    assert [e.cause for e in ended.ends] == [EndCause.PROXY_SHUTDOWN]
    assert ended.ends[0].initiator == "proxy"


async def test_a_call_that_ends_within_the_drain_ends_by_itself() -> None:
    async with _relay() as (server, port, observers):
        caller = await connect(f"ws://127.0.0.1:{port}")
        await caller.send("last words")
        assert await asyncio.wait_for(caller.recv(), 5) == "last words"
        stopping = asyncio.create_task(server.stop(drain_s=30.0))
        await asyncio.sleep(0.05)
        assert not stopping.done()  # draining: the call still goes on
        await caller.close()
        await asyncio.wait_for(stopping, 10)  # done as the last call ended, not at 30 s
        assert caller.close_code == 1000
    (ended,) = observers
    assert [e.cause for e in ended.ends] != [EndCause.PROXY_SHUTDOWN]
    assert ended.ends[0].initiator == "caller"


@pytest.mark.slow
async def test_a_caller_that_never_answers_the_close_is_cut_off() -> None:
    async with _relay(close_timeout_s=0.2) as (server, port, _):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        key = "dGhlIHNhbXBsZSBub25jZQ=="
        writer.write(
            (
                f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 101 ")
        await wait_until(lambda: len(server.relays) == 1, what="the call relayed")
        await asyncio.wait_for(server.stop(drain_s=0.0), 10)  # the caller never closes
        assert not server.relays
        rest = await asyncio.wait_for(reader.read(), 5)  # the close frame, then EOF
        assert rest[:1] == b"\x88"  # a close frame came first
        writer.close()
