"""What a scripted caller sends on each telephony wire (the caller side of a media stream).

One small adapter per wire over the dialect modules' caller-side builders
(``voxproxy.core.dialects.*.XCallerWire``): the messages that open the stream, one caller
frame as a media message, the answer to an agent's playback marker (Twilio, Telnyx and
Exotel echo a ``mark``; Plivo answers a ``checkpoint`` with ``playedStream``; Vonage
answers a ``notify`` with ``websocket:notify``), and the messages that close it. The
wire facts behind them are in the dialect modules' docstrings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import orjson

from voxproxy.core.audio.g711 import pcm_to_ulaw
from voxproxy.core.audio.pcm import pcm_to_bytes
from voxproxy.core.dialects.exotel import ExotelCallerWire
from voxproxy.core.dialects.plivo import PlivoCallerWire
from voxproxy.core.dialects.raw import RawWire
from voxproxy.core.dialects.telnyx import TelnyxCallerWire
from voxproxy.core.dialects.twilio import TwilioCallerWire
from voxproxy.core.dialects.vonage import VonageCallerWire
from voxproxy.core.events import Pcm

Wire = Literal["raw", "twilio", "telnyx", "plivo", "vonage", "exotel"]
WIRES: tuple[Wire, ...] = ("raw", "twilio", "telnyx", "plivo", "vonage", "exotel")
TELEPHONY_RATE_HZ = 8000  # G.711 (Twilio, Telnyx, Plivo) and Exotel's 8 kHz slin


class CallerWire(Protocol):
    rate_hz: int

    def opening(self) -> list[bytes | str]: ...
    def media(self, frame: Pcm) -> bytes | str: ...
    def echo(self, name: str) -> bytes | str | None: ...
    def closing(self) -> list[bytes | str]: ...


@dataclass
class _Raw:
    rate_hz: int
    call_id: str

    def opening(self) -> list[bytes | str]:
        return [RawWire.start(self.rate_hz, self.call_id)]

    def media(self, frame: Pcm) -> bytes | str:
        return pcm_to_bytes(frame)

    def echo(self, name: str) -> bytes | str | None:
        return None

    def closing(self) -> list[bytes | str]:
        return []


class _StreamCaller(Protocol):
    def connected(self) -> str: ...
    def start(self, custom: dict[str, str] | None = None) -> str: ...
    def media(self, payload: Any, /) -> str: ...
    def mark(self, name: str) -> str: ...
    def stop(self) -> str: ...


@dataclass
class _MediaStream:
    """Twilio, Telnyx and Exotel: ``connected`` and ``start`` open the stream, a frame is
    ``encode``d into a ``media`` message, a ``mark`` answers a marker, ``stop`` closes it."""

    wire: _StreamCaller
    encode: Callable[[Pcm], object]
    custom: dict[str, str] | None = None
    rate_hz: int = TELEPHONY_RATE_HZ

    def opening(self) -> list[bytes | str]:
        return [self.wire.connected(), self.wire.start(self.custom)]

    def media(self, frame: Pcm) -> bytes | str:
        return self.wire.media(self.encode(frame))

    def echo(self, name: str) -> bytes | str | None:
        return self.wire.mark(name)

    def closing(self) -> list[bytes | str]:
        return [self.wire.stop()]


@dataclass
class _Plivo:
    call_id: str
    rate_hz: int = TELEPHONY_RATE_HZ

    def __post_init__(self) -> None:
        self.wire = PlivoCallerWire("st-" + self.call_id, self.call_id)

    def opening(self) -> list[bytes | str]:
        return [self.wire.start()]

    def media(self, frame: Pcm) -> bytes | str:
        return self.wire.media(frame)

    def echo(self, name: str) -> bytes | str | None:
        return self.wire.played_stream(name)

    def closing(self) -> list[bytes | str]:
        return []


@dataclass
class _Vonage:
    rate_hz: int

    def __post_init__(self) -> None:
        self.wire = VonageCallerWire(self.rate_hz)

    def opening(self) -> list[bytes | str]:
        return [self.wire.connected()]

    def media(self, frame: Pcm) -> bytes | str:
        return self.wire.audio(frame)

    def echo(self, name: str) -> bytes | str | None:
        # The decoder names a notify by its payload's canonical JSON: answer with it.
        return self.wire.notify(orjson.loads(name))

    def closing(self) -> list[bytes | str]:
        return []


def _slin(frame: Pcm) -> Pcm:
    return frame  # Exotel's builder writes the 16-bit PCM itself


def caller_wire(
    wire: Wire, call_id: str, sample_rate_hz: int, custom: dict[str, str] | None = None
) -> CallerWire:
    """The caller side of ``wire`` for one call. ``sample_rate_hz``: raw and Vonage (L16 at
    a declared rate); ``custom``: Twilio ``customParameters``, Telnyx ``custom_parameters``."""
    custom = custom or {}
    if wire == "raw":
        return _Raw(sample_rate_hz, call_id)
    if wire == "twilio":
        return _MediaStream(TwilioCallerWire("MZ" + call_id[2:], call_id), pcm_to_ulaw, custom)
    if wire == "telnyx":
        telnyx = TelnyxCallerWire("st-" + call_id, "v3:" + call_id)
        return _MediaStream(telnyx, pcm_to_ulaw, custom)
    if wire == "plivo":
        return _Plivo(call_id)
    if wire == "vonage":
        return _Vonage(sample_rate_hz)
    return _MediaStream(ExotelCallerWire("st-" + call_id, call_id), _slin)
