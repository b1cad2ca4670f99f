"""Dialect ``telnyx``: Telnyx Media Streaming over a websocket (docs/protocols.md section 4).

Telnyx -> agent: ``connected``, then ``start`` (top-level ``stream_id``;
``start.call_control_id`` and ``start.media_format.{encoding, sample_rate}``),
``media`` (``media.{track, chunk, timestamp, payload}``: a base64 RTP payload
without headers), ``mark`` (the echo of a marker), ``dtmf``, ``error``, ``stop``.
Agent -> Telnyx: ``media`` (``{"event": "media", "media": {"payload"}}``, 20 ms to
30 s of audio per message in RTP mode), ``mark``, ``clear``.
Source: developers.telnyx.com, "Stream call media over WebSocket" (AsyncAPI);
pipecat ``serializers/telnyx.py``.

* Codecs decoded: PCMU, PCMA and L16 (network byte order, per RFC 2586 as pipecat
  notes). G722, OPUS and AMR-WB cannot be decoded here: the start message is
  counted as ``bad_audio`` once and the call's audio is not measured.
* A mark comes back "when the media immediately preceding [it] finishes playing",
  at once when nothing is queued, and a ``clear`` returns queued marks: as with
  Twilio, an echo after a flush means "dropped", not "played".
* "Media frame order is not guaranteed": frames are measured in arrival order.
"""

from __future__ import annotations

from typing import Any, ClassVar

from voxproxy.core.audio.g711 import pcm_to_alaw, pcm_to_ulaw
from voxproxy.core.dialects._common import b64encode, int_field
from voxproxy.core.dialects._stream import MarkWire
from voxproxy.core.dialects._telco import (
    QUIET,
    TWILIO_AGENT_EVENTS,
    TWILIO_CALLER_EVENTS,
)
from voxproxy.core.dialects._telco import MediaStreamDecoder as _Base
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.events import CALLER_TO_AGENT, Anomaly, AnomalyKind, Event, Pcm

NAME = "telnyx"
_CODECS = {"PCMU": "ulaw", "PCMA": "alaw", "L16": "pcm_s16be"}
_UNDECODABLE = frozenset({"G722", "OPUS", "AMR-WB"})


class TelnyxDecoder(_Base):
    name = NAME
    caller_events: ClassVar[dict[str, str]] = {**TWILIO_CALLER_EVENTS, "error": QUIET}
    agent_events: ClassVar[dict[str, str]] = TWILIO_AGENT_EVENTS

    def on_start(self, start: dict[str, Any], msg: dict[str, Any], t_ns: int) -> list[Event]:
        call_id = start.get("call_control_id") or msg.get("stream_id")
        fmt = start.get("media_format")
        out: list[Event] = []
        encoding = "ulaw"
        rate = 8000
        if isinstance(fmt, dict):
            name = fmt.get("encoding")
            rate = int_field(fmt.get("sample_rate")) or 8000
            if isinstance(name, str) and name.upper() in _CODECS:
                encoding = _CODECS[name.upper()]
            elif name is not None:
                out.append(Anomaly(AnomalyKind.BAD_AUDIO, CALLER_TO_AGENT, t_ns))
                self.set_codec(None, rate)
                return [*out, self.stream_start(call_id, rate, str(name), t_ns)]
            if not 8000 <= rate <= 48000:
                return [Anomaly(AnomalyKind.BAD_AUDIO, CALLER_TO_AGENT, t_ns)]
        self.set_codec(encoding, rate)
        return [self.stream_start(call_id, rate, encoding, t_ns)]


def new_decoder(options: DialectOptions) -> TelnyxDecoder:
    del options  # nothing to set: the start message says it all
    return TelnyxDecoder()


def encode(pcm: Pcm, encoding: str) -> bytes:
    """PCM as a Telnyx payload in ``encoding`` (PCMU, PCMA or L16)."""
    if encoding == "PCMU":
        return pcm_to_ulaw(pcm)
    if encoding == "PCMA":
        return pcm_to_alaw(pcm)
    if encoding == "L16":
        return pcm.astype(">i2").tobytes()
    raise ValueError(f"cannot encode {encoding!r}")


class TelnyxCallerWire(MarkWire):
    """Builds the messages Telnyx sends to an agent, for one stream."""

    seq_key = "sequence_number"
    seq_as_text = True
    id_key = "stream_id"

    def __init__(
        self,
        stream_id: str,
        call_control_id: str,
        encoding: str = "PCMU",
        sample_rate_hz: int = 8000,
    ) -> None:
        super().__init__(stream_id)
        self.call_control_id = call_control_id
        self.encoding = encoding
        self.sample_rate_hz = sample_rate_hz

    def connected(self) -> str:
        return self.message("connected", {"version": "1.0.0"}, "f")

    def start(self, custom: dict[str, str] | None = None) -> str:
        """The start message; ``custom``: its ``custom_parameters`` (none by default)."""
        start = {
            "user_id": "00000000-0000-0000-0000-000000000000",
            "call_control_id": self.call_control_id,
            "client_state": None,
            "custom_parameters": custom or {},
            "media_format": {
                "encoding": self.encoding,
                "sample_rate": self.sample_rate_hz,
                "channels": 1,
            },
        }
        return self.message("start", {"start": start})

    def media(self, payload: bytes) -> str:
        per_ms = self.sample_rate_hz // 1000 * (2 if self.encoding == "L16" else 1)
        chunk, sent_ms = self.next_chunk(len(payload) // per_ms)
        media = {"track": "inbound", "chunk": str(chunk), "timestamp": str(sent_ms)}
        return self.message("media", {"media": {**media, "payload": b64encode(payload)}})

    def dtmf(self, digit: str) -> str:
        return self.message("dtmf", {"dtmf": {"digit": digit}})

    def stop(self) -> str:
        return self.message("stop", {"stop": {"call_control_id": self.call_control_id}})


_AGENT = MarkWire(None)  # Telnyx's agent side: no stream id, no sequence number


class TelnyxAgentWire:
    """Builds the messages an agent sends to Telnyx (RTP mode): ``media``, ``mark``, ``clear``."""

    @staticmethod
    def media(payload: bytes) -> str:
        return _AGENT.agent_media(payload)

    @staticmethod
    def mark(name: str) -> str:
        return _AGENT.mark(name)

    @staticmethod
    def clear() -> str:
        return _AGENT.clear()
