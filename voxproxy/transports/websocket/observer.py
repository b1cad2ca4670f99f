"""What the relay tells the measurement side: each message once forwarded, and how
the call ended."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from websockets.http11 import Request

from voxproxy.events import Direction


class EndCause(enum.StrEnum):
    """How the call ended, as the transport saw it."""

    CALLER_CLOSED = "caller_closed"
    AGENT_CLOSED = "agent_closed"
    CALLER_VANISHED = "caller_vanished"
    AGENT_VANISHED = "agent_vanished"
    UPSTREAM_REFUSED = "upstream_refused"
    UPSTREAM_UNREACHABLE = "upstream_unreachable"
    UPSTREAM_TIMEOUT = "upstream_timeout"
    MESSAGE_TOO_BIG = "message_too_big"
    IDLE_TIMEOUT = "idle_timeout"
    PROXY_SHUTDOWN = "proxy_shutdown"
    PROXY_ERROR = "proxy_error"
    BAD_REQUEST = "bad_request"  # the caller's handshake was not a valid websocket request
    OVER_CAPACITY = "over_capacity"  # refused with 503: max_calls calls were in progress
    HEALTH_CHECK = "health_check"  # a plain GET of HEALTH_PATH, answered 200: not a call


@dataclass(slots=True)
class EndInfo:
    cause: EndCause
    caller_code: int | None = None
    agent_code: int | None = None
    upstream_status: int | None = None
    initiator: str = "none"  # "caller", "agent", "proxy" or "none"
    detail: str = ""  # a call refused at the handshake: why, and what the caller was answered


class CallObserver(Protocol):
    """What the relay tells the measurement side. Implementations must be cheap."""

    def upstream_headers(self, request: Request) -> Iterable[tuple[str, str]]:
        """Extra headers for our handshake to the agent (e.g. trace context)."""
        ...

    def on_upstream_open(self, t_ns: int, status: int) -> None: ...

    def on_message(self, direction: Direction, payload: bytes | str, t_ns: int) -> bool | None:
        """Measure one message. True: it carried media; False: it did not (the call is
        idle if nothing else does); None: cannot tell (the relay counts it as media)."""
        ...

    def on_end(self, t_ns: int, info: EndInfo) -> None: ...


ObserverFactory = Callable[[int], CallObserver]
"""Makes a call's observer, given the call's start (``time.monotonic_ns()``)."""
