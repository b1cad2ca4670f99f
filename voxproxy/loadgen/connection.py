"""A scripted caller's websocket client connection: messages handed over as they arrive.

websockets' asyncio connection queues every message it receives (``Assembler``) until a
task reads it with ``recv`` or ``async for``: a future, a queue and a task wake-up per
message. A caller of the load generator receives 50 messages a second and handles each
in a few microseconds, so with hundreds of callers on a loop that hand-off costs about as
much as the handling. :class:`DirectConnection` (websockets' documented
``create_connection`` hook) hands each whole message to ``on_message`` from the protocol's
own callback instead, in arrival order.

Order is kept with messages that do go through the queue: a message that arrives in
fragments, or while ``on_message`` is not set yet (before the caller's receiver started),
is queued, and so is every message after it until the reader of the queue (``async for
message in ws``, which the caller keeps running for that) has taken them all; then they
are handed over again. A handler that raises is kept as :attr:`failure` and dropped:
the rest of the messages go through the queue.

Its socket is read kernel-stamped where it can (``voxproxy.transports.stamped``, as the
proxy's legs are): :meth:`DirectConnection.arrival_ns` is when the message being handed
over reached the host, not when this process's loop got round to it, so that a caller's
truth holds on a busy machine too.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import time
from collections.abc import AsyncIterator, Callable
from typing import cast

from websockets.asyncio.client import ClientConnection
from websockets.frames import Frame, Opcode
from websockets.protocol import Event
from websockets.typing import Data
from websockets.uri import WebSocketURI, parse_uri

from voxproxy.transports.stamped import StampedReader, attach

TEXT = Opcode.TEXT  # (websockets.frames.TEXT and BINARY came in websockets 16)
BINARY = Opcode.BINARY


def _proxy_lookup() -> Callable[[WebSocketURI], str | None]:
    """websockets' own lookup of the proxy the environment sets for a URI: in
    ``websockets.proxy`` from version 16, in ``websockets.uri`` in 15."""
    try:
        module = importlib.import_module("websockets.proxy")
    except ImportError:  # websockets 15
        module = importlib.import_module("websockets.uri")
    return cast(Callable[[WebSocketURI], "str | None"], module.get_proxy)


_GET_PROXY = _proxy_lookup()


@functools.lru_cache(maxsize=64)
def proxy_for(url: str) -> str | None:
    """The proxy websockets' ``connect`` would take from the environment for ``url``
    (None: none), looked up once per URL for the process: websockets looks it up again
    for every connection (urllib walks the whole environment), which a ramp of hundreds
    of callers takes from the loop."""
    return _GET_PROXY(parse_uri(url))


class DirectConnection(ClientConnection):
    on_message: Callable[[str | bytes], None] | None = None
    failure: Exception | None = None
    handed = 0  # messages handed to on_message
    _queued = 0  # messages put in the queue that its reader has not taken yet
    reader: StampedReader | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.reader = reader = attach(transport, self)
        if reader is not None:  # (websockets pauses its reading when its queue is full)
            self.recv_messages.pause = reader.pause_reading
            self.recv_messages.resume = reader.resume_reading

    def connection_lost(self, exc: Exception | None) -> None:
        reader, self.reader = self.reader, None
        if reader is not None:
            reader.close()
        super().connection_lost(exc)

    def arrival_ns(self) -> int:
        """When the message being handed over reached the host (monotonic ns): the
        kernel's stamp of its read, else now."""
        reader = self.reader
        if reader is not None and reader.handing:
            return reader.rx_ns
        return time.monotonic_ns()

    def process_event(self, event: Event) -> None:
        if isinstance(event, Frame) and event.opcode in (TEXT, BINARY):  # a message starts
            handler = self.on_message
            if handler is not None and event.fin and not self._queued:
                data = bytes(event.data)  # bytes already, as websockets parses them
                try:
                    message: str | bytes = data.decode() if event.opcode is TEXT else data
                except UnicodeDecodeError:  # websockets' own path fails the connection
                    pass
                else:
                    self.handed += 1
                    try:
                        handler(message)
                    except Exception as exc:
                        self.failure = exc
                        self.on_message = None
                    return
            self._queued += 1
        super().process_event(event)

    async def __aiter__(self) -> AsyncIterator[Data]:
        async for message in super().__aiter__():
            self._queued -= 1  # (recv alone does not count: the queue then keeps them all)
            yield message
