"""What every dialect test module shares: its tables of wire messages and the tests over them.

A dialect module's tests are tables of wire messages and the events they must give, run
both ways: ``CASES`` of good messages with the events they
decode to, ``BAD`` messages with the one anomaly each must become, and round trips of
the dialect's own builders. :func:`table_tests` makes the tests that run those tables,
so that a module holds only its wire's facts::

    test_decode, test_bad_input_is_an_anomaly, test_registered_name = table_tests(
        "twilio", TwilioDecoder, T, CASES, BAD
    )
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from support.eventview import views
from voxproxy.core import events as ev
from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import Decoder, DialectOptions
from voxproxy.core.events import AGENT_TO_CALLER as AGENT
from voxproxy.core.events import CALLER_TO_AGENT as CALLER
from voxproxy.core.events import Anomaly, AnomalyKind, Direction, Event

__all__ = [
    "AGENT",
    "CALLER",
    "PCM",
    "AnomalyKind",
    "Bad",
    "Case",
    "Direction",
    "Event",
    "Kind",
    "Step",
    "anomaly_at",
    "b64",
    "case_tests",
    "msg",
    "round_trip",
    "table_tests",
    "twilio_round_trip",
    "twilio_vocabulary",
    "unknown_at",
]

Kind = AnomalyKind
"""The anomaly kinds, by a name short enough for one-line table rows."""

Case = tuple[str, Direction, bytes | str, list[Event]]
"""(name, direction, message, the events a fresh decoder makes of it)"""
Bad = tuple[str, Direction, bytes | str, AnomalyKind]
"""(name, direction, message, the kind of the one anomaly it must become)"""
Step = tuple[Direction, bytes | str, list[Event]]
"""One message of a conversation, and the events it decodes to there"""

PCM = np.array([0, 1000, -1000, 8000, -32000, 5], dtype=np.int16)
"""A few samples across the range: silence, both signs, near full scale."""


def msg(**fields: object) -> str:
    """A JSON text message, written as a peer might (``json.dumps`` spacing)."""
    return json.dumps(fields)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def anomaly_at(t_ns: int) -> Callable[[AnomalyKind, Direction], Anomaly]:
    """``anomaly(kind, direction)``: the anomaly a message at ``t_ns`` becomes."""

    def anomaly(kind: AnomalyKind, d: Direction) -> Anomaly:
        return Anomaly(kind, d, t_ns)

    return anomaly


def unknown_at(t_ns: int) -> Callable[[Direction], list[Event]]:
    """``unknown(direction)``: the events of a message of a kind its direction never sends."""

    def unknown(d: Direction) -> list[Event]:
        return [Anomaly(AnomalyKind.UNKNOWN_EVENT, d, t_ns)]

    return unknown


def round_trip(dec: Decoder, steps: list[Step], t_ns: int) -> None:
    """Feed ``steps`` to one decoder in order; each must decode to its events."""
    for direction, message, expected in steps:
        assert views(dec.decode(direction, message, t_ns)) == views(expected), message


def case_tests(new: Callable[[], Any], t_ns: int, cases: list[Case]) -> Callable[..., None]:
    """A test that each case, on a fresh decoder from ``new``, decodes to exactly its events."""

    @pytest.mark.parametrize(
        ("case", "direction", "message", "expected"), cases, ids=[c[0] for c in cases]
    )
    def test(case: str, direction: Direction, message: bytes | str, expected: list[Event]) -> None:
        del case
        assert views(new().decode(direction, message, t_ns)) == views(expected)

    return test


def table_tests(
    name: str,
    new: Callable[[], Any],
    t_ns: int,
    cases: list[Case],
    bad: list[Bad],
    after_bad: Callable[[Any, Direction], None] | None = None,
) -> tuple[Callable[..., None], Callable[..., None], Callable[[], None]]:
    """The tests of a dialect's tables, each case on a fresh decoder from ``new``:
    ``test_decode`` (a case decodes to exactly its events), ``test_bad_input_is_an_anomaly``
    (a bad message is exactly one anomaly of its kind, in its direction, at its time; then
    ``after_bad(decoder, direction)`` checks what the decoder does next) and
    ``test_registered_name`` (``make_decoder(name)`` gives this dialect)."""

    test_decode = case_tests(new, t_ns, cases)

    @pytest.mark.parametrize(("case", "direction", "message", "kind"), bad, ids=[c[0] for c in bad])
    def test_bad_input_is_an_anomaly(
        case: str, direction: Direction, message: bytes | str, kind: AnomalyKind
    ) -> None:
        del case
        dec = new()
        assert dec.decode(direction, message, t_ns) == [Anomaly(kind, direction, t_ns)]
        if after_bad is not None:
            after_bad(dec, direction)

    def test_registered_name() -> None:
        dec = make_decoder(name, DialectOptions(secret=b"kit"))
        assert dec.name == name
        assert type(dec) is type(new())

    return test_decode, test_bad_input_is_an_anomaly, test_registered_name


def twilio_vocabulary(
    t_ns: int, id_key: str, stream: str, payload: str, heard: Callable[[Direction], ev.Audio]
) -> tuple[list[Case], list[Bad]]:
    """The cases every wire of the Twilio vocabulary (Twilio, Telnyx, Exotel:
    docs/protocols.md sections 3-4) shares, with the wire's stream id key: ``media`` with a
    base64 ``payload`` (whose audio in a direction is ``heard(direction)``), ``mark`` both
    ways, ``clear``, ``dtmf`` and ``stop``, each only in its own direction; then the
    messages each must count as bad."""
    at = {id_key: stream}
    unknown = AnomalyKind.UNKNOWN_EVENT
    media = {"track": "inbound", "chunk": "2", "timestamp": "20", "payload": payload}
    cases: list[Case] = [
        ("inbound media", CALLER, msg(event="media", **at, media=media), [heard(CALLER)]),
        (
            "media without a track is inbound",
            CALLER,
            msg(event="media", media={"payload": payload}),
            [heard(CALLER)],
        ),
        (
            "outbound-track media is not caller audio",
            CALLER,
            msg(event="media", media={"track": "outbound", "payload": payload}),
            [],
        ),
        (
            "mark echo",
            CALLER,
            msg(event="mark", **at, mark={"name": "m-1"}),
            [ev.MarkEcho("m-1", t_ns)],
        ),
        ("dtmf", CALLER, msg(event="dtmf", **at, dtmf={"digit": "5"}), [ev.Dtmf(t_ns)]),
        ("stop", CALLER, msg(event="stop", **at, stop={}), [ev.StreamStop(t_ns)]),
        (
            "agent media",
            AGENT,
            msg(event="media", **at, media={"payload": payload}),
            [heard(AGENT)],
        ),
        (
            "agent media: the track field does not matter",
            AGENT,
            msg(event="media", media={"track": "outbound", "payload": payload}),
            [heard(AGENT)],
        ),
        (
            "agent mark",
            AGENT,
            msg(event="mark", **at, mark={"name": "r-0"}),
            [ev.MarkSent("r-0", t_ns)],
        ),
        ("agent clear", AGENT, msg(event="clear", **at), [ev.Flush(t_ns, "clear")]),
        (
            "clear from the caller side",
            CALLER,
            msg(event="clear"),
            [Anomaly(unknown, CALLER, t_ns)],
        ),
        ("stop from the agent side", AGENT, msg(event="stop"), [Anomaly(unknown, AGENT, t_ns)]),
        (
            "start from the agent side",
            AGENT,
            msg(event="start", start={}),
            [Anomaly(unknown, AGENT, t_ns)],
        ),
        ("unknown event", CALLER, msg(event="hangup"), [Anomaly(unknown, CALLER, t_ns)]),
    ]
    malformed = AnomalyKind.MALFORMED
    bad: list[Bad] = [
        ("malformed JSON", CALLER, '{"event": "media", "media": {', malformed),
        ("not JSON", AGENT, "clear", malformed),
        ("JSON array", CALLER, "[]", malformed),
        (
            "invalid base64",
            CALLER,
            msg(event="media", media={"payload": "a*b"}),
            AnomalyKind.INVALID_BASE64,
        ),
        ("agent media missing payload", AGENT, msg(event="media", media={}), malformed),
        ("media not an object", CALLER, msg(event="media", media="AAAA"), malformed),
        ("mark without a name", AGENT, msg(event="mark", mark={}), malformed),
        ("mark name not a string", CALLER, msg(event="mark", mark={"name": 3}), malformed),
        ("start not an object", CALLER, msg(event="start", start="x"), malformed),
        ("binary from the caller", CALLER, b"\x00\x01", AnomalyKind.UNEXPECTED_BINARY),
    ]
    return cases, bad


def twilio_round_trip(
    dec: Decoder,
    caller: Any,
    agent: Any,
    t_ns: int,
    start: list[Event],
    frames: tuple[tuple[Any, Event], tuple[Any, Event]],
    custom: dict[str, str] | None = None,
) -> None:
    """A call on a wire of the Twilio vocabulary through its two builders, decoded by one
    decoder: open (``start``: the events of the start message), a caller frame and an agent
    frame (``frames``: each one's builder input and the audio it decodes to), a marker
    placed and echoed, a flush, a digit, the end."""
    (said, heard_caller), (answered, heard_agent) = frames
    steps: list[Step] = [
        (CALLER, caller.connected(), []),
        (CALLER, caller.start(custom), start),
        (CALLER, caller.media(said), [heard_caller]),
        (AGENT, agent.media(answered), [heard_agent]),
        (AGENT, agent.mark("resp-1"), [ev.MarkSent("resp-1", t_ns)]),
        (CALLER, caller.mark("resp-1"), [ev.MarkEcho("resp-1", t_ns)]),
        (AGENT, agent.clear(), [ev.Flush(t_ns, "clear")]),
        (CALLER, caller.dtmf("4"), [ev.Dtmf(t_ns)]),
        (CALLER, caller.stop(), [ev.StreamStop(t_ns)]),
    ]
    round_trip(dec, steps, t_ns)
