"""Dialect ``auto``: pick the dialect from the first messages of a call.

A JSON text message with an ``event`` field of the Twilio vocabulary means
``twilio``; a binary message, or JSON with a ``type`` field, means ``raw``.
Messages that decide nothing (empty, non-JSON text) are counted as
``dialect_undetected`` until one decides; after ``max_undecided`` of them the
call is measured as ``raw`` text-less audio and the receipt says
``dialect: "undetected"``.
"""

from __future__ import annotations

import json
from typing import Any

from voxproxy.dialects.base import DIALECTS, Decoder, DialectOptions, register
from voxproxy.events import Anomaly, AnomalyKind, Direction, Event

_TWILIO_EVENTS = frozenset({"connected", "start", "media", "mark", "stop", "dtmf", "clear"})


def guess(payload: bytes | str) -> str | None:
    """The dialect one message suggests, or None."""
    if isinstance(payload, bytes):
        return "raw" if payload else None
    try:
        msg: Any = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(msg, dict):
        return None
    if msg.get("event") in _TWILIO_EVENTS:
        return "twilio"
    if isinstance(msg.get("type"), str):
        return "raw"
    return None


class AutoDecoder:
    def __init__(self, options: DialectOptions, max_undecided: int = 50) -> None:
        self._options = options
        self._inner: Decoder | None = None
        self._undecided = 0
        self._max_undecided = max_undecided
        self.name = "auto"

    @property
    def decided(self) -> bool:
        return self._inner is not None

    def decode(self, direction: Direction, payload: bytes | str, t_ns: int) -> list[Event]:
        if self._inner is None:
            name = guess(payload)
            if name is None:
                self._undecided += 1
                if self._undecided >= self._max_undecided:
                    self._inner = DIALECTS["raw"](self._options)
                    self.name = "undetected"
                return [Anomaly(AnomalyKind.DIALECT_UNDETECTED, direction, t_ns)]
            self._inner = DIALECTS[name](self._options)
            self.name = name
        return self._inner.decode(direction, payload, t_ns)


@register("auto")
def _make(options: DialectOptions) -> AutoDecoder:
    return AutoDecoder(options)
