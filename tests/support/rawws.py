"""A websocket server's side of the opening handshake, written by hand on asyncio
streams: for agents that misbehave below what the websockets library lets a server do
(one that floods frames and never reads), in the hostile-peer tests and benchmarks."""

from __future__ import annotations

import asyncio

from websockets.utils import accept_key


async def accept_handshake(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, after: bytes = b""
) -> None:
    """Read the client's upgrade request and answer ``101 Switching Protocols``, with
    ``after`` (the first frames, say) in the same write."""
    head = await reader.readuntil(b"\r\n\r\n")
    key = next(
        line.split(b":", 1)[1].strip().decode()
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"sec-websocket-key:")
    )
    writer.write(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + accept_key(key).encode() + b"\r\n\r\n" + after
    )
