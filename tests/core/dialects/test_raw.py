"""Dialect ``raw``: 16-bit PCM in binary messages, JSON control messages
(docs/protocols.md section 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support import dialectkit as kit
from support.dialectkit import AGENT, CALLER, Kind
from support.eventview import views

from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.raw import RawDecoder, RawWire
from voxproxy.core.events import Audio, Direction, Event, Flush, StreamStart, Transcript

T = 123_456_789


def pcm(*samples: int) -> np.ndarray:
    return np.array(samples, dtype=np.int16)


def le(*samples: int) -> bytes:
    return pcm(*samples).astype("<i2").tobytes()


anomaly = kit.anomaly_at(T)
unknown = kit.unknown_at(T)


# (name, direction, message, events) for a fresh decoder at 16 kHz: support.dialectkit.Case
CASES = [
    ("caller audio", CALLER, le(1, -2, 32767), [Audio(CALLER, pcm(1, -2, 32767), 16000, T)]),
    ("agent audio", AGENT, le(-32768, 0), [Audio(AGENT, pcm(-32768, 0), 16000, T)]),
    (
        "caller start",
        CALLER,
        '{"type": "start", "sample_rate": 8000}',
        [StreamStart(None, 8000, "pcm_s16le", T)],
    ),
    (
        "caller start without rate",
        CALLER,
        '{"type": "start"}',
        [StreamStart(None, None, "pcm_s16le", T)],
    ),
    (
        "agent start declares its rate silently",
        AGENT,
        '{"type": "start", "sample_rate": 24000}',
        [],
    ),
    ("agent clear", AGENT, '{"type": "clear"}', [Flush(T, "clear")]),
    (
        "agent transcript",
        AGENT,
        '{"type": "transcript", "role": "user", "text": "hi there", "final": false}',
        [Transcript("user", "hi there", False, T)],
    ),
    (
        "transcript defaults",
        AGENT,
        '{"type": "transcript", "text": "x"}',
        [Transcript("user", "x", True, T)],
    ),
    ("caller clear is not a flush", CALLER, '{"type": "clear"}', unknown(CALLER)),
    (
        "caller transcript is unknown",
        CALLER,
        '{"type": "transcript", "text": "x"}',
        unknown(CALLER),
    ),
    ("unknown type", AGENT, '{"type": "ping"}', unknown(AGENT)),
    ("no type", AGENT, '{"hello": 1}', unknown(AGENT)),
    ("empty binary", CALLER, b"", []),
    ("one byte is carried, not decoded", CALLER, b"\x01", []),
]

BAD = [  # (name, direction, message, anomaly kind): support.dialectkit.Bad
    ("malformed JSON", AGENT, '{"type": "clear"', Kind.MALFORMED),
    ("not JSON at all", CALLER, "hello", Kind.MALFORMED),
    ("empty text", CALLER, "", Kind.MALFORMED),
    ("JSON array", AGENT, '["clear"]', Kind.MALFORMED),
    ("JSON string", AGENT, '"clear"', Kind.MALFORMED),
    ("JSON number", CALLER, "16000", Kind.MALFORMED),
    ("JSON null", CALLER, "null", Kind.MALFORMED),
    ("rate as a string", CALLER, '{"type": "start", "sample_rate": "16000"}', Kind.MALFORMED),
    ("rate as a float", CALLER, '{"type": "start", "sample_rate": 16000.0}', Kind.MALFORMED),
    ("rate as a bool", CALLER, '{"type": "start", "sample_rate": true}', Kind.MALFORMED),
    ("rate too low", CALLER, '{"type": "start", "sample_rate": 100}', Kind.MALFORMED),
    ("rate too high", AGENT, '{"type": "start", "sample_rate": 1000000}', Kind.MALFORMED),
    ("negative rate", CALLER, '{"type": "start", "sample_rate": -16000}', Kind.MALFORMED),
    ("transcript without text", AGENT, '{"type": "transcript", "role": "user"}', Kind.MALFORMED),
    ("transcript text not a string", AGENT, '{"type": "transcript", "text": 5}', Kind.MALFORMED),
]


def still_at_16_khz(dec: RawDecoder, direction: Direction) -> None:
    """A bad message changes nothing: audio afterwards is still read at the old rate."""
    (audio,) = dec.decode(direction, le(7), T)
    assert isinstance(audio, Audio) and audio.sample_rate_hz == 16000


test_decode, test_bad_input_is_an_anomaly, test_registered_name = kit.table_tests(
    "raw", lambda: RawDecoder(DialectOptions()), T, CASES, BAD, still_at_16_khz
)


def test_odd_bytes_carry_over_to_the_next_message_of_the_same_direction() -> None:
    dec = RawDecoder(DialectOptions())
    data = le(1000, -1000, 300, -300)  # 8 bytes
    got: list[Event] = []
    got += dec.decode(CALLER, data[:3], 1)  # one sample and a half
    got += dec.decode(AGENT, le(5)[:1], 2)  # the agent's own odd byte
    got += dec.decode(CALLER, data[3:6], 3)  # the other half, one more, half another
    got += dec.decode(AGENT, le(5)[1:], 4)
    got += dec.decode(CALLER, b"", 5)  # an empty message keeps the carry
    got += dec.decode(CALLER, data[6:], 6)
    assert views(got) == views(
        [
            Audio(CALLER, pcm(1000), 16000, 1),
            Audio(CALLER, pcm(-1000, 300), 16000, 3),
            Audio(AGENT, pcm(5), 16000, 4),
            Audio(CALLER, pcm(-300), 16000, 6),
        ]
    )


def test_start_sets_the_rate_per_direction() -> None:
    dec = RawDecoder(DialectOptions(sample_rate_hz=16000))
    assert views(dec.decode(CALLER, RawWire.start(8000), 1)) == views(
        [StreamStart(None, 8000, "pcm_s16le", 1)]
    )
    assert dec.decode(AGENT, RawWire.start(24000), 2) == []
    (c,) = dec.decode(CALLER, le(1), 3)
    (a,) = dec.decode(AGENT, le(1), 4)
    assert isinstance(c, Audio) and c.sample_rate_hz == 8000
    assert isinstance(a, Audio) and a.sample_rate_hz == 24000


@pytest.mark.parametrize("rate", [8000, 24000, 48000])
def test_the_agent_follows_the_rate_the_caller_declares(rate: int) -> None:
    # Without a rate of its own (configured or declared), the agent's audio is at the
    # caller's declared rate: a 48 kHz agent read as 16 kHz played 3x too long.
    dec = RawDecoder(DialectOptions(sample_rate_hz=16000))
    dec.decode(CALLER, RawWire.start(rate), 1)
    (a,) = dec.decode(AGENT, le(1), 2)
    assert isinstance(a, Audio) and a.sample_rate_hz == rate
    # A configured agent rate, or the agent's own start, wins over the caller's.
    fixed = RawDecoder(DialectOptions(sample_rate_hz=16000, agent_sample_rate_hz=16000))
    fixed.decode(CALLER, RawWire.start(rate), 1)
    (b,) = fixed.decode(AGENT, le(1), 2)
    assert isinstance(b, Audio) and b.sample_rate_hz == 16000
    own = RawDecoder(DialectOptions(sample_rate_hz=16000))
    own.decode(AGENT, RawWire.start(24000), 1)
    own.decode(CALLER, RawWire.start(rate), 2)
    (c,) = own.decode(AGENT, le(1), 3)
    assert isinstance(c, Audio) and c.sample_rate_hz == 24000


def test_options_set_both_rates() -> None:
    dec = make_decoder("raw", DialectOptions(sample_rate_hz=8000, agent_sample_rate_hz=24000))
    assert dec.name == "raw"
    (c,) = dec.decode(CALLER, le(1), 1)
    (a,) = dec.decode(AGENT, le(1), 2)
    assert isinstance(c, Audio) and c.sample_rate_hz == 8000
    assert isinstance(a, Audio) and a.sample_rate_hz == 24000
    same = make_decoder("raw", DialectOptions(sample_rate_hz=8000))
    (a2,) = same.decode(AGENT, le(1), 2)
    assert isinstance(a2, Audio) and a2.sample_rate_hz == 8000


def test_audio_is_little_endian_whatever_the_platform() -> None:
    dec = RawDecoder(DialectOptions())
    (ev,) = dec.decode(CALLER, b"\x00\x01", 0)
    assert isinstance(ev, Audio) and ev.pcm.tolist() == [256]


# -- message builders ------------------------------------------------------------------


BUILT = [  # (name, direction, message, events): support.dialectkit.Case
    ("start", CALLER, RawWire.start(16000), [StreamStart(None, 16000, "pcm_s16le", T)]),
    ("audio", CALLER, RawWire.audio(le(1, 2, 3)), [Audio(CALLER, pcm(1, 2, 3), 16000, T)]),
    ("agent audio", AGENT, RawWire.audio(le(-4)), [Audio(AGENT, pcm(-4), 16000, T)]),
    ("clear", AGENT, RawWire.clear(), [Flush(T, "clear")]),
    (
        "transcript",
        AGENT,
        RawWire.transcript("hello", final=False),
        [Transcript("user", "hello", False, T)],
    ),
    (
        "assistant transcript",
        AGENT,
        RawWire.transcript('quote " and ünïcode', role="assistant"),
        [Transcript("assistant", 'quote " and ünïcode', True, T)],
    ),
]


test_builders_round_trip = kit.case_tests(lambda: RawDecoder(DialectOptions()), T, BUILT)


def test_builder_wire_format() -> None:
    assert json.loads(RawWire.start(16000)) == {"type": "start", "sample_rate": 16000}
    assert json.loads(RawWire.clear()) == {"type": "clear"}
    assert json.loads(RawWire.transcript("x")) == {
        "type": "transcript",
        "role": "user",
        "text": "x",
        "final": True,
    }
    assert RawWire.audio(b"\x01\x02") == b"\x01\x02"
