"""The shape shared by the JSON media-stream wires of telephony providers.

Telnyx, Plivo and Exotel (like Twilio, which has its own module) carry caller
audio in ``{"event": "media", "media": {"payload": <base64>}}`` messages, announce
the stream with a ``start`` message, and accept agent audio, a flush and a
played-marker in return (docs/protocols.md section 4, the table of the
telephony wires). Each dialect module says, per direction, which of its event
names plays which part, how its ``start`` sets the codec and how a marker is
named; this class does the rest.
"""

from __future__ import annotations

from typing import Any, ClassVar

from voxproxy.core import events as ev
from voxproxy.core.dialects._common import PcmDecoder, b64_audio, text_object

# Parts an event can play.
MEDIA = "media"
START = "start"
MARK = "mark"  # caller side: an echo; agent side: a marker sent
DTMF = "dtmf"
STOP = "stop"
FLUSH = "flush"
QUIET = "quiet"  # understood, nothing to measure

# The Twilio vocabulary, which Telnyx and Exotel speak too (each adds or drops a little).
TWILIO_CALLER_EVENTS = {
    "connected": QUIET,
    "start": START,
    "media": MEDIA,
    "mark": MARK,
    "dtmf": DTMF,
    "stop": STOP,
}
TWILIO_AGENT_EVENTS = {"media": MEDIA, "mark": MARK, "clear": FLUSH}


class MediaStreamDecoder:
    """Decoder for one call on a Twilio-shaped JSON media-stream wire."""

    name: str
    caller_events: ClassVar[dict[str, str]]
    agent_events: ClassVar[dict[str, str]]
    default_encoding: ClassVar[str] = "ulaw"
    default_rate_hz: ClassVar[int] = 8000

    def __init__(self) -> None:
        self.encoding = self.default_encoding
        self.sample_rate_hz = self.default_rate_hz
        self.undecodable = False  # the stream's codec is one voxproxy cannot decode
        self._pcm = [PcmDecoder(self.encoding), PcmDecoder(self.encoding)]

    def codec(self, direction: ev.Direction) -> str | None:
        """The stream's encoding (both directions), None when the core cannot decode it."""
        del direction
        return None if self.undecodable else self.encoding

    def set_codec(self, encoding: str | None, rate_hz: int) -> None:
        """``encoding`` None means a codec the core cannot decode (Opus, G.722, ...)."""
        self.sample_rate_hz = rate_hz
        self.undecodable = encoding is None
        if encoding is not None:
            self.encoding = encoding
            for dec in self._pcm:
                dec.set_encoding(encoding)

    def decode(self, direction: ev.Direction, payload: bytes | str, t_ns: int) -> list[ev.Event]:
        msg = text_object(direction, payload, t_ns)
        if isinstance(msg, ev.Anomaly):
            return [msg]
        event = msg.get("event")
        table = self.caller_events if direction is ev.CALLER_TO_AGENT else self.agent_events
        part = table.get(event) if isinstance(event, str) else None
        if part is None:
            if not isinstance(event, str):
                return [ev.Anomaly(ev.AnomalyKind.MALFORMED, direction, t_ns)]
            return [ev.Anomaly(ev.AnomalyKind.UNKNOWN_EVENT, direction, t_ns)]
        if part == MEDIA:
            return self._media(direction, msg, t_ns)
        if part == MARK:
            name = self.mark_name(msg)
            if name is None:
                return [ev.Anomaly(ev.AnomalyKind.MALFORMED, direction, t_ns)]
            if direction is ev.CALLER_TO_AGENT:
                return [ev.MarkEcho(name, t_ns)]
            return [ev.MarkSent(name, t_ns)]
        if part == START:
            return self.start(msg, t_ns)
        if part == FLUSH:
            return [ev.Flush(t_ns, event)]  # type: ignore[arg-type]  # event is a str here
        if part == DTMF:
            return [ev.Dtmf(t_ns)]
        if part == STOP:
            return [ev.StreamStop(t_ns)]
        return []

    def _media(self, direction: ev.Direction, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        media = msg.get("media")
        if not isinstance(media, dict):
            return [ev.Anomaly(ev.AnomalyKind.MALFORMED, direction, t_ns)]
        if direction is ev.CALLER_TO_AGENT and media.get("track", "inbound") not in (
            "inbound",
            "inbound_track",
        ):
            return []  # the agent's own audio echoed back is not caller audio
        data = b64_audio(media.get("payload"), direction, t_ns)
        if isinstance(data, ev.Anomaly):
            return [data]
        if direction is ev.AGENT_TO_CALLER:
            fmt = self.agent_format(media, t_ns)
            if isinstance(fmt, ev.Anomaly):
                return [fmt]
            if fmt is not None:
                encoding, rate = fmt
                dec = self._pcm[ev.AGENT_TO_CALLER]
                dec.set_encoding(encoding)
                return [ev.Audio(direction, dec.decode(data), rate, t_ns)]
        if self.undecodable:
            return []  # counted once, at the start message
        return [ev.Audio(direction, self._pcm[direction].decode(data), self.sample_rate_hz, t_ns)]

    # -- per-dialect hooks ----------------------------------------------------------------

    def start(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        """A ``start`` message: malformed without a ``start`` object, else :meth:`on_start`'s."""
        start = msg.get("start")
        if not isinstance(start, dict):
            return [ev.Anomaly(ev.AnomalyKind.MALFORMED, ev.CALLER_TO_AGENT, t_ns)]
        return self.on_start(start, msg, t_ns)

    def on_start(self, start: dict[str, Any], msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        """The events of a start message whose ``start`` object is ``start``."""
        raise NotImplementedError

    def mark_name(self, msg: dict[str, Any]) -> str | None:
        mark = msg.get("mark")
        name = mark.get("name") if isinstance(mark, dict) else None
        return name if isinstance(name, str) else None

    def agent_format(self, media: dict[str, Any], t_ns: int) -> tuple[str, int] | ev.Anomaly | None:
        """The format an agent media message declares for itself (None: the stream's)."""
        del media, t_ns
        return None

    @staticmethod
    def stream_start(
        call_id: object, rate_hz: int, encoding: str | None, t_ns: int
    ) -> ev.StreamStart:
        return ev.StreamStart(
            call_id if isinstance(call_id, str) and call_id else None,
            rate_hz,
            encoding,
            t_ns,
        )
