"""Dialect ``vonage``: Vonage Voice API websockets (PROTOCOLS.md section 1, table)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.eventview import views

from voxproxy.audio.pcm import pcm_to_bytes
from voxproxy.dialects import make_decoder
from voxproxy.dialects.base import DialectOptions
from voxproxy.dialects.vonage import VonageAgentWire, VonageCallerWire, VonageDecoder, marker_name
from voxproxy.events import (
    AGENT_TO_CALLER as AGENT,
)
from voxproxy.events import (
    CALLER_TO_AGENT as CALLER,
)
from voxproxy.events import (
    Anomaly,
    AnomalyKind,
    Audio,
    Direction,
    Dtmf,
    Event,
    Flush,
    MarkEcho,
    MarkSent,
    StreamStart,
)

T = 7_000
PCM = np.array([0, 1000, -1000, 8000, -32000, 5], dtype=np.int16)
L16 = pcm_to_bytes(PCM)


def msg(**fields: object) -> str:
    return json.dumps(fields)


def anomaly(kind: AnomalyKind, d: Direction) -> Anomaly:
    return Anomaly(kind, d, T)


CASES: list[tuple[str, Direction, bytes | str, list[Event]]] = [
    (
        "connected",
        CALLER,
        json.dumps(
            {"event": "websocket:connected", "content-type": "audio/l16;rate=16000", "x": "1"}
        ),
        [StreamStart(None, 16000, "pcm_s16le", T)],
    ),
    (
        "connected at 8 kHz",
        CALLER,
        json.dumps({"event": "websocket:connected", "content-type": "audio/l16;rate=8000"}),
        [StreamStart(None, 8000, "pcm_s16le", T)],
    ),
    ("caller audio", CALLER, L16, [Audio(CALLER, PCM, 16000, T)]),
    ("agent audio", AGENT, L16, [Audio(AGENT, PCM, 16000, T)]),
    ("empty binary", AGENT, b"", []),
    ("dtmf", CALLER, msg(event="websocket:dtmf", digit="5", duration=260), [Dtmf(T)]),
    ("clear", AGENT, msg(action="clear"), [Flush(T, "clear")]),
    ("cleared", CALLER, msg(event="websocket:cleared"), []),
    (
        "notify",
        AGENT,
        msg(action="notify", payload={"b": 2, "a": "resp-1"}),
        [MarkSent('{"a":"resp-1","b":2}', T)],
    ),
    (
        "notify echo",
        CALLER,
        msg(event="websocket:notify", payload={"a": "resp-1", "b": 2}),
        [MarkEcho('{"a":"resp-1","b":2}', T)],
    ),
    ("unknown action", AGENT, msg(action="transfer"), [anomaly(AnomalyKind.UNKNOWN_EVENT, AGENT)]),
    (
        "unknown event",
        CALLER,
        msg(event="websocket:media:update"),
        [anomaly(AnomalyKind.UNKNOWN_EVENT, CALLER)],
    ),
]

BAD: list[tuple[str, Direction, bytes | str, AnomalyKind]] = [
    ("malformed JSON", CALLER, "{", AnomalyKind.MALFORMED),
    ("agent text without an action", AGENT, msg(event="clearAudio"), AnomalyKind.MALFORMED),
    ("caller text without an event", CALLER, msg(action="clear"), AnomalyKind.MALFORMED),
    ("notify without a payload", AGENT, msg(action="notify"), AnomalyKind.MALFORMED),
    ("notify echo without a payload", CALLER, msg(event="websocket:notify"), AnomalyKind.MALFORMED),
    (
        "an unknown content type",
        CALLER,
        json.dumps({"event": "websocket:connected", "content-type": "audio/opus"}),
        AnomalyKind.BAD_AUDIO,
    ),
    (
        "a rate Vonage does not send",
        CALLER,
        json.dumps({"event": "websocket:connected", "content-type": "audio/l16;rate=44100"}),
        AnomalyKind.BAD_AUDIO,
    ),
]


@pytest.mark.parametrize(
    ("name", "direction", "message", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_decode(
    name: str, direction: Direction, message: bytes | str, expected: list[Event]
) -> None:
    del name
    assert views(VonageDecoder(DialectOptions()).decode(direction, message, T)) == views(expected)


@pytest.mark.parametrize(("name", "direction", "message", "kind"), BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_an_anomaly(
    name: str, direction: Direction, message: bytes | str, kind: AnomalyKind
) -> None:
    del name
    assert VonageDecoder(DialectOptions()).decode(direction, message, T) == [
        anomaly(kind, direction)
    ]


def test_the_connected_rate_applies_to_both_directions_and_odd_bytes_carry() -> None:
    dec = VonageDecoder(DialectOptions())
    dec.decode(CALLER, VonageCallerWire(8000).connected(), T)
    a = dec.decode(AGENT, L16[:3], T)
    b = dec.decode(AGENT, L16[3:], T)
    got = np.concatenate([e.pcm for e in a + b if isinstance(e, Audio)])
    np.testing.assert_array_equal(got, PCM)
    assert all(e.sample_rate_hz == 8000 for e in a + b if isinstance(e, Audio))


def test_wires_round_trip() -> None:
    caller = VonageCallerWire(16000, {"caller_ref": "x"})
    agent = VonageAgentWire()
    dec = make_decoder("vonage")
    payload = {"name": "resp-3"}
    steps: list[tuple[Direction, bytes | str, list[Event]]] = [
        (CALLER, caller.connected(), [StreamStart(None, 16000, "pcm_s16le", T)]),
        (CALLER, caller.audio(PCM), [Audio(CALLER, PCM, 16000, T)]),
        (AGENT, agent.audio(PCM), [Audio(AGENT, PCM, 16000, T)]),
        (AGENT, agent.notify(payload), [MarkSent(marker_name(payload), T)]),
        (CALLER, caller.notify(payload), [MarkEcho(marker_name(payload), T)]),
        (AGENT, agent.clear(), [Flush(T, "clear")]),
        (CALLER, caller.cleared(), []),
        (CALLER, caller.dtmf("3"), [Dtmf(T)]),
    ]
    for direction, message, expected in steps:
        assert views(dec.decode(direction, message, T)) == views(expected), message
    assert json.loads(caller.connected())["caller_ref"] == "x"


def test_registered_name() -> None:
    assert make_decoder("vonage").name == "vonage"
