"""A relay call's observer for tests (``CallObserver``, transports/websocket/observer.py)
that adds no headers to the agent's handshake, ignores the agent's answer and keeps how
the call ended; each test's subclass says what it keeps of a message (``on_message``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from websockets.http11 import Request

from voxproxy.transports.websocket import EndInfo


@dataclass(kw_only=True)
class EndsKept:
    """The observer's parts every relay test writes alike. ``kw_only``: a subclass's own
    fields come first when it is made."""

    ends: list[EndInfo] = field(default_factory=list)
    last_media_s: float = 0.0

    def upstream_headers(self, request: Request) -> list[tuple[str, str]]:
        del request
        return []

    def on_upstream_open(self, t_ns: int, status: int) -> None:
        del t_ns, status

    def on_end(self, t_ns: int, info: EndInfo) -> None:
        del t_ns
        self.ends.append(info)
