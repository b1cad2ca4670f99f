"""Dialect ``auto`` on every wire: each is told apart from its first messages."""

from __future__ import annotations

import numpy as np
import pytest
from support.dialectkit import AGENT, CALLER

from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.detect import PENDING, AutoDecoder, guess
from voxproxy.core.dialects.exotel import ExotelAgentWire, ExotelCallerWire
from voxproxy.core.dialects.openai_realtime import OpenAIRealtimeAgentWire, OpenAIRealtimeCallerWire
from voxproxy.core.dialects.plivo import PlivoAgentWire, PlivoCallerWire
from voxproxy.core.dialects.raw import RawWire
from voxproxy.core.dialects.telnyx import TelnyxAgentWire, TelnyxCallerWire
from voxproxy.core.dialects.twilio import TwilioAgentWire, TwilioCallerWire
from voxproxy.core.dialects.vonage import VonageAgentWire, VonageCallerWire
from voxproxy.core.events import Anomaly, AnomalyKind, Audio, Direction, StreamStart

# The shell hands every decoder that may hash (auto, OpenAI Realtime) its secret.
OPTIONS = DialectOptions(secret=b"detect")

PCM = np.array([100, -100, 2000, -2000], dtype=np.int16)

# Each wire's opening, in the order a call really starts, and the dialect it must decide.
OPENINGS: list[tuple[str, list[tuple[Direction, bytes | str]]]] = [
    (
        "twilio",
        [
            (CALLER, TwilioCallerWire("MZ1", "CA1").connected()),
            (CALLER, TwilioCallerWire("MZ1", "CA1").start()),
        ],
    ),
    (
        "telnyx",
        [
            (CALLER, TelnyxCallerWire("st-1", "v3:cc").connected()),
            (CALLER, TelnyxCallerWire("st-1", "v3:cc").start()),
        ],
    ),
    ("plivo", [(CALLER, PlivoCallerWire("st-1", "call-1").start())]),
    (
        "exotel",
        [
            (CALLER, ExotelCallerWire("st-1", "call-1").connected()),
            (CALLER, ExotelCallerWire("st-1", "call-1").start()),
        ],
    ),
    ("vonage", [(CALLER, VonageCallerWire(16000).connected())]),
    ("openai-realtime", [(CALLER, OpenAIRealtimeCallerWire().session_update())]),
    ("openai-realtime", [(AGENT, OpenAIRealtimeAgentWire().session_created("sess_1"))]),
    ("openai-realtime", [(CALLER, OpenAIRealtimeCallerWire.append(b"\x00\x00"))]),
    ("raw", [(CALLER, RawWire.start(16000))]),
    ("raw", [(CALLER, b"\x00\x00")]),
]


@pytest.mark.parametrize(
    ("dialect", "opening"), OPENINGS, ids=[f"{o[0]}-{i}" for i, o in enumerate(OPENINGS)]
)
def test_each_wire_is_detected_without_anomalies(
    dialect: str, opening: list[tuple[Direction, bytes | str]]
) -> None:
    dec = make_decoder("auto", OPTIONS)
    events = []
    for i, (direction, message) in enumerate(opening):
        events += dec.decode(direction, message, i)
    assert dec.name == dialect
    assert not any(isinstance(e, Anomaly) for e in events), events
    starts = [e for e in events if isinstance(e, StreamStart)]
    if dialect not in ("raw",) and not isinstance(opening[-1][1], bytes):
        assert len(starts) <= 1


AGENT_FIRST: list[tuple[str, bytes | str]] = [
    ("twilio", TwilioAgentWire("MZ1").clear()),
    ("plivo", PlivoAgentWire("st-1").clear_audio()),
    ("plivo", PlivoAgentWire("st-1").checkpoint("m")),
    ("exotel", ExotelAgentWire("st-1").mark("m")),
    ("vonage", VonageAgentWire.clear()),
    ("vonage", VonageAgentWire.notify({"n": 1})),
]


@pytest.mark.parametrize(("dialect", "message"), AGENT_FIRST)
def test_agent_messages_that_decide(dialect: str, message: bytes | str) -> None:
    assert guess(message) == dialect


def test_a_pending_message_is_measured_once_the_wire_is_known() -> None:
    dec = make_decoder("auto", OPTIONS)
    wire = TelnyxCallerWire("st-1", "v3:cc")
    # Telnyx's agent media carries no stream id: on its own it decides nothing ...
    assert guess(TelnyxAgentWire.media(b"\xff\xff")) == PENDING
    assert dec.decode(AGENT, TelnyxAgentWire.media(b"\xff\xff"), 1) == []
    assert dec.decode(CALLER, wire.connected(), 2) == []
    assert not isinstance(dec, AutoDecoder) or not dec.decided
    # ... the start decides, and the held agent audio is measured then, at its own time.
    events = dec.decode(CALLER, wire.start(), 3)
    assert dec.name == "telnyx"
    assert [type(e).__name__ for e in events] == ["Audio", "StreamStart"]
    assert isinstance(events[0], Audio) and events[0].t_ns == 1 and events[0].direction is AGENT


def test_too_many_pending_messages_fall_back_to_twilio() -> None:
    dec = AutoDecoder(OPTIONS, max_pending=3)
    bare = '{"event": "media", "media": {"payload": "//8="}}'
    assert dec.decode(AGENT, bare, 0) == []
    assert dec.decode(AGENT, bare, 1) == []
    events = dec.decode(AGENT, bare, 2)
    assert dec.name == "twilio"
    assert [e.t_ns for e in events] == [0, 1, 2]


def test_nothing_matches_is_a_clear_anomaly() -> None:
    dec = make_decoder("auto", OPTIONS)
    for i, message in enumerate(['{"hello": 1}', "bonjour", '{"event": "ring"}', b""]):
        assert dec.decode(CALLER, message, i) == [
            Anomaly(AnomalyKind.DIALECT_UNDETECTED, CALLER, i)
        ]
    assert dec.name == "auto"


def test_openai_and_raw_types_are_told_apart() -> None:
    assert guess('{"type": "response.output_audio.delta", "delta": ""}') == "openai-realtime"
    assert guess('{"type": "input_audio_buffer.speech_started"}') == "openai-realtime"
    assert guess('{"type": "start", "sample_rate": 16000}') == "raw"
    assert guess('{"type": "clear"}') == "raw"
    assert guess('{"type": "transcript", "text": "x"}') == "raw"


def test_vonage_audio_after_detection_is_measured_at_the_announced_rate() -> None:
    dec = make_decoder("auto", OPTIONS)
    dec.decode(CALLER, VonageCallerWire(8000).connected(), 0)
    (a,) = dec.decode(CALLER, VonageCallerWire.audio(PCM), 1)
    assert isinstance(a, Audio) and a.sample_rate_hz == 8000
