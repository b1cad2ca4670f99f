"""Dialect ``auto``: pick the dialect from the first messages of a call.

Rules, first match wins (the field names are each wire's own, docs/protocols.md sections 2-5):

* a non-empty binary message: ``raw`` (Vonage's audio is binary too, but Vonage
  opens with a ``websocket:connected`` text event, which decides first);
* JSON with an ``event`` starting ``websocket:``, or an agent's ``{"action":
  "clear" | "notify"}``: ``vonage``;
* JSON with a ``type`` the OpenAI Realtime API uses (``session.update``,
  ``input_audio_buffer.append``, ``response.output_audio.delta``, ...):
  ``openai-realtime``; any other string ``type``: ``raw``;
* JSON with an ``event``: Plivo's own vocabulary (``playAudio``, ``checkpoint``,
  ``clearAudio``, ``playedStream``, ``clearedAudio``) means ``plivo``; otherwise the
  stream id key decides: ``streamSid`` = ``twilio``, ``streamId`` = ``plivo``,
  ``stream_id`` = ``telnyx``, ``stream_sid`` = ``exotel`` (also inside ``start``,
  with the call ids ``callSid`` / ``callId`` / ``call_control_id`` / ``call_sid``).
  Twilio's ``connected`` carries ``"protocol": "Call"``.
* A media-stream ``event`` with no id at all (Telnyx's and Exotel's
  ``connected``, an agent's bare ``clear``) is *pending*: it decides nothing and is
  not an anomaly; the next message decides. Agent messages without ids were
  taken as ``twilio`` before the other telephony wires existed, and still are
  once ``max_pending`` of them have passed.

Messages that decide nothing and are not pending (empty, non-JSON, unknown
shapes) are counted as ``dialect_undetected`` until one decides; after
``max_undecided`` of them the call is measured as ``raw`` text-less audio and
the receipt says ``dialect: "undetected"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from voxproxy.core.dialects import exotel, plivo, raw, telnyx, twilio, vonage
from voxproxy.core.dialects._common import loads_object
from voxproxy.core.dialects.base import Decoder, DialectOptions, codec_of
from voxproxy.core.dialects.openai_realtime import CLIENT_EVENTS, SERVER_EVENTS
from voxproxy.core.dialects.openai_realtime import decoder as openai_realtime
from voxproxy.core.errors import UsageError
from voxproxy.core.events import Anomaly, AnomalyKind, Direction, Event

WIRES: Final[dict[str, Callable[[DialectOptions], Decoder]]] = {
    "raw": raw.new_decoder,
    "twilio": twilio.new_decoder,
    "telnyx": telnyx.new_decoder,
    "plivo": plivo.new_decoder,
    "vonage": vonage.new_decoder,
    "exotel": exotel.new_decoder,
    openai_realtime.NAME: openai_realtime.new_decoder,
}
"""Every wire a call's messages can be told apart as, by name: a new decoder of each."""

PENDING: Final = "pending"
"""What :func:`guess` says of a message that belongs to a media-stream wire but
does not say which one."""

_MEDIA_STREAM_EVENTS = frozenset({"connected", "start", "media", "mark", "stop", "dtmf", "clear"})
_PLIVO_EVENTS = frozenset(
    {"playAudio", "checkpoint", "clearAudio", "playedStream", "clearedAudio", "played", "sendDTMF"}
)
_OPENAI_EVENTS = CLIENT_EVENTS | SERVER_EVENTS
_ID_KEYS = (
    ("streamSid", "twilio"),
    ("streamId", "plivo"),
    ("stream_id", "telnyx"),
    ("stream_sid", "exotel"),
)
_CALL_KEYS = (
    ("callSid", "twilio"),
    ("callId", "plivo"),
    ("call_control_id", "telnyx"),
    ("call_sid", "exotel"),
)


def _by_ids(msg: dict[str, Any]) -> str | None:
    for key, dialect in _ID_KEYS:
        if key in msg:
            return dialect
    start = msg.get("start")
    if isinstance(start, dict):
        for key, dialect in (*_ID_KEYS, *_CALL_KEYS):
            if key in start:
                return dialect
    return None


def guess(payload: bytes | str) -> str | None:
    """The dialect one message suggests, :data:`PENDING`, or None."""
    if isinstance(payload, bytes):
        return "raw" if payload else None
    msg = loads_object(payload)
    if msg is None:
        return None
    event = msg.get("event")
    kind = msg.get("type")
    if isinstance(event, str):
        if event.startswith("websocket:"):
            return "vonage"
        if event in _PLIVO_EVENTS:
            return "plivo"
        if event in _MEDIA_STREAM_EVENTS:
            found = _by_ids(msg)
            if found is not None:
                return found
            if event == "connected":
                return "twilio" if msg.get("protocol") == "Call" else PENDING
            return PENDING
        return None
    if isinstance(kind, str):
        return "openai-realtime" if kind in _OPENAI_EVENTS else "raw"
    if msg.get("action") in ("clear", "notify"):
        return "vonage"
    return None


class AutoDecoder:
    def __init__(
        self, options: DialectOptions, max_undecided: int = 50, max_pending: int = 50
    ) -> None:
        if options.secret is None:  # checked now: the wire may turn out to hash (Realtime)
            raise UsageError(
                "the auto decoder may become OpenAI Realtime's, which keys its hashes with "
                "DialectOptions.secret: hand one in (voxproxy.clock.new_secret() for one call)"
            )
        self._options = options
        self._inner: Decoder | None = None
        self._undecided = 0
        self._held: list[tuple[Direction, bytes | str, int]] = []
        self._max_undecided = max_undecided
        self._max_pending = max_pending
        self.name = "auto"

    @property
    def decided(self) -> bool:
        return self._inner is not None

    def codec(self, direction: Direction) -> str | None:
        """The detected dialect's (None until one is)."""
        return codec_of(self._inner, direction) if self._inner is not None else None

    def _choose(self, name: str) -> Decoder:
        inner = self._inner = WIRES[name](self._options)
        self.name = name
        return inner

    def _replay(self, inner: Decoder) -> list[Event]:
        """Pending messages are measured by the dialect they turned out to be."""
        held, self._held = self._held, []
        out: list[Event] = []
        for direction, payload, t_ns in held:
            out.extend(inner.decode(direction, payload, t_ns))
        return out

    def decode(self, direction: Direction, payload: bytes | str, t_ns: int) -> list[Event]:
        inner = self._inner
        if inner is not None:
            return inner.decode(direction, payload, t_ns)
        name = guess(payload)
        if name == PENDING:
            self._held.append((direction, payload, t_ns))
            if len(self._held) < self._max_pending:
                return []
            # What a Twilio-shaped message without ids meant before other wires existed.
            return self._replay(self._choose("twilio"))
        if name is None:
            self._undecided += 1
            if self._undecided >= self._max_undecided:
                self._replay(self._choose("raw"))
                self.name = "undetected"
            return [Anomaly(AnomalyKind.DIALECT_UNDETECTED, direction, t_ns)]
        inner = self._choose(name)
        out = self._replay(inner) if self._held else []
        out.extend(inner.decode(direction, payload, t_ns))
        return out


def new_decoder(options: DialectOptions) -> AutoDecoder:
    return AutoDecoder(options)
