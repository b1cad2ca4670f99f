"""Dialect ``twilio``: Twilio Media Streams, bidirectional (docs/protocols.md section 3).

Caller side (Twilio -> agent): ``connected``, ``start``, ``media``, ``dtmf``,
``mark`` (an echo), ``stop``. Agent side (agent -> Twilio): ``media``, ``mark``,
``clear``. All messages are JSON text; audio is base64 μ-law at 8 kHz.
The decoder is in ``twilio_decoder`` (compiled with the measurement core); this module
makes it (:func:`new_decoder`) and builds Twilio's messages (the load generator's and
the mock agent's).
Source: https://www.twilio.com/docs/voice/media-streams/websocket-messages
"""

from __future__ import annotations

import json

from voxproxy.core.dialects._common import b64encode
from voxproxy.core.dialects._stream import MarkWire
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.twilio_decoder import SAMPLE_RATE_HZ, TwilioDecoder

__all__ = ["SAMPLE_RATE_HZ", "TwilioAgentWire", "TwilioCallerWire", "TwilioDecoder"]


def new_decoder(options: DialectOptions) -> TwilioDecoder:
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
        self._id_tail = f", {json.dumps({'streamSid': stream_sid})[1:-1]}"

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
        """``{"event": "media", <seq>, "media": {track, chunk, timestamp, payload}, <id>}``,
        the text ``json.dumps`` gives for it, laid out directly: a load generator sends
        50 a second per caller, and the dict and the encoder's passes over it were a
        tenth of its CPU (the other fields are digits and base64, which JSON leaves as
        they are; the stream id is encoded once)."""
        chunk, sent_ms = self.next_chunk(len(ulaw) // 8)
        self._seq += 1
        return (
            f'{{"event": "media", "sequenceNumber": "{self._seq}", "media": {{"track": '
            f'"inbound", "chunk": "{chunk}", "timestamp": "{sent_ms}", "payload": '
            f'"{b64encode(ulaw)}"}}{self._id_tail}}}'
        )

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
