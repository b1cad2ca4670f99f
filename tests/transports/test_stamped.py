"""Reads stamped by the kernel (transports/stamped.py): bytes read late say when they
arrived; the connection still writes, half-closes, pauses and closes as before; a TLS
connection falls back to the transport's own reads, and says so (None)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import uvloop
from support.tlskit import tls_contexts
from support.waiting import wait_until

from voxproxy.transports.stamped import SUPPORTED, StampedReader, attach

BLOCK_S = 0.2  # the loop is blocked this long after the bytes arrived
SLEW_NS = 2_000_000  # the wall clock's slew between arrival and read (the stamp's clock)

pytestmark = pytest.mark.skipif(not SUPPORTED, reason="kernel receive stamps are Linux's")

LOOPS: dict[str, Callable[[Coroutine[Any, Any, Any]], Any]] = {
    "asyncio": asyncio.run,
    "uvloop": uvloop.run,
}


class Sink(asyncio.Protocol):
    """Keeps what it reads with the reader's stamps at that moment."""

    def __init__(self, stamped: bool = True) -> None:
        self.stamped = stamped
        self.reader: StampedReader | None = None
        self.transport: asyncio.Transport | None = None
        self.got: list[tuple[bytes, int, bool, int]] = []  # data, rx_ns, kernel, lo_ns
        self.eof = False
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.stamped:
            self.reader = attach(transport, self)

    def data_received(self, data: bytes) -> None:
        r = self.reader
        if r is None or not r.handing:
            self.got.append((data, time.monotonic_ns(), False, 0))
        else:
            self.got.append((data, r.rx_ns, r.kernel, r.lo_ns))

    def eof_received(self) -> bool | None:
        self.eof = True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.reader is not None:
            self.reader.close()
        if not self.lost.done():
            self.lost.set_result(exc)


@asynccontextmanager
async def _paired(stamped: bool = True) -> AsyncIterator[tuple[Sink, socket.socket]]:
    """A server whose connection a Sink reads, and a blocking client socket to it; both
    closed at the end of the block."""
    loop = asyncio.get_running_loop()
    sinks: list[Sink] = []

    def made() -> Sink:
        sinks.append(Sink(stamped))
        return sinks[-1]

    server = await loop.create_server(made, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        await wait_until(lambda: sinks and sinks[0].transport is not None, 5.0, "the connection")
        yield sinks[0], client
    finally:
        client.close()
        server.close()


async def _late_read() -> tuple[Sink, int, int]:
    """Bytes sent, then the loop blocked for BLOCK_S: (the sink, sent, unblocked)."""
    async with _paired() as (sink, client):
        await asyncio.sleep(0.05)
        sent = time.monotonic_ns()
        client.sendall(b"hello")
        time.sleep(BLOCK_S)  # the loop cannot read them now (as if a callback ran long)
        unblocked = time.monotonic_ns()
        await wait_until(lambda: sink.got, 5.0, "the bytes")
        return sink, sent, unblocked


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_bytes_read_late_are_stamped_with_their_arrival(loop: str) -> None:
    sink, sent, unblocked = LOOPS[loop](_late_read())
    assert sink.reader is not None
    data, rx_ns, kernel, _lo = sink.got[0]
    assert data == b"hello" and kernel
    # Their arrival (a few ms after the send at most), not the read (BLOCK_S later).
    assert sent - SLEW_NS <= rx_ns <= sent + 5_000_000 < unblocked


async def _queued_then_read() -> tuple[Sink, list[int]]:
    """Three messages 30 ms apart while the loop is blocked: one read holds them all."""
    async with _paired() as (sink, client):
        await asyncio.sleep(0.05)
        sends = []
        for i in range(3):
            sends.append(time.monotonic_ns())
            client.sendall(bytes([65 + i]) * 10)
            time.sleep(0.03)
        await wait_until(lambda: sum(len(g[0]) for g in sink.got) >= 30, 5.0, "the bytes")
        return sink, sends


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_read_of_bytes_that_queued_times_its_last_and_bounds_its_first(loop: str) -> None:
    sink, sends = LOOPS[loop](_queued_then_read())
    data, rx_ns, kernel, lo_ns = sink.got[0]
    assert data == b"A" * 10 + b"B" * 10 + b"C" * 10 and kernel
    # The stamp is the last bytes' arrival; the first ones arrived after lo_ns.
    assert sends[2] - SLEW_NS <= rx_ns <= sends[2] + 5_000_000
    assert lo_ns <= sends[0]


async def _conversation() -> tuple[Sink, bytes, bool]:
    """The sink's transport still writes and half-closes; the peer's EOF reaches the
    protocol, and once the connection is closed the peer sees it closed."""
    async with _paired() as (sink, client):
        client.sendall(b"ping")
        await wait_until(lambda: sink.got, 5.0, "the ping")
        assert sink.transport is not None
        sink.transport.write(b"pong")
        client.settimeout(5.0)
        answer = client.recv(100)
        client.shutdown(socket.SHUT_WR)
        await wait_until(lambda: sink.eof, 5.0, "the EOF")
        await asyncio.wait_for(sink.lost, 5.0)
        closed = client.recv(100) == b""  # (our copy of the descriptor let go: FIN)
        return sink, answer, closed


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_the_connection_writes_sees_eof_and_closes_as_before(loop: str) -> None:
    sink, answer, closed = LOOPS[loop](_conversation())
    assert answer == b"pong" and closed and sink.eof


async def _paused() -> tuple[list[int], bool]:
    """While paused nothing is read; resumed, what waited is read."""
    async with _paired() as (sink, client):
        assert sink.reader is not None
        sink.reader.pause_reading()
        client.sendall(b"wait")
        await asyncio.sleep(0.1)
        during = len(sink.got)
        sink.reader.resume_reading()
        await wait_until(lambda: sink.got, 5.0, "the bytes")
        return [during, len(sink.got)], sink.reader.paused_since_lo


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_paused_reading_reads_nothing_until_resumed(loop: str) -> None:
    (during, after), _ = LOOPS[loop](_paused())
    assert during == 0 and after == 1


async def _reset() -> Exception | None:
    async with _paired() as (sink, client):
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        client.close()  # RST
        return await asyncio.wait_for(sink.lost, 5.0)


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_reset_peer_ends_the_connection(loop: str) -> None:
    LOOPS[loop](_reset())  # connection_lost came


async def _tls(tmp: Path) -> tuple[StampedReader | None, bytes]:
    server_ctx, client_ctx = tls_contexts(tmp)
    loop = asyncio.get_running_loop()
    sinks: list[Sink] = []

    def made() -> Sink:
        sinks.append(Sink())
        return sinks[-1]

    server = await loop.create_server(made, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx)
        writer.write(b"secret")
        await writer.drain()
        await wait_until(lambda: sinks and sinks[0].got, 5.0, "the bytes over TLS")
        writer.close()
        return sinks[0].reader, sinks[0].got[0][0]
    finally:
        server.close()


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_tls_connection_is_read_by_its_transport_as_before(loop: str, tmp_path: Path) -> None:
    reader, data = LOOPS[loop](_tls(tmp_path))
    assert reader is None  # no kernel stamps through TLS: the caller falls back
    assert data == b"secret"


def test_under_an_older_uvloop_the_transport_reads_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """uvloop before UVLOOP_FLOOR does not keep the transport paused (its own reading
    went on beside the reader's): there the connection is not attached and its bytes
    come through the transport, unstamped, as they would without voxproxy's reader."""
    monkeypatch.setattr(uvloop, "__version__", "0.22.1")

    async def run() -> tuple[Sink, bool]:
        async with _paired() as (sink, client):
            client.sendall(b"ping")
            await wait_until(lambda: sink.got, 5.0, "the ping")
            client.shutdown(socket.SHUT_WR)
            await wait_until(lambda: sink.eof, 5.0, "the EOF")
            return sink, sink.reader is None

    sink, unattached = uvloop.run(run())
    assert unattached
    assert [(data, kernel) for data, _, kernel, _ in sink.got] == [(b"ping", False)]
    # On asyncio's own loop the version of uvloop does not matter.
    sink, unattached = asyncio.run(run())
    assert not unattached and sink.got[0][2]
