"""Small helpers shared by the JSON wire codecs (pure, allocation-light)."""

from __future__ import annotations

import binascii
from typing import Any

import numpy as np
import orjson

from voxproxy.core.audio.g711 import alaw_to_pcm, ulaw_to_pcm
from voxproxy.core.audio.pcm import bytes_to_pcm
from voxproxy.core.events import Anomaly, AnomalyKind, Direction, Pcm


def b64decode(payload: object) -> bytes | None:
    """Strict base64 of a JSON string value, or None when it is not valid base64."""
    if not isinstance(payload, str):
        return None
    try:
        return binascii.a2b_base64(payload.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None


def b64_audio(value: object, direction: Direction, t_ns: int) -> bytes | Anomaly:
    """The bytes a wire's base64 audio field carries, or the anomaly it is: a string that
    is not valid base64, or a field that is no string at all (missing, a number...)."""
    data = b64decode(value)
    if data is not None:
        return data
    kind = AnomalyKind.INVALID_BASE64 if isinstance(value, str) else AnomalyKind.MALFORMED
    return Anomaly(kind, direction, t_ns)


def b64encode(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def loads_object(payload: bytes | str) -> dict[str, Any] | None:
    """A JSON object, or None for anything else (invalid JSON, arrays, scalars)."""
    try:
        msg: Any = orjson.loads(payload)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) else None


def text_object(direction: Direction, payload: bytes | str, t_ns: int) -> dict[str, Any] | Anomaly:
    """The JSON object a text-only wire's message carries, or the anomaly the message is:
    binary where only text is spoken, or text that is not a JSON object."""
    if not isinstance(payload, str):
        return Anomaly(AnomalyKind.UNEXPECTED_BINARY, direction, t_ns)
    msg = loads_object(payload)
    if msg is None:
        return Anomaly(AnomalyKind.MALFORMED, direction, t_ns)
    return msg


def dumps(obj: object) -> str:
    """Compact JSON text, as the wire builders send it."""
    return orjson.dumps(obj).decode("utf-8")


def int_field(value: object) -> int | None:
    """A JSON number or numeric string as an int (wires disagree on which they send)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


ENCODINGS = ("pcm_s16le", "pcm_s16be", "ulaw", "alaw")
"""Sample encodings the telephony and realtime wires carry, by voxproxy's names."""


class PcmDecoder:
    """Decodes one direction's audio bytes; a trailing odd byte of 16-bit PCM is carried."""

    __slots__ = ("_carry", "encoding")

    def __init__(self, encoding: str) -> None:
        if encoding not in ENCODINGS:
            raise ValueError(f"unknown encoding {encoding!r}")
        self.encoding = encoding
        self._carry = b""

    def set_encoding(self, encoding: str) -> None:
        if encoding not in ENCODINGS:
            raise ValueError(f"unknown encoding {encoding!r}")
        if encoding != self.encoding:
            self.encoding = encoding
            self._carry = b""

    def decode(self, data: bytes) -> Pcm:
        enc = self.encoding
        if enc == "ulaw":
            return ulaw_to_pcm(data)
        if enc == "alaw":
            return alaw_to_pcm(data)
        if self._carry:
            data = self._carry + data
            self._carry = b""
        if len(data) % 2:
            self._carry = data[-1:]
            data = data[:-1]
        if enc == "pcm_s16le":
            return bytes_to_pcm(data)
        be: Pcm = np.frombuffer(data, dtype=">i2").astype(np.int16)
        return be
