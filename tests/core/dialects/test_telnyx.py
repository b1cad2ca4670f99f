"""Dialect ``telnyx``: Telnyx Media Streaming (docs/protocols.md section 4)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support import dialectkit as kit
from support.dialectkit import AGENT, CALLER, PCM, Kind, msg
from support.eventview import views

from voxproxy.core.audio.g711 import alaw_to_pcm, pcm_to_alaw, pcm_to_ulaw, ulaw_to_pcm
from voxproxy.core.dialects.telnyx import TelnyxAgentWire, TelnyxCallerWire, TelnyxDecoder, encode
from voxproxy.core.events import Audio, StreamStart

T = 123_456_789
STREAM = "32DE0DEA-53CB-4B21-89A4-9E1819C043BC"
CALL = "v3:MdI91X4lWFEs7IgbBEOT9M4AigoY08M0WWZFISt1Yw2axZ_IiE4pqg"
ULAW = pcm_to_ulaw(PCM)
B64 = kit.b64(ULAW)


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


anomaly = kit.anomaly_at(T)
SHARED_CASES, SHARED_BAD = kit.twilio_vocabulary(
    T, "stream_id", STREAM, B64, lambda d: Audio(d, ulaw_to_pcm(ULAW), 8000, T)
)


CASES = [  # (name, direction, message, events): support.dialectkit.Case
    *SHARED_CASES,
    ("connected", CALLER, msg(event="connected", version="1.0.0"), []),
    ("start", CALLER, start_msg(), [StreamStart(CALL, 8000, "ulaw", T)]),
    (
        "start without a call control id uses the stream id",
        CALLER,
        msg(event="start", stream_id=STREAM, start={"media_format": {"encoding": "PCMA"}}),
        [StreamStart(STREAM, 8000, "alaw", T)],
    ),
    ("error frame", CALLER, msg(event="error", payload={"code": 100003}), []),
]

BAD = [  # (name, direction, message, anomaly kind): support.dialectkit.Bad
    *SHARED_BAD,
    ("no event", CALLER, msg(type="media"), Kind.MALFORMED),
    ("start at a silly rate", CALLER, start_msg(rate=100), Kind.BAD_AUDIO),
]


test_decode, test_bad_input_is_an_anomaly, test_registered_name = kit.table_tests(
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
    payload = kit.b64(wire_bytes)
    for direction in (CALLER, AGENT):
        (a,) = dec.decode(direction, msg(event="media", media={"payload": payload}), T)
        assert isinstance(a, Audio) and a.sample_rate_hz == rate
        np.testing.assert_array_equal(a.pcm, expected)


def test_an_undecodable_codec_is_counted_once() -> None:
    dec = TelnyxDecoder()
    start = dec.decode(CALLER, start_msg("OPUS", 48000), T)
    assert views(start) == views(
        [anomaly(Kind.BAD_AUDIO, CALLER), StreamStart(CALL, 48000, "OPUS", T)]
    )
    assert dec.decode(CALLER, msg(event="media", media={"payload": B64}), T) == []
    assert dec.decode(AGENT, msg(event="media", media={"payload": B64}), T) == []


def test_wires_round_trip() -> None:
    said = (ULAW, Audio(CALLER, ulaw_to_pcm(ULAW), 8000, T))
    answered = (encode(PCM, "PCMU"), Audio(AGENT, ulaw_to_pcm(ULAW), 8000, T))
    start = [StreamStart(CALL, 8000, "ulaw", T)]
    caller, agent = TelnyxCallerWire(STREAM, CALL), TelnyxAgentWire()
    kit.twilio_round_trip(TelnyxDecoder(), caller, agent, T, start, (said, answered))


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
