"""Dialect ``raw``: 16-bit little-endian mono PCM in binary messages (docs/protocols.md section 2).

* Binary messages in both directions carry PCM at a declared rate; a message
  may hold any number of bytes, and an odd trailing byte is carried over to
  the next message of the same direction.
* An optional first text message from the caller, ``{"type": "start",
  "sample_rate": 16000}``, declares the caller's rate, and the agent's too unless the
  agent's rate was configured (``--agent-sample-rate``) or the agent declares its own
  with the same message; an optional ``"call_id"`` in it names the call (it is only
  ever kept as a keyed hash).
* Agent text messages: ``{"type": "clear"}`` is a flush;
  ``{"type": "transcript", "role", "text", "final"}`` reports what the agent
  heard. Other text is forwarded and counted as unknown.
"""

from __future__ import annotations

import json
from typing import Any

from voxproxy.core.audio.pcm import bytes_to_pcm
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.events import (
    AGENT_TO_CALLER,
    Anomaly,
    AnomalyKind,
    Audio,
    Direction,
    Event,
    Flush,
    StreamStart,
    Transcript,
)

_RATES = range(4000, 192001)


class RawDecoder:
    name = "raw"

    def __init__(self, options: DialectOptions) -> None:
        self.rates = [
            options.sample_rate_hz,
            options.agent_sample_rate_hz or options.sample_rate_hz,
        ]
        # Without a rate of its own (configured or declared), the agent's audio is taken
        # to be at the rate the caller declares.
        self._agent_rate_follows = options.agent_sample_rate_hz is None
        self._odd: list[bytes] = [b"", b""]

    def decode(self, direction: Direction, payload: bytes | str, t_ns: int) -> list[Event]:
        if isinstance(payload, str):
            return self._text(direction, payload, t_ns)
        data = payload
        carry = self._odd[direction]
        if carry:
            data = carry + data
        if len(data) % 2:
            self._odd[direction] = data[-1:]
            data = data[:-1]
        else:
            self._odd[direction] = b""
        if not data:
            return []
        return [Audio(direction, bytes_to_pcm(data), self.rates[direction], t_ns)]

    def _text(self, direction: Direction, text: str, t_ns: int) -> list[Event]:
        try:
            msg: Any = json.loads(text)
        except ValueError:
            return [Anomaly(AnomalyKind.MALFORMED, direction, t_ns)]
        if not isinstance(msg, dict):
            return [Anomaly(AnomalyKind.MALFORMED, direction, t_ns)]
        kind = msg.get("type")
        if kind == "start":
            rate = msg.get("sample_rate")
            call_id = msg.get("call_id")
            wire_id = call_id if isinstance(call_id, str) and call_id else None
            if rate is None:
                return [StreamStart(wire_id, None, "pcm_s16le", t_ns)]
            if not isinstance(rate, int) or isinstance(rate, bool) or rate not in _RATES:
                return [Anomaly(AnomalyKind.MALFORMED, direction, t_ns)]
            self.rates[direction] = rate
            if direction is AGENT_TO_CALLER:
                self._agent_rate_follows = False
                return []
            if self._agent_rate_follows:
                self.rates[AGENT_TO_CALLER] = rate
            return [StreamStart(wire_id, rate, "pcm_s16le", t_ns)]
        if direction is AGENT_TO_CALLER:
            if kind == "clear":
                return [Flush(t_ns, "clear")]
            if kind == "transcript":
                text_value = msg.get("text")
                if not isinstance(text_value, str):
                    return [Anomaly(AnomalyKind.MALFORMED, direction, t_ns)]
                role = msg.get("role", "user")
                return [Transcript(str(role), text_value, bool(msg.get("final", True)), t_ns)]
        return [Anomaly(AnomalyKind.UNKNOWN_EVENT, direction, t_ns)]


def new_decoder(options: DialectOptions) -> RawDecoder:
    return RawDecoder(options)


class RawWire:
    """Builds ``raw`` messages (used by the mock agent, the load generator and tests)."""

    @staticmethod
    def start(sample_rate_hz: int, call_id: str | None = None) -> str:
        msg: dict[str, object] = {"type": "start", "sample_rate": sample_rate_hz}
        if call_id is not None:
            msg["call_id"] = call_id
        return json.dumps(msg)

    @staticmethod
    def audio(pcm_bytes: bytes) -> bytes:
        return pcm_bytes

    @staticmethod
    def clear() -> str:
        return '{"type": "clear"}'

    @staticmethod
    def transcript(text: str, final: bool = True, role: str = "user") -> str:
        return json.dumps({"type": "transcript", "role": role, "text": text, "final": final})
