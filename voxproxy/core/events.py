"""The normalized vocabulary of the measurement plane.

Dialect decoders turn wire messages into these events; the session consumes
them. Every event carries ``t_ns``, the proxy's monotonic arrival time of the
message it came from. Wire names stay inside the dialect modules; the names here
are voxproxy's own.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal, get_args

# The vocabulary's base types, re-exported: the direction of a message, and audio
# carried by one message, decoded to 16-bit PCM (made for nearly every message, so
# compiled with the measurement core in its own module).
from voxproxy.core.audio.event import Audio as Audio
from voxproxy.core.audio.event import Pcm as Pcm
from voxproxy.core.direction import AGENT_TO_CALLER as AGENT_TO_CALLER
from voxproxy.core.direction import CALLER_TO_AGENT as CALLER_TO_AGENT
from voxproxy.core.direction import Direction as Direction


class AnomalyKind(enum.StrEnum):
    """Why a message could not be measured. Each is counted in the receipt."""

    MALFORMED = "malformed"  # not valid JSON, or a required field missing / mistyped
    INVALID_BASE64 = "invalid_base64"
    UNKNOWN_EVENT = "unknown_event"
    UNEXPECTED_BINARY = "unexpected_binary"  # binary frame where the wire uses text
    UNEXPECTED_TEXT = "unexpected_text"  # text frame where the wire uses binary
    BAD_AUDIO = "bad_audio"  # audio the core cannot use (odd length, unknown encoding)
    DIALECT_UNDETECTED = "dialect_undetected"
    OVERSIZED = "oversized"
    MEASUREMENT_ERROR = "measurement_error"  # a bug in the measurement plane, caught
    # Bounds on what a peer can make the proxy keep for a call (README, "Limits"):
    REPEATED_START = "repeated_start"  # a later stream start named another call: ignored
    MARK_NAME_TOO_LONG = "mark_name_too_long"  # a mark name over MAX_MARK_NAME_CHARS
    MARKS_OVER_LIMIT = "marks_over_limit"  # over MAX_PENDING_MARKS unanswered: oldest dropped
    EVENTS_OVER_LIMIT = "events_over_limit"  # tool/state events past MAX_TOOL_EVENTS: dropped
    # Caller audio ahead of real time (more than the call's time so far, beyond a tolerance):
    # counted per message; the audio beyond the bound is not analysed (still forwarded).
    CALLER_AUDIO_AHEAD = "caller_audio_ahead"
    # Agent audio queued so far ahead of real time (over a minute) that only its place on the
    # playout timeline is kept, not its samples: counted per message; it is not analysed.
    AGENT_AUDIO_AHEAD = "agent_audio_ahead"
    # The proxy's measurement fell behind its forwarding (a saturated core) and shed this
    # message's audio: counted per message; the audio is not analysed (still forwarded),
    # and figures near it are withheld (reason measurement_shed).
    MEASUREMENT_SHED = "measurement_shed"
    # A message the proxy could not forward: the other leg was not open (still in its
    # handshake, closing, or gone). Counted per message; it is not measured either.
    UNDELIVERED = "undelivered"
    # A message beyond the relay's bound on messages a second in its direction
    # (RelayConfig.max_messages_per_s): a flood. Forwarded and counted in the traffic, not
    # measured; counted per message.
    MESSAGES_OVER_RATE = "messages_over_rate"


@dataclass(frozen=True, slots=True)
class Flush:
    """The agent asked the far end to drop audio it has not yet played.

    On wires where the far end (the client) flushes its own playout and says how
    much it played (OpenAI Realtime ``conversation.item.truncate``),
    ``claimed_played_ms`` is that claim, in ms of the item ``item_id``'s audio.
    """

    t_ns: int
    kind: str  # the wire's own name, e.g. "clear"
    claimed_played_ms: float | None = None
    item_id: str | None = None  # a wire id, kept in memory only (never in a receipt)


@dataclass(frozen=True, slots=True)
class MarkSent:
    """The agent placed a playback checkpoint after the audio it sent so far."""

    name: str
    t_ns: int


@dataclass(frozen=True, slots=True)
class MarkEcho:
    """The far end reports that playback reached a checkpoint (or was cleared)."""

    name: str
    t_ns: int


@dataclass(frozen=True, slots=True)
class StreamStart:
    """The wire announced the call: its own call id and media format."""

    wire_call_id: str | None
    sample_rate_hz: int | None
    encoding: str | None
    t_ns: int


@dataclass(frozen=True, slots=True)
class StreamStop:
    """The wire announced the end of the media stream."""

    t_ns: int


@dataclass(frozen=True, slots=True)
class Dtmf:
    """A key press. The digit is content and is never kept."""

    t_ns: int


@dataclass(frozen=True, slots=True)
class Transcript:
    """What the agent reports it heard (or said). Text never reaches a receipt."""

    role: str
    text: str
    final: bool
    t_ns: int


@dataclass(frozen=True, slots=True)
class Anomaly:
    """A message the dialect could not make sense of. It was still forwarded."""

    kind: AnomalyKind
    direction: Direction
    t_ns: int


ToolKind = Literal[
    "state.updated",
    "tool.started",
    "tool.finished",
    "tool.cancelled",
    "backend.verified",
    "confirmation",
    "outcome.verified",
]
TOOL_EVENT_KINDS: tuple[str, ...] = get_args(ToolKind)
"""The events of MEASUREMENT.md section 5, by their names there."""

RESPONSE_CANCELLED_WITH_TOOL = "tool.response_cancelled"
"""Seen on the wire (OpenAI Realtime): the model response that issued the call
``operation_id`` was cancelled while the call was in flight (its output not yet
returned). Not a cancel of the tool itself: the tool may still run and write."""


@dataclass(frozen=True, slots=True)
class ToolEvent:
    """A tool-call, state or outcome event (MEASUREMENT.md section 5). Content-free.

    Names of tools are kept; arguments, results and values only ever appear as
    keyed hashes (``*_hash``), computed before the event reaches the core.
    ``source`` says where it was observed: ``"wire"`` (a dialect saw it) or
    ``"api"`` (posted on the event API).
    """

    kind: str  # one of TOOL_EVENT_KINDS
    t_ns: int
    source: str = "api"
    operation_id: str | None = None
    tool: str | None = None
    attempt: int | None = None
    state_version: int | None = None
    args_hash: str | None = None
    idempotency_key: str | None = None  # a keyed hash when it came off the wire
    status: str | None = None  # tool.finished: ok, error, timeout, malformed
    result_hash: str | None = None
    field: str | None = None
    version: int | None = None
    value_hash: str | None = None
    verified: bool | None = None


@dataclass(frozen=True, slots=True)
class StageMark:
    """A stage of a turn that the wire shows (e.g. the server's ``speech_stopped``).

    ``name`` is voxproxy's own stage name; ``at_ns`` is when the stage happened on
    the proxy clock when the wire says so (mapped from an audio timeline), else
    the arrival time ``t_ns``.
    """

    name: str
    t_ns: int
    at_ns: int | None = None
    detail: str | None = None  # a content-free qualifier (a status, a reason)


Event = (
    Audio
    | Flush
    | MarkSent
    | MarkEcho
    | StreamStart
    | StreamStop
    | Dtmf
    | Transcript
    | Anomaly
    | ToolEvent
    | StageMark
)
