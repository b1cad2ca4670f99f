"""Dialect ``plivo``: Plivo Audio Streams, bidirectional (docs/protocols.md section 4).

Plivo -> agent: ``start`` (``start.{callId, streamId, tracks, mediaFormat.{encoding,
sampleRate}}``, ``sequenceNumber`` a number), ``media`` (``media.payload``), ``dtmf``,
``playedStream`` (a checkpoint was reached), ``clearedAudio`` (the queue was
cleared). Agent -> Plivo: ``playAudio`` (``media.{contentType, sampleRate,
payload}``: each message names its own format), ``checkpoint`` (``name``),
``clearAudio``, ``sendDTMF``. Stream ids are ``streamId`` (camel case).
Source: plivo.com/docs/voice/audio-streaming ("Stream Event Protocol"), the
``checkpoint`` event page; pipecat ``serializers/plivo.py``.

* Formats: ``audio/x-mulaw`` at 8000 Hz and ``audio/x-l16`` at 8000 or 16000 Hz
  (``audio/x-l16;rate=8000`` is the XML default). L16 byte order is not stated in
  the documents read; little-endian is assumed [U].
* ``checkpoint`` -> ``playedStream`` "only ... if the preceding events were played
  successfully": an echo is stronger evidence than a Twilio mark, and a
  checkpoint pending at a ``clearAudio`` never comes back. A Plivo support page
  names the answer ``played``; both names are accepted.
"""

from __future__ import annotations

from typing import Any, ClassVar

from voxproxy.core.audio.g711 import pcm_to_ulaw
from voxproxy.core.audio.pcm import pcm_to_bytes
from voxproxy.core.dialects._common import b64encode, int_field
from voxproxy.core.dialects._stream import StreamWire
from voxproxy.core.dialects._telco import DTMF, FLUSH, MARK, MEDIA, QUIET, START, STOP
from voxproxy.core.dialects._telco import MediaStreamDecoder as _Base
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Anomaly, AnomalyKind, Event, Pcm

NAME = "plivo"
MULAW = "audio/x-mulaw"
L16 = "audio/x-l16"


def _codec(content_type: object, rate: object) -> tuple[str, int] | None:
    """(encoding, rate) of a Plivo content type, or None when Plivo does not allow it."""
    if not isinstance(content_type, str):
        return None
    name, _, params = content_type.partition(";")
    hz = int_field(rate) or None
    if hz is None and params.strip().startswith("rate="):
        hz = int_field(params.strip()[5:])
    name = name.strip().lower()
    if name == MULAW and hz in (None, 8000):
        return "ulaw", 8000
    if name == L16 and hz in (None, 8000, 16000):
        return "pcm_s16le", hz or 8000
    return None


class PlivoDecoder(_Base):
    name = NAME
    caller_events: ClassVar[dict[str, str]] = {
        "start": START,
        "media": MEDIA,
        "dtmf": DTMF,
        "playedStream": MARK,
        "played": MARK,
        "clearedAudio": QUIET,
        "stop": STOP,
    }
    agent_events: ClassVar[dict[str, str]] = {
        "playAudio": MEDIA,
        "checkpoint": MARK,
        "clearAudio": FLUSH,
        "sendDTMF": QUIET,
    }

    def on_start(self, start: dict[str, Any], msg: dict[str, Any], t_ns: int) -> list[Event]:
        call_id = start.get("callId") or start.get("streamId") or msg.get("streamId")
        fmt = start.get("mediaFormat")
        codec: tuple[str, int] | None = ("ulaw", 8000)
        if isinstance(fmt, dict):
            codec = _codec(fmt.get("encoding"), fmt.get("sampleRate"))
        if codec is None:
            return [Anomaly(AnomalyKind.BAD_AUDIO, CALLER_TO_AGENT, t_ns)]
        self.set_codec(*codec)
        return [self.stream_start(call_id, codec[1], codec[0], t_ns)]

    def mark_name(self, msg: dict[str, Any]) -> str | None:
        name = msg.get("name")
        return name if isinstance(name, str) else None

    def agent_format(self, media: dict[str, Any], t_ns: int) -> tuple[str, int] | Anomaly | None:
        if "contentType" not in media:
            return None  # the stream's own format
        codec = _codec(media.get("contentType"), media.get("sampleRate"))
        if codec is None:
            return Anomaly(AnomalyKind.BAD_AUDIO, AGENT_TO_CALLER, t_ns)
        return codec


def new_decoder(options: DialectOptions) -> PlivoDecoder:
    del options  # nothing to set: the start message says it all
    return PlivoDecoder()


def _payload(content_type: str, pcm: Pcm) -> bytes:
    return pcm_to_ulaw(pcm) if content_type == MULAW else pcm_to_bytes(pcm)


class PlivoCallerWire(StreamWire):
    """Builds the messages Plivo sends to an agent, for one stream."""

    seq_key = "sequenceNumber"
    id_key = "streamId"

    def __init__(
        self, stream_id: str, call_id: str, content_type: str = MULAW, sample_rate_hz: int = 8000
    ) -> None:
        super().__init__(stream_id)
        self.call_id = call_id
        self.content_type = content_type
        self.sample_rate_hz = sample_rate_hz

    def start(self) -> str:
        start = {
            "callId": self.call_id,
            "streamId": self.stream_id,
            "accountId": "MA" + "0" * 18,
            "tracks": ["inbound"],
            "mediaFormat": {"encoding": self.content_type, "sampleRate": self.sample_rate_hz},
        }
        return self.message("start", {"start": start, "extra_headers": ""}, "sf")

    def encode(self, pcm: Pcm) -> bytes:
        return _payload(self.content_type, pcm)

    def media(self, pcm: Pcm) -> str:
        chunk, sent_ms = self.next_chunk(pcm.size * 1000 // self.sample_rate_hz)
        media = {"track": "inbound", "timestamp": str(sent_ms), "chunk": chunk}
        return self.message("media", {"media": {**media, "payload": b64encode(self.encode(pcm))}})

    def played_stream(self, name: str) -> str:
        return self.message("playedStream", {"name": name})

    def cleared_audio(self) -> str:
        return self.message("clearedAudio")

    def dtmf(self, digit: str) -> str:
        return self.message("dtmf", {"dtmf": {"track": "inbound", "digit": digit}})


class PlivoAgentWire(StreamWire):
    """Builds the messages an agent sends to Plivo: ``playAudio`` (naming its own
    format), ``checkpoint`` and ``clearAudio``."""

    id_key = "streamId"

    def __init__(
        self, stream_id: str, content_type: str = MULAW, sample_rate_hz: int = 8000
    ) -> None:
        super().__init__(stream_id)
        self.content_type = content_type
        self.sample_rate_hz = sample_rate_hz

    def play_audio(self, pcm: Pcm) -> str:
        media = {
            "contentType": self.content_type,
            "sampleRate": self.sample_rate_hz,
            "payload": b64encode(_payload(self.content_type, pcm)),
        }
        return self.message("playAudio", {"media": media}, "fi")

    def checkpoint(self, name: str) -> str:
        return self.message("checkpoint", {"name": name})

    def clear_audio(self) -> str:
        return self.message("clearAudio")
