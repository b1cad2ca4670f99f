"""The mock agent: a websocket voice agent that answers with fixture clips.

:class:`MockAgent` is the server: it accepts connections and runs one
:class:`~voxproxy.mockagent.call.Call` for each, which holds all the state of that
connection; what happened is kept in :attr:`MockAgent.calls`.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response
from websockets.typing import Subprotocol

from voxproxy.core.errors import UsageError
from voxproxy.mockagent.base import AgentBase, serve_until_cancelled
from voxproxy.mockagent.call import Call
from voxproxy.mockagent.config import MockAgentConfig
from voxproxy.mockagent.realtime import RealtimeCall
from voxproxy.mockagent.task import SimBackend
from voxproxy.simcall.log import CallLog


class MockAgent(AgentBase):
    """A websocket voice agent for tests, benchmarks and the demo.

    Use as ``async with MockAgent(config) as agent:`` (listens on a free
    loopback port; see :attr:`url`) or call :meth:`start` and :meth:`stop`.
    """

    def __init__(self, config: MockAgentConfig | None = None) -> None:
        super().__init__(config)
        self.calls: list[CallLog] = []
        self.host: str | None = None
        self.port: int | None = None
        self._server: Server | None = None
        self._active: set[Call] = set()
        self._handshakes: weakref.WeakKeyDictionary[ServerConnection, CallLog] = (
            weakref.WeakKeyDictionary()
        )
        self._next_index = 0
        self.backend = SimBackend()  # the testbench's tool backend (voxproxy.mockagent.task)

    @property
    def url(self) -> str:
        if self.port is None or self.host is None:
            raise UsageError("the mock agent is not listening; call start() first")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ws://{host}:{self.port}"

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Listen on ``host:port`` (0: a free port). Returns the bound port."""
        if self._server is not None:
            raise UsageError("the mock agent is already listening")
        server = await serve(
            self._handle,
            host,
            port,
            select_subprotocol=self._select_subprotocol,
            process_request=self._process_request,
            compression="deflate" if self.config.compression else None,
            ping_interval=None,
            open_timeout=5,
            close_timeout=2,
        )
        self._server = server
        self.host = host
        self.port = int(server.sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        """Close every connection (1001, or abort when stalled) and stop listening."""
        server = self._server
        if server is None:
            return
        self._server = None
        for call in list(self._active):
            if call.stalled:
                call.ws.transport.abort()
        server.close()
        try:
            async with asyncio.timeout(5):
                await server.wait_closed()
        except TimeoutError:
            for call in list(self._active):
                call.ws.transport.abort()
            await server.wait_closed()
        await self._close_http()

    # -- handshake ------------------------------------------------------------------------

    def _new_log(self, request: Request) -> CallLog:
        headers: dict[str, str] = {}
        for name, value in request.headers.raw_items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        log = CallLog(index=self._next_index, path=request.path, headers=headers, subprotocol=None)
        self._next_index += 1
        return log

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        log = self._new_log(request)
        status = self.config.refuse_status
        if status is not None:
            log.status = status
            log.faults.append("refuse")
            self.calls.append(log)
            return connection.respond(status, "refused by the mock agent (fault)\n")
        self._handshakes[connection] = log
        return None

    def _select_subprotocol(
        self, connection: ServerConnection, offered: Sequence[Subprotocol]
    ) -> Subprotocol | None:
        allowed = self.config.subprotocols
        for proto in offered:
            if allowed is None or proto in allowed:
                return proto
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        log = self._handshakes.pop(ws, None)
        if log is None:  # pragma: no cover - process_request always runs first
            log = self._new_log(ws.request) if ws.request is not None else CallLog(-1, "", {}, None)
        log.subprotocol = ws.subprotocol
        self.calls.append(log)
        call: Call
        if self.config.dialect == "openai-realtime":
            call = RealtimeCall(self, ws, log)
        else:
            call = Call(self, ws, log)
        self._active.add(call)
        try:
            await call.run()
        finally:
            self._active.discard(call)


async def run_cli(config: MockAgentConfig, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve until cancelled, after printing where."""
    banner = "mock-agent listening on ws://{host}:{port} "
    banner += f"(dialect={config.dialect}, mode={config.send_mode})"
    await serve_until_cancelled(MockAgent(config), host, port, banner)
