"""The accepting side: a listening socket that runs one :class:`Relay` per caller,
and the graceful stop (drain, then 1001, then abort)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time

from voxproxy.transports.stamped import keep_stamping
from voxproxy.transports.websocket.config import Admission, RelayConfig
from voxproxy.transports.websocket.observer import ObserverFactory
from voxproxy.transports.websocket.relay import Relay


class RelayServer:
    """Accepts callers and runs one :class:`Relay` per call."""

    def __init__(self, config: RelayConfig, observer_factory: ObserverFactory) -> None:
        self.config = config
        self.observer_factory = observer_factory
        self.relays: set[Relay] = set()
        self.admission = Admission(config.max_calls)
        self.server: asyncio.Server | None = None

    def _protocol(self) -> asyncio.Protocol:
        relay = Relay(self.config, self.observer_factory, self.relays, self.admission)
        return relay.caller

    async def start(
        self,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None = None,
        *,
        reuse_port: bool = False,
    ) -> int:
        """Listen; ``reuse_port`` shares the port with other processes (SO_REUSEPORT)."""
        loop = asyncio.get_running_loop()
        if self.config.kernel_stamps:
            keep_stamping()  # (a caller's first bytes stamped too)
        self.server = await loop.create_server(
            self._protocol, host, port, ssl=ssl_context, reuse_port=reuse_port or None
        )
        sock = self.server.sockets[0]
        return int(sock.getsockname()[1])

    async def stop(self, drain_s: float = 0.0) -> None:
        """Stop accepting; let calls finish for ``drain_s``; then close the rest."""
        if self.server is not None:
            self.server.close()
        deadline = time.monotonic() + drain_s
        while self.relays and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for relay in list(self.relays):
            relay.shutdown()
        deadline = time.monotonic() + self.config.close_timeout_s + 1.0
        while self.relays and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        for relay in list(self.relays):
            relay._abort_caller()
            relay._abort_agent()
        if self.server is not None:
            with contextlib.suppress(Exception):
                await self.server.wait_closed()
