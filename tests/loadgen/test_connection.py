"""The caller's connection hands messages over as they arrive, in order, and keeps that
order with messages that go websockets' usual way (a fragmented message, one that came
before the handler was set): those and all after them until the queue is read."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import uvloop
from support.waiting import wait_until
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from voxproxy.loadgen.connection import DirectConnection, proxy_for
from voxproxy.transports.stamped import SUPPORTED

Sent = list[str | bytes | list[str]]


@asynccontextmanager
async def _direct_to(
    handler: Callable[[ServerConnection], Awaitable[None]],
) -> AsyncIterator[DirectConnection]:
    """The caller's connection (a ``DirectConnection``) to a loopback websocket server
    whose every connection ``handler`` serves; both open for the block."""
    async with serve(handler, "127.0.0.1", 0, compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        async with connect(
            f"ws://127.0.0.1:{port}/", compression=None, create_connection=DirectConnection
        ) as ws:
            assert isinstance(ws, DirectConnection)
            yield ws


async def _exchange(
    early: Sent, sent: Sent, fail_on: str | None = None
) -> tuple[list[str | bytes], DirectConnection]:
    """The server sends ``early`` at once, then ``sent`` once the client says "go"."""

    async def handler(ws: ServerConnection) -> None:
        for m in early:
            await ws.send(m)
        assert await ws.recv() == "go"
        for m in sent:
            await ws.send(m)  # a list: one message in fragments
        await ws.close()

    got: list[str | bytes] = []

    def on_message(m: str | bytes) -> None:
        if m == fail_on:
            raise ValueError("the caller could not read it")
        got.append(m)

    async with _direct_to(handler) as ws:
        # The early ones land in the queue (no handler yet).
        await wait_until(lambda: ws._queued == len(early), what="the early messages queued")
        ws.on_message = on_message
        await ws.send("go")
        try:
            async for m in ws:  # what was not handed over
                got.append(m)
        except ConnectionClosed:
            pass
    return got, ws


def test_whole_messages_are_handed_over_in_order() -> None:
    got, ws = asyncio.run(_exchange([], ["a", b"b", "c", b"d"]))
    assert got == ["a", b"b", "c", b"d"]
    assert ws.handed == 4 and ws.failure is None


def test_messages_queued_before_the_handler_come_first() -> None:
    got, ws = asyncio.run(_exchange(["e1", b"e2"], ["a", b"b"]))
    assert got == ["e1", b"e2", "a", b"b"]
    assert ws.handed <= 2  # a and b, unless they came before the queue was read


def test_after_a_fragmented_message_the_order_is_kept() -> None:
    got, ws = asyncio.run(_exchange([], ["a", b"b", ["c1", "c2"], "d", b"e"]))
    assert got == ["a", b"b", "c1c2", "d", b"e"]
    assert 2 <= ws.handed <= 4  # a and b at least; c went through the queue


def test_a_handler_that_raises_is_kept_and_the_rest_still_arrive() -> None:
    got, ws = asyncio.run(_exchange([], ["a", "bad", "c"], fail_on="bad"))
    assert isinstance(ws.failure, ValueError)
    assert got == ["a", "c"]  # "c" came through the queue


def test_the_proxy_is_the_one_websockets_takes_from_the_environment_looked_up_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("ws_proxy", "socks_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("http_proxy", "http://proxy.example:3128")
    monkeypatch.setenv("no_proxy", "bypassed.example")
    proxy_for.cache_clear()
    try:
        assert proxy_for("ws://agent.example/stream") == "http://proxy.example:3128"
        assert proxy_for("ws://bypassed.example/stream") is None
        monkeypatch.setenv("http_proxy", "http://other.example:3128")
        assert proxy_for("ws://agent.example/stream") == "http://proxy.example:3128"  # once
    finally:
        proxy_for.cache_clear()


async def _late_message() -> tuple[int, int, int]:
    """The server sends one message, then the loop (the caller's too) is blocked for
    200 ms: (when it was sent, when the block ended, the arrival the caller was told)."""
    times: list[int] = []

    async def handler(ws: ServerConnection) -> None:
        assert await ws.recv() == "go"
        times.append(time.monotonic_ns())
        await ws.send(b"late")  # (written to the socket at once)
        time.sleep(0.2)  # a callback that runs long: the caller reads nothing meanwhile
        times.append(time.monotonic_ns())
        await ws.wait_closed()

    arrivals: list[int] = []
    async with _direct_to(handler) as ws:
        ws.on_message = lambda m: arrivals.append(ws.arrival_ns())
        await ws.send("go")
        await wait_until(lambda: arrivals, what="the message")
    return times[0], times[1], arrivals[0]


@pytest.mark.skipif(not SUPPORTED, reason="kernel receive stamps are Linux's")
@pytest.mark.parametrize("run", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])
def test_a_message_read_late_is_handed_over_with_its_arrival(run: Callable[..., Any]) -> None:
    sent, unblocked, arrival = run(_late_message())
    assert sent - 2_000_000 <= arrival <= sent + 5_000_000 < unblocked
