"""Dialect ``telnyx``: Telnyx Media Streaming (PROTOCOLS.md section 1, table)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.dialectkit import AGENT, CALLER, PCM, anomaly_at, b64, msg, round_trip, table_tests
from support.eventview import views

from voxproxy.audio.g711 import alaw_to_pcm, pcm_to_alaw, pcm_to_ulaw, ulaw_to_pcm
from voxproxy.dialects.telnyx import TelnyxAgentWire, TelnyxCallerWire, TelnyxDecoder, encode
from voxproxy.events import (
    AnomalyKind,
    Audio,
    Dtmf,
    Flush,
    MarkEcho,
    MarkSent,
    StreamStart,
    StreamStop,
)

T = 123_456_789
STREAM = "32DE0DEA-53CB-4B21-89A4-9E1819C043BC"
CALL = "v3:MdI91X4lWFEs7IgbBEOT9M4AigoY08M0WWZFISt1Yw2axZ_IiE4pqg"
ULAW = pcm_to_ulaw(PCM)
B64 = b64(ULAW)


def start_msg(encoding: str = "PCMU", rate: object = 8000) -> str:
    return msg(
        event="start",
        sequence_number="1",
        stream_id=STREAM,
        start={
            "user_id": "3E6F995F-85F7-4705-9741-53B116D28237",
            "call_control_id": CALL,
            "call_session_id": "ff55a038-6f5d-11ef-9692-02420aeffb1f",
            "from": "+13122010094",
            "to": "+13122123456",
            "client_state": "aGF2ZSBhIG5pY2UgZGF5ID1d",
            "custom_parameters": {},
            "media_format": {"encoding": encoding, "sample_rate": rate, "channels": 1},
        },
    )


anomaly = anomaly_at(T)


CASES = [  # (name, direction, message, events): support.dialectkit.Case
    ("connected", CALLER, msg(event="connected", version="1.0.0"), []),
    ("start", CALLER, start_msg(), [StreamStart(CALL, 8000, "ulaw", T)]),
    (
        "start without a call control id uses the stream id",
        CALLER,
        msg(event="start", stream_id=STREAM, start={"media_format": {"encoding": "PCMA"}}),
        [StreamStart(STREAM, 8000, "alaw", T)],
    ),
    (
        "inbound media",
        CALLER,
        msg(
            event="media",
            sequence_number="4",
            stream_id=STREAM,
            media={"track": "inbound", "chunk": "2", "timestamp": "5", "payload": B64},
        ),
        [Audio(CALLER, ulaw_to_pcm(ULAW), 8000, T)],
    ),
    (
        "outbound track (both_tracks) is not caller audio",
        CALLER,
        msg(event="media", media={"track": "outbound", "payload": B64}),
        [],
    ),
    ("mark callback", CALLER, msg(event="mark", mark={"name": "m1"}), [MarkEcho("m1", T)]),
    ("dtmf", CALLER, msg(event="dtmf", dtmf={"digit": "1"}), [Dtmf(T)]),
    ("error frame", CALLER, msg(event="error", payload={"code": 100003}), []),
    ("stop", CALLER, msg(event="stop", stop={"call_control_id": CALL}), [StreamStop(T)]),
    (
        "agent media",
        AGENT,
        msg(event="media", media={"payload": B64}),
        [Audio(AGENT, ulaw_to_pcm(ULAW), 8000, T)],
    ),
    ("agent mark", AGENT, msg(event="mark", mark={"name": "m1"}), [MarkSent("m1", T)]),
    ("agent clear", AGENT, msg(event="clear"), [Flush(T, "clear")]),
    ("clear from Telnyx", CALLER, msg(event="clear"), [anomaly(AnomalyKind.UNKNOWN_EVENT, CALLER)]),
    ("start from the agent", AGENT, start_msg(), [anomaly(AnomalyKind.UNKNOWN_EVENT, AGENT)]),
    ("unknown event", CALLER, msg(event="hangup"), [anomaly(AnomalyKind.UNKNOWN_EVENT, CALLER)]),
]

BAD = [  # (name, direction, message, anomaly kind): support.dialectkit.Bad
    ("malformed JSON", CALLER, '{"event": "media"', AnomalyKind.MALFORMED),
    ("JSON array", AGENT, "[1]", AnomalyKind.MALFORMED),
    ("no event", CALLER, msg(type="media"), AnomalyKind.MALFORMED),
    ("binary", CALLER, ULAW, AnomalyKind.UNEXPECTED_BINARY),
    (
        "invalid base64",
        CALLER,
        msg(event="media", media={"payload": "a*b"}),
        AnomalyKind.INVALID_BASE64,
    ),
    ("missing payload", AGENT, msg(event="media", media={}), AnomalyKind.MALFORMED),
    ("media not an object", AGENT, msg(event="media", media=[]), AnomalyKind.MALFORMED),
    ("mark without a name", AGENT, msg(event="mark", mark={}), AnomalyKind.MALFORMED),
    ("start not an object", CALLER, msg(event="start", start=3), AnomalyKind.MALFORMED),
    ("start at a silly rate", CALLER, start_msg(rate=100), AnomalyKind.BAD_AUDIO),
]


test_decode, test_bad_input_is_an_anomaly, test_registered_name = table_tests(
    "telnyx", TelnyxDecoder, T, CASES, BAD
)


@pytest.mark.parametrize(
    ("encoding", "rate", "wire_bytes", "expected"),
    [
        ("PCMU", 8000, ULAW, ulaw_to_pcm(ULAW)),
        ("PCMA", 8000, pcm_to_alaw(PCM), alaw_to_pcm(pcm_to_alaw(PCM))),
        ("L16", 16000, PCM.astype(">i2").tobytes(), PCM),  # network byte order
    ],
)
def test_codecs_from_the_start_message(
    encoding: str, rate: int, wire_bytes: bytes, expected: np.ndarray
) -> None:
    dec = TelnyxDecoder()
    (start,) = dec.decode(CALLER, start_msg(encoding, rate), T)
    assert isinstance(start, StreamStart) and start.sample_rate_hz == rate
    payload = b64(wire_bytes)
    for direction in (CALLER, AGENT):
        (a,) = dec.decode(direction, msg(event="media", media={"payload": payload}), T)
        assert isinstance(a, Audio) and a.sample_rate_hz == rate
        np.testing.assert_array_equal(a.pcm, expected)


def test_an_undecodable_codec_is_counted_once() -> None:
    dec = TelnyxDecoder()
    start = dec.decode(CALLER, start_msg("OPUS", 48000), T)
    assert views(start) == views(
        [anomaly(AnomalyKind.BAD_AUDIO, CALLER), StreamStart(CALL, 48000, "OPUS", T)]
    )
    assert dec.decode(CALLER, msg(event="media", media={"payload": B64}), T) == []
    assert dec.decode(AGENT, msg(event="media", media={"payload": B64}), T) == []


def test_wires_round_trip() -> None:
    caller = TelnyxCallerWire(STREAM, CALL)
    agent = TelnyxAgentWire()
    dec = TelnyxDecoder()
    steps = [
        (CALLER, caller.connected(), []),
        (CALLER, caller.start(), [StreamStart(CALL, 8000, "ulaw", T)]),
        (CALLER, caller.media(ULAW), [Audio(CALLER, ulaw_to_pcm(ULAW), 8000, T)]),
        (AGENT, agent.media(encode(PCM, "PCMU")), [Audio(AGENT, ulaw_to_pcm(ULAW), 8000, T)]),
        (AGENT, agent.mark("resp-1"), [MarkSent("resp-1", T)]),
        (CALLER, caller.mark("resp-1"), [MarkEcho("resp-1", T)]),
        (AGENT, agent.clear(), [Flush(T, "clear")]),
        (CALLER, caller.dtmf("4"), [Dtmf(T)]),
        (CALLER, caller.stop(), [StreamStop(T)]),
    ]
    round_trip(dec, steps, T)


def test_caller_wire_fields() -> None:
    wire = TelnyxCallerWire(STREAM, CALL)
    assert json.loads(wire.connected()) == {"event": "connected", "version": "1.0.0"}
    start = json.loads(wire.start())
    assert start["stream_id"] == STREAM and start["sequence_number"] == "1"
    assert start["start"]["media_format"] == {
        "encoding": "PCMU",
        "sample_rate": 8000,
        "channels": 1,
    }
    media = [json.loads(wire.media(b"\xff" * n)) for n in (160, 160, 80)]
    assert [m["media"]["chunk"] for m in media] == ["1", "2", "3"]
    assert [m["media"]["timestamp"] for m in media] == ["0", "20", "40"]
    assert [m["sequence_number"] for m in media] == ["2", "3", "4"]
    assert all(m["stream_id"] == STREAM and m["media"]["track"] == "inbound" for m in media)
    assert json.loads(TelnyxAgentWire.media(b"\x00")) == {
        "event": "media",
        "media": {"payload": "AA=="},
    }
