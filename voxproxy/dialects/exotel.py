"""Dialect ``exotel``: the Exotel Voicebot applet, bidirectional (PROTOCOLS.md 1, table).

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

from voxproxy.audio.pcm import pcm_to_bytes
from voxproxy.dialects._common import b64encode, dumps, int_field
from voxproxy.dialects._telco import DTMF, FLUSH, MARK, MEDIA, QUIET, START, STOP
from voxproxy.dialects._telco import MediaStreamDecoder as _Base
from voxproxy.dialects.base import DialectOptions, register
from voxproxy.events import CALLER_TO_AGENT, Anomaly, AnomalyKind, Event, Pcm

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
    caller_events: ClassVar[dict[str, str]] = {
        "connected": QUIET,
        "start": START,
        "media": MEDIA,
        "mark": MARK,
        "dtmf": DTMF,
        "stop": STOP,
    }
    agent_events: ClassVar[dict[str, str]] = {"media": MEDIA, "mark": MARK, "clear": FLUSH}
    default_encoding = "pcm_s16le"

    def __init__(self, options: DialectOptions) -> None:
        del options
        super().__init__()

    def start(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        start = msg.get("start")
        if not isinstance(start, dict):
            return [Anomaly(AnomalyKind.MALFORMED, CALLER_TO_AGENT, t_ns)]
        call_id = start.get("call_sid") or start.get("stream_sid") or msg.get("stream_sid")
        fmt = start.get("media_format")
        codec = _codec(fmt) if isinstance(fmt, dict) else ("pcm_s16le", 8000)
        if codec is None:
            return [Anomaly(AnomalyKind.BAD_AUDIO, CALLER_TO_AGENT, t_ns)]
        self.set_codec(*codec)
        return [self.stream_start(call_id, codec[1], codec[0], t_ns)]


@register(NAME)
def _make(options: DialectOptions) -> ExotelDecoder:
    return ExotelDecoder(options)


class ExotelCallerWire:
    """Builds the messages Exotel sends to a voicebot, for one stream (slin by default)."""

    def __init__(self, stream_sid: str, call_sid: str, sample_rate_hz: int = 8000) -> None:
        self.stream_sid = stream_sid
        self.call_sid = call_sid
        self.sample_rate_hz = sample_rate_hz
        self._seq = 0
        self._chunk = 0
        self._media_ms = 0

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def connected(self) -> str:
        return '{"event":"connected"}'

    def start(self) -> str:
        return dumps(
            {
                "event": "start",
                "sequence_number": self._next_seq(),
                "stream_sid": self.stream_sid,
                "start": {
                    "stream_sid": self.stream_sid,
                    "call_sid": self.call_sid,
                    "account_sid": "exotel-test",
                    "custom_parameters": {},
                    "media_format": {
                        "encoding": "base64",
                        "sample_rate": str(self.sample_rate_hz),
                        "bit_rate": f"{self.sample_rate_hz * 16 // 1000}kbps",
                    },
                },
            }
        )

    def media(self, pcm: Pcm) -> str:
        self._chunk += 1
        msg = {
            "event": "media",
            "sequence_number": self._next_seq(),
            "stream_sid": self.stream_sid,
            "media": {
                "chunk": self._chunk,
                "timestamp": str(self._media_ms),
                "payload": b64encode(pcm_to_bytes(pcm)),
            },
        }
        self._media_ms += pcm.size * 1000 // self.sample_rate_hz
        return dumps(msg)

    def mark(self, name: str) -> str:
        return dumps(
            {
                "event": "mark",
                "sequence_number": self._next_seq(),
                "stream_sid": self.stream_sid,
                "mark": {"name": name},
            }
        )

    def dtmf(self, digit: str) -> str:
        return dumps(
            {
                "event": "dtmf",
                "sequence_number": self._next_seq(),
                "stream_sid": self.stream_sid,
                "dtmf": {"duration": "100", "digit": digit},
            }
        )

    def stop(self) -> str:
        return dumps(
            {
                "event": "stop",
                "sequence_number": self._next_seq(),
                "stream_sid": self.stream_sid,
                "stop": {"call_sid": self.call_sid, "reason": "callended"},
            }
        )


class ExotelAgentWire:
    """Builds the messages a voicebot sends to Exotel."""

    def __init__(self, stream_sid: str) -> None:
        self.stream_sid = stream_sid

    def media(self, pcm: Pcm) -> str:
        return dumps(
            {
                "event": "media",
                "stream_sid": self.stream_sid,
                "media": {"payload": b64encode(pcm_to_bytes(pcm))},
            }
        )

    def mark(self, name: str) -> str:
        return dumps({"event": "mark", "stream_sid": self.stream_sid, "mark": {"name": name}})

    def clear(self) -> str:
        return dumps({"event": "clear", "stream_sid": self.stream_sid})
