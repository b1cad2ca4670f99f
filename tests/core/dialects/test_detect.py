"""Dialect ``auto``: the dialect is chosen from the first message that decides it."""

from __future__ import annotations

import numpy as np
import pytest
from support.dialectkit import AGENT, CALLER, Direction, Event
from support.eventview import views

from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.detect import AutoDecoder, guess
from voxproxy.core.dialects.raw import RawWire
from voxproxy.core.dialects.twilio import TwilioAgentWire, TwilioCallerWire
from voxproxy.core.errors import ConfigError
from voxproxy.core.events import Anomaly, AnomalyKind, Audio, Flush, StreamStart, StreamStop

# The shell hands every decoder that may hash (auto, OpenAI Realtime) its secret.
OPTIONS = DialectOptions(secret=b"detect")

CALLER_WIRE = TwilioCallerWire("MZ" + "1" * 32, "CA" + "2" * 32)
AGENT_WIRE = TwilioAgentWire("MZ" + "1" * 32)

# (first message, its direction, dialect it decides, the events it decodes to)
FIRST: list[tuple[str, Direction, bytes | str, str, list[Event]]] = [
    ("twilio connected", CALLER, CALLER_WIRE.connected(), "twilio", []),
    (
        "twilio start",
        CALLER,
        CALLER_WIRE.start(),
        "twilio",
        [StreamStart("CA" + "2" * 32, 8000, "audio/x-mulaw", 5)],
    ),
    (
        "twilio media",
        CALLER,
        CALLER_WIRE.media(b"\xff\xff"),
        "twilio",
        [Audio(CALLER, np.zeros(2, np.int16), 8000, 5)],
    ),
    ("twilio agent clear", AGENT, AGENT_WIRE.clear(), "twilio", [Flush(5, "clear")]),
    ("twilio stop", CALLER, CALLER_WIRE.stop(), "twilio", [StreamStop(5)]),
    ("raw binary", CALLER, b"\x01\x00", "raw", [Audio(CALLER, np.ones(1, np.int16), 16000, 5)]),
    ("raw start", CALLER, RawWire.start(16000), "raw", [StreamStart(None, 16000, "pcm_s16le", 5)]),
    ("raw clear", AGENT, RawWire.clear(), "raw", [Flush(5, "clear")]),
    (
        "raw unknown type",
        AGENT,
        '{"type": "hello"}',
        "raw",
        [Anomaly(AnomalyKind.UNKNOWN_EVENT, AGENT, 5)],
    ),
]


@pytest.mark.parametrize(
    ("name", "direction", "message", "dialect", "expected"), FIRST, ids=[f[0] for f in FIRST]
)
def test_first_message_decides(
    name: str, direction: Direction, message: bytes | str, dialect: str, expected: list[Event]
) -> None:
    del name
    assert guess(message) == dialect
    dec = make_decoder("auto", OPTIONS)
    assert dec.name == "auto"
    events = dec.decode(direction, message, 5)
    assert dec.name == dialect
    assert isinstance(dec, AutoDecoder) and dec.decided
    assert views(events) == views(expected)
    assert not any(
        isinstance(e, Anomaly) and e.kind is AnomalyKind.DIALECT_UNDETECTED for e in events
    )


def test_the_chosen_dialect_decodes_what_follows() -> None:
    twilio = make_decoder("auto", OPTIONS)
    twilio.decode(CALLER, CALLER_WIRE.connected(), 0)
    assert twilio.decode(CALLER, b"\x00\x00", 1) == [
        Anomaly(AnomalyKind.UNEXPECTED_BINARY, CALLER, 1)
    ]
    raw = make_decoder("auto", DialectOptions(sample_rate_hz=8000, secret=b"detect"))
    raw.decode(CALLER, b"\x00\x00", 0)
    assert raw.decode(CALLER, CALLER_WIRE.connected(), 1) == [
        Anomaly(AnomalyKind.UNKNOWN_EVENT, CALLER, 1)
    ]
    (a,) = raw.decode(AGENT, b"\x00\x00", 2)
    assert isinstance(a, Audio) and a.sample_rate_hz == 8000  # the options reached the dialect


UNDECIDABLE: list[bytes | str] = [
    b"",
    "",
    "hello",
    "{not json",
    "[1, 2]",
    '"start"',
    "42",
    "{}",
    '{"event": "hangup"}',  # not Twilio's vocabulary
    '{"event": 3}',
    '{"type": 3}',  # raw needs a string type
]


@pytest.mark.parametrize("message", UNDECIDABLE)
def test_undecidable_messages(message: bytes | str) -> None:
    assert guess(message) is None
    dec = make_decoder("auto", OPTIONS)
    assert dec.decode(AGENT, message, 9) == [Anomaly(AnomalyKind.DIALECT_UNDETECTED, AGENT, 9)]
    assert dec.name == "auto"


def test_a_deciding_message_after_undecided_ones() -> None:
    dec = AutoDecoder(OPTIONS)
    for i in range(10):
        assert dec.decode(CALLER, "noise", i) == [
            Anomaly(AnomalyKind.DIALECT_UNDETECTED, CALLER, i)
        ]
    assert views(dec.decode(CALLER, CALLER_WIRE.start(), 10)) == views(
        [StreamStart("CA" + "2" * 32, 8000, "audio/x-mulaw", 10)]
    )
    assert dec.name == "twilio"


def test_after_50_undecided_messages_the_decoder_falls_back() -> None:
    dec = AutoDecoder(OPTIONS)
    for i in range(49):
        assert dec.decode(CALLER, "?", i) == [Anomaly(AnomalyKind.DIALECT_UNDETECTED, CALLER, i)]
        assert not dec.decided and dec.name == "auto"
    # The 50th is still counted as undetected, then the decoder gives up.
    assert dec.decode(CALLER, "?", 49) == [Anomaly(AnomalyKind.DIALECT_UNDETECTED, CALLER, 49)]
    assert dec.decided
    assert dec.name == "undetected"
    # From now on it measures raw audio and no longer counts undetected messages.
    (audio,) = dec.decode(CALLER, b"\x02\x00", 50)
    assert isinstance(audio, Audio) and audio.pcm.tolist() == [2]
    assert dec.decode(CALLER, "?", 51) == [Anomaly(AnomalyKind.MALFORMED, CALLER, 51)]
    # A Twilio message that comes too late is not Twilio any more.
    assert dec.decode(CALLER, CALLER_WIRE.connected(), 52) == [
        Anomaly(AnomalyKind.UNKNOWN_EVENT, CALLER, 52)
    ]
    assert dec.name == "undetected"


def test_the_limit_is_configurable() -> None:
    dec = AutoDecoder(OPTIONS, max_undecided=2)
    dec.decode(CALLER, "?", 0)
    assert not dec.decided
    dec.decode(AGENT, "?", 1)
    assert dec.name == "undetected"


def test_unknown_dialect_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown dialect 'sip'"):
        make_decoder("sip")
