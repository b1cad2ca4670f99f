"""How a WebRTC call ended: the cause and what each side said."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class EndCause(enum.StrEnum):
    """How a relayed WebRTC call ended, as the transport saw it."""

    CALLER_CLOSED = "caller_closed"  # WHIP DELETE, or the caller closed its peer connection
    AGENT_CLOSED = "agent_closed"
    CALLER_VANISHED = "caller_vanished"  # ICE/DTLS to the caller failed after connecting
    AGENT_VANISHED = "agent_vanished"
    BAD_OFFER = "bad_offer"  # the caller's offer was malformed or had no audio
    ICE_FAILED = "ice_failed"  # the caller's media path never connected
    UPSTREAM_REFUSED = "upstream_refused"
    UPSTREAM_UNREACHABLE = "upstream_unreachable"  # no signaling, or no media path, to the agent
    UPSTREAM_TIMEOUT = "upstream_timeout"
    IDLE_TIMEOUT = "idle_timeout"
    PROXY_SHUTDOWN = "proxy_shutdown"
    PROXY_ERROR = "proxy_error"


@dataclass(slots=True)
class EndInfo:
    cause: EndCause
    upstream_status: int | None = None  # the agent's HTTP status to our offer
    initiator: str = "none"  # "caller", "agent", "proxy" or "none"
    http_status: int | None = None  # what the caller's offer was answered with
    reason: str | None = None
