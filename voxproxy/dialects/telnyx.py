"""Dialect ``telnyx``: Telnyx Media Streaming over a websocket (PROTOCOLS.md section 1, table).

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

from voxproxy.audio.g711 import pcm_to_alaw, pcm_to_ulaw
from voxproxy.dialects._common import b64encode, dumps, int_field
from voxproxy.dialects._telco import DTMF, FLUSH, MARK, MEDIA, QUIET, START, STOP
from voxproxy.dialects._telco import MediaStreamDecoder as _Base
from voxproxy.dialects.base import DialectOptions, register
from voxproxy.events import CALLER_TO_AGENT, Anomaly, AnomalyKind, Event, Pcm

NAME = "telnyx"
_CODECS = {"PCMU": "ulaw", "PCMA": "alaw", "L16": "pcm_s16be"}
_UNDECODABLE = frozenset({"G722", "OPUS", "AMR-WB"})


class TelnyxDecoder(_Base):
    name = NAME
    caller_events: ClassVar[dict[str, str]] = {
        "connected": QUIET,
        "start": START,
        "media": MEDIA,
        "mark": MARK,
        "dtmf": DTMF,
        "error": QUIET,
        "stop": STOP,
    }
    agent_events: ClassVar[dict[str, str]] = {"media": MEDIA, "mark": MARK, "clear": FLUSH}

    def __init__(self, options: DialectOptions) -> None:
        del options
        super().__init__()

    def start(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        start = msg.get("start")
        if not isinstance(start, dict):
            return [Anomaly(AnomalyKind.MALFORMED, CALLER_TO_AGENT, t_ns)]
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


@register(NAME)
def _make(options: DialectOptions) -> TelnyxDecoder:
    return TelnyxDecoder(options)


def encode(pcm: Pcm, encoding: str) -> bytes:
    """PCM as a Telnyx payload in ``encoding`` (PCMU, PCMA or L16)."""
    if encoding == "PCMU":
        return pcm_to_ulaw(pcm)
    if encoding == "PCMA":
        return pcm_to_alaw(pcm)
    if encoding == "L16":
        return pcm.astype(">i2").tobytes()
    raise ValueError(f"cannot encode {encoding!r}")


class TelnyxCallerWire:
    """Builds the messages Telnyx sends to an agent, for one stream."""

    def __init__(
        self,
        stream_id: str,
        call_control_id: str,
        encoding: str = "PCMU",
        sample_rate_hz: int = 8000,
    ) -> None:
        self.stream_id = stream_id
        self.call_control_id = call_control_id
        self.encoding = encoding
        self.sample_rate_hz = sample_rate_hz
        self._seq = 0
        self._chunk = 0
        self._media_ms = 0

    def _next_seq(self) -> str:
        self._seq += 1
        return str(self._seq)

    def connected(self) -> str:
        return dumps({"event": "connected", "version": "1.0.0"})

    def start(self) -> str:
        return dumps(
            {
                "event": "start",
                "sequence_number": self._next_seq(),
                "stream_id": self.stream_id,
                "start": {
                    "user_id": "00000000-0000-0000-0000-000000000000",
                    "call_control_id": self.call_control_id,
                    "client_state": None,
                    "custom_parameters": {},
                    "media_format": {
                        "encoding": self.encoding,
                        "sample_rate": self.sample_rate_hz,
                        "channels": 1,
                    },
                },
            }
        )

    def media(self, payload: bytes) -> str:
        self._chunk += 1
        msg = {
            "event": "media",
            "sequence_number": self._next_seq(),
            "stream_id": self.stream_id,
            "media": {
                "track": "inbound",
                "chunk": str(self._chunk),
                "timestamp": str(self._media_ms),
                "payload": b64encode(payload),
            },
        }
        per_ms = self.sample_rate_hz // 1000 * (2 if self.encoding == "L16" else 1)
        self._media_ms += len(payload) // per_ms
        return dumps(msg)

    def mark(self, name: str) -> str:
        return dumps(
            {
                "event": "mark",
                "sequence_number": self._next_seq(),
                "stream_id": self.stream_id,
                "mark": {"name": name},
            }
        )

    def dtmf(self, digit: str) -> str:
        return dumps(
            {
                "event": "dtmf",
                "sequence_number": self._next_seq(),
                "stream_id": self.stream_id,
                "dtmf": {"digit": digit},
            }
        )

    def stop(self) -> str:
        return dumps(
            {
                "event": "stop",
                "sequence_number": self._next_seq(),
                "stream_id": self.stream_id,
                "stop": {"call_control_id": self.call_control_id},
            }
        )


class TelnyxAgentWire:
    """Builds the messages an agent sends to Telnyx (RTP mode)."""

    @staticmethod
    def media(payload: bytes) -> str:
        return dumps({"event": "media", "media": {"payload": b64encode(payload)}})

    @staticmethod
    def mark(name: str) -> str:
        return dumps({"event": "mark", "mark": {"name": name}})

    @staticmethod
    def clear() -> str:
        return '{"event":"clear"}'
