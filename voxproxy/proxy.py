"""The websocket proxy: the relay (forwarding) joined to one CallSession per call (measuring)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from websockets.http11 import Request

from voxproxy.clock import EpochAnchor
from voxproxy.dialects.base import DialectOptions, make_decoder
from voxproxy.events import AnomalyKind, Direction
from voxproxy.ids import new_secret
from voxproxy.receipts.model import CloseInfo, Receipt, Terminal
from voxproxy.session import CallSession, SessionConfig
from voxproxy.transports.websocket import EndCause, EndInfo, RelayConfig, RelayServer

log = logging.getLogger("voxproxy.proxy")

CALL_ID_HEADER = "X-Voxproxy-Call"

_TERMINALS: dict[EndCause, Terminal] = {
    EndCause.CALLER_CLOSED: "caller_closed",
    EndCause.AGENT_CLOSED: "agent_closed",
    EndCause.CALLER_VANISHED: "caller_vanished",
    EndCause.AGENT_VANISHED: "agent_vanished",
    EndCause.UPSTREAM_REFUSED: "upstream_refused",
    EndCause.UPSTREAM_UNREACHABLE: "upstream_unreachable",
    EndCause.UPSTREAM_TIMEOUT: "upstream_timeout",
    EndCause.MESSAGE_TOO_BIG: "message_too_big",
    EndCause.IDLE_TIMEOUT: "idle_timeout",
    EndCause.PROXY_SHUTDOWN: "proxy_shutdown",
    EndCause.PROXY_ERROR: "proxy_error",
    EndCause.BAD_REQUEST: "proxy_error",
}


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    relay: RelayConfig
    dialect: str = "auto"
    dialect_options: DialectOptions = field(default_factory=DialectOptions)
    session: SessionConfig = field(default_factory=SessionConfig)
    secret: bytes | None = None


ReceiptSink = Callable[[Receipt], None]


class CallContext:
    """Observer of one relayed call: feeds the session, emits the receipt at the end."""

    __slots__ = ("_proxy", "link_id", "session")

    def __init__(self, proxy: Proxy, t_ns: int) -> None:
        self._proxy = proxy
        self.link_id = uuid.uuid4().hex
        cfg = proxy.config
        decoder = make_decoder(cfg.dialect, cfg.dialect_options)
        self.session = CallSession(
            decoder,
            t_ns,
            secret=proxy.secret,
            link_id=self.link_id,
            config=cfg.session,
            anchor=proxy.anchor,
        )
        proxy.active += 1

    def upstream_headers(self, request: Request) -> Iterable[tuple[str, str]]:
        del request
        return [(CALL_ID_HEADER, self.link_id)]

    def on_upstream_open(self, t_ns: int, status: int) -> None:
        del status
        self.session.on_upstream_connected(t_ns)

    def on_message(self, direction: Direction, payload: bytes | str, t_ns: int) -> None:
        self.session.on_message(direction, payload, t_ns)

    def on_end(self, t_ns: int, info: EndInfo) -> None:
        proxy = self._proxy
        proxy.active -= 1
        terminal = _TERMINALS[info.cause]
        if info.cause is EndCause.CALLER_CLOSED and self.session.stream_stopped:
            terminal = "completed"
        if info.cause is EndCause.MESSAGE_TOO_BIG:
            self.session.note_anomaly(AnomalyKind.OVERSIZED)
        close = CloseInfo(
            initiator=info.initiator,  # type: ignore[arg-type]
            caller_code=info.caller_code,
            agent_code=info.agent_code,
            upstream_status=info.upstream_status
            if info.upstream_status is not None
            else (101 if self.session.upstream_connected_ns is not None else None),
        )
        try:
            receipt = self.session.close(t_ns, terminal, close)
        except Exception:
            log.exception("could not build a receipt; writing a minimal one")
            proxy.receipt_errors += 1
            return
        proxy.calls += 1
        for sink in proxy.sinks:
            try:
                sink(receipt)
            except Exception:
                proxy.receipt_errors += 1
                log.exception("a receipt sink failed")


class Proxy:
    """Serves callers, relays each to the agent, writes one receipt per call."""

    def __init__(self, config: ProxyConfig, sinks: list[ReceiptSink] | None = None) -> None:
        self.config = config
        if config.secret is None:
            log.warning(
                "no secret configured (--secret / VOXPROXY_SECRET): call ids are keyed with a "
                "random per-process secret and will not match across restarts"
            )
        self.secret = config.secret or new_secret()
        self.anchor = EpochAnchor.now()
        self.sinks: list[ReceiptSink] = list(sinks or [])
        self.active = 0
        self.calls = 0
        self.receipt_errors = 0
        self.server = RelayServer(config.relay, self._observer)

    def _observer(self, t_ns: int) -> CallContext:
        return CallContext(self, t_ns)

    async def start(self, host: str, port: int) -> int:
        return await self.server.start(host, port)

    async def stop(self, drain_s: float = 0.0) -> None:
        await self.server.stop(drain_s)
