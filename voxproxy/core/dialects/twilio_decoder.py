"""The Twilio Media Streams decoder (docs/protocols.md section 3). It runs on every message
of a Twilio call, so it is compiled with the measurement core (``voxproxy/native.py``);
``voxproxy.core.dialects.twilio`` makes it and builds Twilio's messages.
Source: https://www.twilio.com/docs/voice/media-streams/websocket-messages
"""

from __future__ import annotations

from binascii import a2b_base64
from typing import Any

import orjson

from voxproxy.core.audio.g711 import ulaw_to_pcm
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.events import (
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
            parsed: object = orjson.loads(payload)
        except ValueError:
            return [Anomaly(AnomalyKind.MALFORMED, direction, t_ns)]
        if not isinstance(parsed, dict):
            return [Anomaly(AnomalyKind.MALFORMED, direction, t_ns)]
        msg: dict[str, Any] = parsed  # (typed: the compiled build looks keys up directly)
        event = msg.get("event")
        if event == "media":
            return self._media(direction, msg.get("media"), t_ns)
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

    def _media(self, direction: Direction, found: object, t_ns: int) -> list[Event]:
        """The hot path (every 20 ms each way): base64 inline, μ-law by the compiled
        ``audio.g711`` (a native call)."""
        if not isinstance(found, dict):
            return [Anomaly(AnomalyKind.MALFORMED, direction, t_ns)]
        media: dict[str, Any] = found
        if direction is CALLER_TO_AGENT and media.get("track", "inbound") != "inbound":
            return []  # an outbound track echo is not caller audio
        value = media.get("payload")
        if not isinstance(value, str):
            if "payload" not in media:
                return [Anomaly(AnomalyKind.MALFORMED, direction, t_ns)]
            return [Anomaly(AnomalyKind.INVALID_BASE64, direction, t_ns)]
        try:
            data = a2b_base64(value, strict_mode=True)  # (str: ASCII only, else ValueError)
        except ValueError:  # binascii.Error, or a str that is not ASCII
            return [Anomaly(AnomalyKind.INVALID_BASE64, direction, t_ns)]
        return [Audio(direction, ulaw_to_pcm(data), SAMPLE_RATE_HZ, t_ns)]

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
