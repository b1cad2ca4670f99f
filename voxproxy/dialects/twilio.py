"""Dialect ``twilio``: Twilio Media Streams, bidirectional (PROTOCOLS.md section 1).

Caller side (Twilio -> agent): ``connected``, ``start``, ``media``, ``dtmf``,
``mark`` (an echo), ``stop``. Agent side (agent -> Twilio): ``media``, ``mark``,
``clear``. All messages are JSON text; audio is base64 μ-law at 8 kHz.
Source: https://www.twilio.com/docs/voice/media-streams/websocket-messages
"""

from __future__ import annotations

from binascii import a2b_base64
from typing import Any

import orjson

from voxproxy.audio.g711 import ulaw_to_pcm
from voxproxy.dialects._common import b64encode
from voxproxy.dialects._stream import MarkWire
from voxproxy.dialects.base import DialectOptions, register
from voxproxy.events import (
    CALLER_TO_AGENT,
    Anomaly,
    AnomalyKind,
    Audio,
    Direction,
    Dtmf,
    Event,
    Flush,
    MarkEcho,
    MarkSent,
    StreamStart,
    StreamStop,
)

SAMPLE_RATE_HZ = 8000


class TwilioDecoder:
    name = "twilio"

    def __init__(self, options: DialectOptions) -> None:
        del options

    def codec(self, direction: Direction) -> str:
        """Media Streams carry 8 kHz mu-law both ways."""
        del direction
        return "ulaw"

    def decode(self, direction: Direction, payload: bytes | str, t_ns: int) -> list[Event]:
        if not isinstance(payload, str):
            return [Anomaly(AnomalyKind.UNEXPECTED_BINARY, direction, t_ns)]
        try:
            msg: Any = orjson.loads(payload)
        except ValueError:
            return [Anomaly(AnomalyKind.MALFORMED, direction, t_ns)]
        if not isinstance(msg, dict):
            return [Anomaly(AnomalyKind.MALFORMED, direction, t_ns)]
        event = msg.get("event")
        if event == "media":
            media = msg.get("media")
            if not isinstance(media, dict):
                return [Anomaly(AnomalyKind.MALFORMED, direction, t_ns)]
            if direction is CALLER_TO_AGENT and media.get("track", "inbound") != "inbound":
                return []  # an outbound track echo is not caller audio
            value = media.get("payload")
            if not isinstance(value, str):
                if "payload" not in media:
                    return [Anomaly(AnomalyKind.MALFORMED, direction, t_ns)]
                return [Anomaly(AnomalyKind.INVALID_BASE64, direction, t_ns)]
            # The hot path (every 20 ms each way): base64 and μ-law inline.
            try:
                data = a2b_base64(value, strict_mode=True)  # (str: ASCII only, else ValueError)
            except ValueError:  # binascii.Error, or a str that is not ASCII
                return [Anomaly(AnomalyKind.INVALID_BASE64, direction, t_ns)]
            pcm = ulaw_to_pcm(data)
            return [Audio(direction, pcm, SAMPLE_RATE_HZ, t_ns)]
        if event == "mark":
            mark = msg.get("mark")
            name = mark.get("name") if isinstance(mark, dict) else None
            if not isinstance(name, str):
                return [Anomaly(AnomalyKind.MALFORMED, direction, t_ns)]
            if direction is CALLER_TO_AGENT:
                return [MarkEcho(name, t_ns)]
            return [MarkSent(name, t_ns)]
        if direction is CALLER_TO_AGENT:
            if event == "start":
                return [self._start(msg, t_ns)]
            if event == "connected":
                return []
            if event == "stop":
                return [StreamStop(t_ns)]
            if event == "dtmf":
                return [Dtmf(t_ns)]
        elif event == "clear":
            return [Flush(t_ns, "clear")]
        return [Anomaly(AnomalyKind.UNKNOWN_EVENT, direction, t_ns)]

    def _start(self, msg: dict[str, Any], t_ns: int) -> Event:
        start = msg.get("start")
        if not isinstance(start, dict):
            return Anomaly(AnomalyKind.MALFORMED, CALLER_TO_AGENT, t_ns)
        call_id = start.get("callSid") or start.get("streamSid") or msg.get("streamSid")
        fmt = start.get("mediaFormat")
        rate = encoding = None
        if isinstance(fmt, dict):
            rate = fmt.get("sampleRate")
            encoding = fmt.get("encoding")
        if rate is not None and rate != SAMPLE_RATE_HZ:
            return Anomaly(AnomalyKind.BAD_AUDIO, CALLER_TO_AGENT, t_ns)
        return StreamStart(
            str(call_id) if call_id is not None else None,
            SAMPLE_RATE_HZ,
            str(encoding) if encoding is not None else "audio/x-mulaw",
            t_ns,
        )


@register("twilio")
def _make(options: DialectOptions) -> TwilioDecoder:
    return TwilioDecoder(options)


class TwilioCallerWire(MarkWire):
    """Builds the messages Twilio sends to an agent, for one stream."""

    seq_key = "sequenceNumber"
    seq_as_text = True
    id_key = "streamSid"
    compact = False

    def __init__(self, stream_sid: str, call_sid: str, account_sid: str = "AC" + "0" * 32) -> None:
        super().__init__(stream_sid)
        self.stream_sid = stream_sid
        self.call_sid = call_sid
        self.account_sid = account_sid

    def connected(self) -> str:
        return self.message("connected", {"protocol": "Call", "version": "1.0.0"}, "f")

    def start(self, custom: dict[str, str] | None = None) -> str:
        start = {
            "accountSid": self.account_sid,
            "streamSid": self.stream_sid,
            "callSid": self.call_sid,
            "tracks": ["inbound"],
            "customParameters": custom or {},
            "mediaFormat": {
                "encoding": "audio/x-mulaw",
                "sampleRate": SAMPLE_RATE_HZ,
                "channels": 1,
            },
        }
        return self.message("start", {"start": start}, "sfi")

    def media(self, ulaw: bytes) -> str:
        chunk, sent_ms = self.next_chunk(len(ulaw) // 8)
        media = {"track": "inbound", "chunk": str(chunk), "timestamp": str(sent_ms)}
        return self.message("media", {"media": {**media, "payload": b64encode(ulaw)}}, "sfi")

    def dtmf(self, digit: str) -> str:
        return self.message("dtmf", {"dtmf": {"track": "inbound_track", "digit": digit}}, "isf")

    def stop(self) -> str:
        return self.message(
            "stop", {"stop": {"accountSid": self.account_sid, "callSid": self.call_sid}}
        )


class TwilioAgentWire(MarkWire):
    """Builds the messages an agent sends to Twilio: ``media``, ``mark`` and ``clear``."""

    id_key = "streamSid"
    compact = False

    def __init__(self, stream_sid: str) -> None:
        super().__init__(stream_sid)
        self.stream_sid = stream_sid

    def media(self, ulaw: bytes) -> str:
        return self.agent_media(ulaw)
