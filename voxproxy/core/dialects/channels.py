"""A WebRTC call's data channel messages as the measurement core reads them.

A WebRTC call's audio comes decoded by its transport; what else its session decodes
are the data channel messages: those on OpenAI's ``oai-events`` channel (or on every
channel, with ``openai-realtime``) as OpenAI Realtime events, the others not at all.
The WebRTC proxy (:mod:`voxproxy.proxy.webrtc`) and the replay of its captures
(:mod:`voxproxy.captures.replay`) decode them with this one decoder.
"""

from __future__ import annotations

from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.registry import make_decoder
from voxproxy.core.events import Direction, Event

OAI_EVENTS = "oai-events"
CHANNEL_DIALECTS = ("auto", "openai-realtime", "none")


class ChannelDecoder:
    """The session's decoder for data channel messages (set :attr:`label` before each):
    ``dialect`` is one of :data:`CHANNEL_DIALECTS`."""

    def __init__(self, dialect: str, options: DialectOptions) -> None:
        self._all = dialect == "openai-realtime"
        self._inner = make_decoder("openai-realtime", options) if dialect != "none" else None
        self.label = ""
        self.name = "webrtc"  # "openai-realtime" once a message was decoded as such

    def decode(self, direction: Direction, payload: bytes | str, t_ns: int) -> list[Event]:
        if self._inner is None or not (self._all or self.label == OAI_EVENTS):
            return []
        self.name = "openai-realtime"
        return self._inner.decode(direction, payload, t_ns)
