"""Dialect ``exotel``: the Exotel Voicebot applet, bidirectional (docs/protocols.md section 4).

Exotel -> agent: ``connected``, ``start`` (``stream_sid``; ``start.call_sid`` and
``start.media_format.{encoding, sample_rate}``), ``media``
(``media.{chunk, timestamp, payload}``), ``dtmf``, ``mark`` (the echo of a marker),
``stop``. Agent -> Exotel: ``{"event": "media", "stream_sid", "media": {"payload"}}``,
``mark``, ``clear``. The stream id key is ``stream_sid`` (snake case).
Source: developer.exotel.com, "Working with the Stream and Voicebot Applet";
pipecat ``serializers/exotel.py``.

* Audio is raw/slin: 16-bit little-endian mono PCM at 8 kHz, base64 in ``media``
  (16 and 24 kHz when the applet asks for them with ``?sample-rate=``, which the
  ``start`` message's ``sample_rate`` then says; it may be a string). The beta
  "extended" applet may stream ``audio/x-mulaw;rate=8000`` instead: an encoding
  naming mulaw is decoded as μ-law.
* Agent chunks must be at least 3.2 KB (100 ms), at most 100 KB, in multiples of
  320 bytes; the proxy measures whatever arrives.
* ``mark`` -> ``mark`` as with Twilio: an echo after ``clear`` means "dropped".
"""

from __future__ import annotations

from typing import Any, ClassVar

from voxproxy.core.audio.pcm import pcm_to_bytes
from voxproxy.core.dialects._common import b64encode, int_field
from voxproxy.core.dialects._stream import MarkWire
from voxproxy.core.dialects._telco import TWILIO_AGENT_EVENTS, TWILIO_CALLER_EVENTS
from voxproxy.core.dialects._telco import MediaStreamDecoder as _Base
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.events import CALLER_TO_AGENT, Anomaly, AnomalyKind, Event, Pcm

NAME = "exotel"
_RATES = (8000, 16000, 24000)


def _codec(fmt: dict[str, Any]) -> tuple[str, int] | None:
    encoding = fmt.get("encoding")
    rate = int_field(fmt.get("sample_rate"))
    name = encoding.lower() if isinstance(encoding, str) else ""
    if rate is None and "rate=" in name:
        rate = int_field(name.split("rate=", 1)[1].split(";", 1)[0])
    rate = rate or 8000
    if rate not in _RATES:
        return None
    if "mulaw" in name or "ulaw" in name:
        return "ulaw", rate
    return "pcm_s16le", rate


class ExotelDecoder(_Base):
    name = NAME
    caller_events: ClassVar[dict[str, str]] = TWILIO_CALLER_EVENTS
    agent_events: ClassVar[dict[str, str]] = TWILIO_AGENT_EVENTS
    default_encoding = "pcm_s16le"

    def on_start(self, start: dict[str, Any], msg: dict[str, Any], t_ns: int) -> list[Event]:
        call_id = start.get("call_sid") or start.get("stream_sid") or msg.get("stream_sid")
        fmt = start.get("media_format")
        codec = _codec(fmt) if isinstance(fmt, dict) else ("pcm_s16le", 8000)
        if codec is None:
            return [Anomaly(AnomalyKind.BAD_AUDIO, CALLER_TO_AGENT, t_ns)]
        self.set_codec(*codec)
        return [self.stream_start(call_id, codec[1], codec[0], t_ns)]


def new_decoder(options: DialectOptions) -> ExotelDecoder:
    del options  # nothing to set: the start message says it all
    return ExotelDecoder()


class ExotelCallerWire(MarkWire):
    """Builds the messages Exotel sends to a voicebot, for one stream (slin by default)."""

    seq_key = "sequence_number"
    id_key = "stream_sid"

    def __init__(self, stream_sid: str, call_sid: str, sample_rate_hz: int = 8000) -> None:
        super().__init__(stream_sid)
        self.stream_sid = stream_sid
        self.call_sid = call_sid
        self.sample_rate_hz = sample_rate_hz

    def connected(self) -> str:
        return self.message("connected", at="f")

    def start(self, custom: dict[str, str] | None = None) -> str:
        """The start message; ``custom``: its ``custom_parameters`` (none by default)."""
        rate = self.sample_rate_hz
        start = {
            "stream_sid": self.stream_sid,
            "call_sid": self.call_sid,
            "account_sid": "exotel-test",
            "custom_parameters": custom or {},
            "media_format": {
                "encoding": "base64",
                "sample_rate": str(rate),
                "bit_rate": f"{rate * 16 // 1000}kbps",
            },
        }
        return self.message("start", {"start": start})

    def media(self, pcm: Pcm) -> str:
        chunk, sent_ms = self.next_chunk(pcm.size * 1000 // self.sample_rate_hz)
        media = {"chunk": chunk, "timestamp": str(sent_ms), "payload": b64encode(pcm_to_bytes(pcm))}
        return self.message("media", {"media": media})

    def dtmf(self, digit: str) -> str:
        return self.message("dtmf", {"dtmf": {"duration": "100", "digit": digit}})

    def stop(self) -> str:
        return self.message("stop", {"stop": {"call_sid": self.call_sid, "reason": "callended"}})


class ExotelAgentWire(MarkWire):
    """Builds the messages a voicebot sends to Exotel: ``media`` (slin), ``mark``, ``clear``."""

    id_key = "stream_sid"

    def __init__(self, stream_sid: str) -> None:
        super().__init__(stream_sid)
        self.stream_sid = stream_sid

    def media(self, pcm: Pcm) -> str:
        return self.agent_media(pcm_to_bytes(pcm))
