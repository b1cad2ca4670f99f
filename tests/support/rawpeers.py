"""Raw-socket peers for tests of how a call ends and how calls share the loop: a caller
and an agent that write whatever bytes a test hands them (frames laid out by hand, a
half-close, a reset) and read frames one by one, so that a test sees what the proxy
put on the wire, not what a websocket library made of it.

An agent is served by :func:`raw_agents`: each connection the proxy makes is handed
to the test as a :class:`RawPeer` once the test's ``handshake`` has run on it (by
default the ordinary ``101``), and is held open until the block ends, whatever the
proxy does: a peer that keeps its TCP open is the case these tests are about.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from support.rawws import accept_handshake

KEY = b"dGhlIHNhbXBsZSBub25jZQ=="
TEXT, BINARY, CONT, CLOSE, PING, PONG = 1, 2, 0, 8, 9, 10
CALLER_MASK = b"\x11\x22\x33\x44"


def frame(
    opcode: int,
    payload: bytes,
    *,
    fin: bool = True,
    mask: bytes | None = None,
    rsv: int = 0,
    size: int | None = None,
) -> bytes:
    """One websocket frame laid out by hand (RFC 6455 5.2). ``size`` overrides the
    length the header declares (for a header whose payload is never sent)."""
    n = len(payload) if size is None else size
    head = bytes([(0x80 if fin else 0) | rsv << 4 | opcode])
    bit = 0x80 if mask is not None else 0
    if n < 126:
        head += bytes([bit | n])
    elif n < 1 << 16:
        head += bytes([bit | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([bit | 127]) + n.to_bytes(8, "big")
    if mask is None:
        return head + payload
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def close_frame(code: int, reason: bytes = b"", mask: bytes | None = None) -> bytes:
    return frame(CLOSE, code.to_bytes(2, "big") + reason, mask=mask)


def upgrade_request(path: str = "/call") -> bytes:
    return (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n".encode()
        + b"Connection: Upgrade\r\nSec-WebSocket-Key: "
        + KEY
        + b"\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )


@dataclass
class RawPeer:
    """One end of a websocket connection on raw streams. ``masks``: it is a client
    (its frames must be masked, RFC 6455 5.1)."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    masks: bool

    def send(self, opcode: int, payload: bytes) -> None:
        self.writer.write(frame(opcode, payload, mask=CALLER_MASK if self.masks else None))

    def send_close(self, code: int) -> None:
        self.writer.write(close_frame(code, mask=CALLER_MASK if self.masks else None))

    async def read_frame(self) -> tuple[int, bytes]:
        """The next frame's first byte and (unmasked) payload."""
        b0, b1 = await self.reader.readexactly(2)
        n = b1 & 0x7F
        if n == 126:
            n = int.from_bytes(await self.reader.readexactly(2), "big")
        elif n == 127:
            n = int.from_bytes(await self.reader.readexactly(8), "big")
        key = await self.reader.readexactly(4) if b1 & 0x80 else b""
        body = await self.reader.readexactly(n)
        if key:
            body = bytes(b ^ key[i % 4] for i, b in enumerate(body))
        return b0, body

    async def read_close(self) -> int | None:
        """Read frames until a close frame: its code (None without one); what comes
        before it is skipped."""
        while True:
            b0, body = await self.read_frame()
            if b0 & 0x0F == CLOSE:
                return int.from_bytes(body[:2], "big") if len(body) >= 2 else None

    async def flood(self, payload: bytes) -> None:
        """Write ``payload`` as text frames for as long as the peer reads (until
        cancelled)."""
        one = frame(TEXT, payload, mask=CALLER_MASK if self.masks else None)
        while True:
            self.writer.write(one)
            await self.writer.drain()

    def reset(self) -> None:
        """Drop the connection with a TCP reset (SO_LINGER 0), not a FIN."""
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()

    async def hang_up(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()


async def raw_caller(port: int, path: str = "/call", after: bytes = b"") -> RawPeer:
    """A caller's connection through its ``101`` (``after``: bytes written behind its
    request, in the same write)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(upgrade_request(path) + after)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 101 "), head
    return RawPeer(reader, writer, masks=True)


async def refused_status(port: int, after: bytes = b"") -> int:
    """The HTTP status a caller's handshake is answered with (``after`` as above)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(upgrade_request() + after)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    writer.close()
    return int(head.split(b" ", 2)[1])


Handshake = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class RawAgents:
    """The agent's side: every connection the proxy made, through its handshake."""

    port: int = 0
    connections: asyncio.Queue[RawPeer] = field(default_factory=asyncio.Queue)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"


@asynccontextmanager
async def raw_agents(handshake: Handshake = accept_handshake) -> AsyncIterator[RawAgents]:
    """A raw agent on loopback; each connection is held open until the block ends."""
    agents = RawAgents()
    done = asyncio.Event()
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await handshake(reader, writer)
            agents.connections.put_nowait(RawPeer(reader, writer, masks=False))
        await done.wait()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    agents.port = server.sockets[0].getsockname()[1]
    try:
        yield agents
    finally:
        done.set()
        for writer in writers:
            writer.close()
        server.close()
        await server.wait_closed()
