"""What the relay tells the measurement side: each message once forwarded, and how
the call ended."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from websockets.http11 import Request

from voxproxy.core.events import Direction
from voxproxy.transports.ends import EndCause
from voxproxy.transports.websocket.arrivals import ArrivalLog, ForwardDelays


@dataclass(slots=True)
class EndInfo:
    cause: EndCause
    caller_code: int | None = None
    agent_code: int | None = None
    upstream_status: int | None = None
    initiator: str = "none"  # "caller", "agent", "proxy" or "none"
    detail: str = ""  # a call refused at the handshake: why, and what the caller was answered
    undelivered: int = 0  # messages not forwarded: the other leg was not open (or gone)
    # Per direction (caller to agent, agent to caller): messages forwarded but not measured,
    # over RelayConfig.max_messages_per_s, and their bytes.
    over_rate: tuple[int, int] = (0, 0)
    over_rate_bytes: tuple[int, int] = (0, 0)
    # What the call's arrival stamps are worth, and its forwarding delays per direction.
    arrivals: ArrivalLog | None = None
    forwarding: tuple[ForwardDelays, ForwardDelays] | None = None


class CallObserver(Protocol):
    """What the relay tells the measurement side. Implementations must be cheap."""

    # When (time.monotonic()) the last message said to carry no media (on_message's
    # False) turned out to carry some: an observer that measures later than it is told
    # of a message says here what it finds. The idle timer reads it.
    last_media_s: float

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
