"""The decoder interface: what every dialect's decoder is, and the options it reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from voxproxy.core.events import Direction, Event


@dataclass(frozen=True, slots=True)
class DialectOptions:
    """Settings a decoder may need; each dialect reads what applies to it."""

    sample_rate_hz: int = 16000  # raw: caller audio rate (until a start message says otherwise)
    agent_sample_rate_hz: int | None = None  # raw: agent audio rate, default = caller rate
    # The secret for keyed hashes of what a wire carries (tool arguments and results on
    # OpenAI Realtime), handed in by the shell: the deployment's, or one it drew for the
    # call or the run (voxproxy.clock.new_secret). A wire that hashes refuses None.
    secret: bytes | None = field(default=None, repr=False)
    # The declared vocabulary of tool names (``--event-names``): a tool name the wire
    # carries (OpenAI Realtime) is kept as it is only when declared, or, with none
    # declared, when it has the shape of a name; any other becomes its keyed hash
    # (voxproxy.core.ids.safe_name: the event API's rule).
    names: frozenset[str] | None = None


class Decoder(Protocol):
    """Turns wire messages of one call into events. One instance per call."""

    name: str

    def decode(self, direction: Direction, payload: bytes | str, t_ns: int) -> list[Event]:
        """Events carried by one message. Never raises on bad peer input."""
        ...


def codec_of(decoder: object, direction: Direction) -> str | None:
    """The encoding a direction's audio crosses the wire in (voxproxy's names: ``ulaw``,
    ``alaw``, ``pcm_s16le`` ...), as far as its decoder knows (``codec(direction)``, an
    optional method of a decoder): None when it does not say."""
    codec = getattr(decoder, "codec", None)
    if not callable(codec):
        return None
    found = codec(direction)
    return found if isinstance(found, str) else None
