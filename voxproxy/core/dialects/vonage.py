"""Dialect ``vonage``: Vonage Voice API websockets (docs/protocols.md section 4).

Audio travels in **binary** messages both ways: 16-bit signed little-endian
linear PCM, mono, at 16 kHz by default (8 kHz when the NCCO's ``content-type``
says ``audio/l16;rate=8000``), 20 ms per message from Vonage. Control travels in
JSON text messages:

* Vonage -> agent: ``{"event": "websocket:connected", "content-type":
  "audio/l16;rate=16000", ...}`` first, then ``websocket:dtmf``,
  ``websocket:cleared`` (the answer to ``clear``) and ``websocket:notify`` (the
  answer to ``notify``, echoing its ``payload``).
* Agent -> Vonage: ``{"action": "clear"}`` (a flush) and ``{"action": "notify",
  "payload": {...}}`` (a played-marker: Vonage answers when the audio queued
  before it has played).

Source: developer.vonage.com, Voice API "WebSockets" guide and concepts; the
marker and flush pairs are documentation excerpts only [D]. A notify marker has
no name, so its payload (canonical JSON) serves as one; it stays in memory.
"""

from __future__ import annotations

from typing import Any

import orjson

from voxproxy.core import events as ev
from voxproxy.core.audio.pcm import pcm_to_bytes
from voxproxy.core.dialects._common import PcmDecoder, dumps, loads_object
from voxproxy.core.dialects.base import DialectOptions

NAME = "vonage"
_RATES = (8000, 16000)


def _rate_of(content_type: object) -> int | None:
    if not isinstance(content_type, str):
        return None
    name, _, params = content_type.partition(";")
    if name.strip().lower() != "audio/l16":
        return None
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key == "rate":
            try:
                rate = int(value)
            except ValueError:
                return None
            return rate if rate in _RATES else None
    return 16000


def marker_name(payload: object) -> str:
    """The name a notify payload goes by (canonical JSON, keys sorted)."""
    return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode("utf-8")


class VonageDecoder:
    name = NAME

    def __init__(self, options: DialectOptions) -> None:
        rate = options.sample_rate_hz if options.sample_rate_hz in _RATES else 16000
        self.sample_rate_hz = rate
        self._pcm = [PcmDecoder("pcm_s16le"), PcmDecoder("pcm_s16le")]

    def decode(self, direction: ev.Direction, payload: bytes | str, t_ns: int) -> list[ev.Event]:
        if isinstance(payload, bytes):
            pcm = self._pcm[direction].decode(payload)
            if not pcm.size:
                return []
            return [ev.Audio(direction, pcm, self.sample_rate_hz, t_ns)]
        msg = loads_object(payload)
        if msg is None:
            return [ev.Anomaly(ev.AnomalyKind.MALFORMED, direction, t_ns)]
        if direction is ev.CALLER_TO_AGENT:
            return self._from_vonage(msg, t_ns)
        action = msg.get("action")
        if action == "clear":
            return [ev.Flush(t_ns, "clear")]
        if action == "notify":
            if "payload" not in msg:
                return [ev.Anomaly(ev.AnomalyKind.MALFORMED, direction, t_ns)]
            return [ev.MarkSent(marker_name(msg["payload"]), t_ns)]
        if not isinstance(action, str):
            return [ev.Anomaly(ev.AnomalyKind.MALFORMED, direction, t_ns)]
        return [ev.Anomaly(ev.AnomalyKind.UNKNOWN_EVENT, direction, t_ns)]

    def _from_vonage(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        event = msg.get("event")
        if event == "websocket:connected":
            content_type = msg.get("content-type")
            if content_type is None:
                return [ev.StreamStart(None, self.sample_rate_hz, "pcm_s16le", t_ns)]
            rate = _rate_of(content_type)
            if rate is None:
                return [ev.Anomaly(ev.AnomalyKind.BAD_AUDIO, ev.CALLER_TO_AGENT, t_ns)]
            self.sample_rate_hz = rate
            return [ev.StreamStart(None, rate, "pcm_s16le", t_ns)]
        if event == "websocket:dtmf":
            return [ev.Dtmf(t_ns)]
        if event == "websocket:notify":
            if "payload" not in msg:
                return [ev.Anomaly(ev.AnomalyKind.MALFORMED, ev.CALLER_TO_AGENT, t_ns)]
            return [ev.MarkEcho(marker_name(msg["payload"]), t_ns)]
        if event == "websocket:cleared":
            return []
        if not isinstance(event, str):
            return [ev.Anomaly(ev.AnomalyKind.MALFORMED, ev.CALLER_TO_AGENT, t_ns)]
        return [ev.Anomaly(ev.AnomalyKind.UNKNOWN_EVENT, ev.CALLER_TO_AGENT, t_ns)]


def new_decoder(options: DialectOptions) -> VonageDecoder:
    return VonageDecoder(options)


class VonageCallerWire:
    """Builds the messages Vonage sends to an agent."""

    def __init__(self, sample_rate_hz: int = 16000, headers: dict[str, str] | None = None) -> None:
        self.sample_rate_hz = sample_rate_hz
        self.headers = headers or {}

    def connected(self) -> str:
        return dumps(
            {
                "event": "websocket:connected",
                "content-type": f"audio/l16;rate={self.sample_rate_hz}",
                **self.headers,
            }
        )

    @staticmethod
    def audio(pcm: ev.Pcm) -> bytes:
        return pcm_to_bytes(pcm)

    @staticmethod
    def dtmf(digit: str, duration_ms: int = 100) -> str:
        return dumps({"event": "websocket:dtmf", "digit": digit, "duration": duration_ms})

    @staticmethod
    def notify(payload: object) -> str:
        return dumps({"event": "websocket:notify", "payload": payload})

    @staticmethod
    def cleared() -> str:
        return '{"event":"websocket:cleared"}'


class VonageAgentWire:
    """Builds the messages an agent sends to Vonage."""

    @staticmethod
    def audio(pcm: ev.Pcm) -> bytes:
        return pcm_to_bytes(pcm)

    @staticmethod
    def clear() -> str:
        return '{"action":"clear"}'

    @staticmethod
    def notify(payload: object) -> str:
        return dumps({"action": "notify", "payload": payload})
