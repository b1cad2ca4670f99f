"""The decoder interface and the registry of dialects."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from voxproxy.errors import ConfigError
from voxproxy.events import Direction, Event


@dataclass(frozen=True, slots=True)
class DialectOptions:
    """Settings a decoder may need; each dialect reads what applies to it."""

    sample_rate_hz: int = 16000  # raw: caller audio rate (until a start message says otherwise)
    agent_sample_rate_hz: int | None = None  # raw: agent audio rate, default = caller rate


class Decoder(Protocol):
    """Turns wire messages of one call into events. One instance per call."""

    name: str

    def decode(self, direction: Direction, payload: bytes | str, t_ns: int) -> list[Event]:
        """Events carried by one message. Never raises on bad peer input."""
        ...


DIALECTS: dict[str, Callable[[DialectOptions], Decoder]] = {}


def register(
    name: str,
) -> Callable[[Callable[[DialectOptions], Decoder]], Callable[[DialectOptions], Decoder]]:
    def deco(factory: Callable[[DialectOptions], Decoder]) -> Callable[[DialectOptions], Decoder]:
        DIALECTS[name] = factory
        return factory

    return deco


def make_decoder(name: str, options: DialectOptions | None = None) -> Decoder:
    # Import the modules that register themselves.
    from voxproxy.dialects import detect, raw, twilio  # noqa: F401

    try:
        factory = DIALECTS[name]
    except KeyError:
        known = ", ".join(sorted(DIALECTS))
        raise ConfigError(f"unknown dialect {name!r}; known: {known}") from None
    return factory(options or DialectOptions())
