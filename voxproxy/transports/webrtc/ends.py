"""How a WebRTC call ended: the cause and what each side said."""

from __future__ import annotations

from dataclasses import dataclass

from voxproxy.transports.ends import EndCause


@dataclass(slots=True)
class EndInfo:
    cause: EndCause
    upstream_status: int | None = None  # the agent's HTTP status to our offer
    initiator: str = "none"  # "caller", "agent", "proxy" or "none"
    http_status: int | None = None  # what the caller's offer was answered with
    reason: str | None = None
