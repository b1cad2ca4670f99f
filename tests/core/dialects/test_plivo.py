"""Dialect ``plivo``: Plivo Audio Streams (docs/protocols.md section 4)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support import dialectkit as kit
from support.dialectkit import AGENT, CALLER, PCM, Kind, msg

from voxproxy.core.audio.g711 import pcm_to_ulaw, ulaw_to_pcm
from voxproxy.core.audio.pcm import pcm_to_bytes
from voxproxy.core.dialects.plivo import L16, PlivoAgentWire, PlivoCallerWire, PlivoDecoder
from voxproxy.core.events import Audio, Dtmf, Flush, MarkEcho, MarkSent, StreamStart

T = 42_000_000
STREAM = "20170ada-f610-433b-8758-c02a2aab3662"
CALL = "12345678-1234-1234-1234-123456789abc"
ULAW = pcm_to_ulaw(PCM)
B64 = kit.b64(ULAW)
B64_L16 = kit.b64(pcm_to_bytes(PCM))


def start_msg(encoding: str = "audio/x-mulaw", rate: int = 8000) -> str:
    return msg(
        event="start",
        sequenceNumber=1,
        start={
            "callId": CALL,
            "streamId": STREAM,
            "accountId": "MAXXXXXXXXXXXXXXXXXX",
            "tracks": ["inbound"],
            "mediaFormat": {"encoding": encoding, "sampleRate": rate},
        },
        extra_headers="userId=12345",
    )


anomaly = kit.anomaly_at(T)
unknown = kit.unknown_at(T)


CASES = [  # (name, direction, message, events): support.dialectkit.Case
    ("start", CALLER, start_msg(), [StreamStart(CALL, 8000, "ulaw", T)]),
    ("start L16 16 kHz", CALLER, start_msg(L16, 16000), [StreamStart(CALL, 16000, "pcm_s16le", T)]),
    (
        "media",
        CALLER,
        msg(
            event="media",
            sequenceNumber=2,
            streamId=STREAM,
            media={"track": "inbound", "payload": B64},
        ),
        [Audio(CALLER, ulaw_to_pcm(ULAW), 8000, T)],
    ),
    ("dtmf", CALLER, msg(event="dtmf", streamId=STREAM, dtmf={"digit": "5"}), [Dtmf(T)]),
    (
        "playedStream",
        CALLER,
        msg(event="playedStream", streamId=STREAM, name="cp-1"),
        [MarkEcho("cp-1", T)],
    ),
    ("played (support-page name)", CALLER, msg(event="played", name="cp-1"), [MarkEcho("cp-1", T)]),
    ("clearedAudio", CALLER, msg(event="clearedAudio", streamId=STREAM), []),
    (
        "playAudio names its own format",
        AGENT,
        msg(
            event="playAudio",
            media={"contentType": "audio/x-l16", "sampleRate": 16000, "payload": B64_L16},
            streamId=STREAM,
        ),
        [Audio(AGENT, PCM, 16000, T)],
    ),
    (
        "playAudio mulaw",
        AGENT,
        msg(
            event="playAudio",
            media={"contentType": "audio/x-mulaw", "sampleRate": 8000, "payload": B64},
        ),
        [Audio(AGENT, ulaw_to_pcm(ULAW), 8000, T)],
    ),
    (
        "playAudio without a content type: the stream's",
        AGENT,
        msg(event="playAudio", media={"payload": B64}),
        [Audio(AGENT, ulaw_to_pcm(ULAW), 8000, T)],
    ),
    (
        "checkpoint",
        AGENT,
        msg(event="checkpoint", streamId=STREAM, name="cp-1"),
        [MarkSent("cp-1", T)],
    ),
    ("clearAudio", AGENT, msg(event="clearAudio", streamId=STREAM), [Flush(T, "clearAudio")]),
    ("sendDTMF", AGENT, msg(event="sendDTMF", dtmf="12"), []),
    ("Twilio's clear is not Plivo's", AGENT, msg(event="clear"), unknown(AGENT)),
    ("playAudio from Plivo", CALLER, msg(event="playAudio", media={}), unknown(CALLER)),
]

BAD = [  # (name, direction, message, anomaly kind): support.dialectkit.Bad
    ("malformed JSON", CALLER, "{", Kind.MALFORMED),
    ("binary", AGENT, b"\x00\x00", Kind.UNEXPECTED_BINARY),
    ("invalid base64", CALLER, msg(event="media", media={"payload": "@@"}), Kind.INVALID_BASE64),
    ("checkpoint without a name", AGENT, msg(event="checkpoint"), Kind.MALFORMED),
    (
        "mulaw at 16 kHz is not allowed",
        AGENT,
        msg(
            event="playAudio",
            media={"contentType": "audio/x-mulaw", "sampleRate": 16000, "payload": B64},
        ),
        Kind.BAD_AUDIO,
    ),
    (
        "an unknown content type",
        AGENT,
        msg(event="playAudio", media={"contentType": "audio/mpeg", "payload": B64}),
        Kind.BAD_AUDIO,
    ),
    ("a start at 24 kHz", CALLER, start_msg(L16, 24000), Kind.BAD_AUDIO),
]


test_decode, test_bad_input_is_an_anomaly, test_registered_name = kit.table_tests(
    "plivo", PlivoDecoder, T, CASES, BAD
)


def test_l16_stream() -> None:
    dec = PlivoDecoder()
    dec.decode(CALLER, start_msg("audio/x-l16;rate=16000", 0), T)
    (a,) = dec.decode(CALLER, msg(event="media", media={"payload": B64_L16}), T)
    assert isinstance(a, Audio) and a.sample_rate_hz == 16000
    np.testing.assert_array_equal(a.pcm, PCM)


@pytest.mark.parametrize(
    ("content_type", "rate"), [("audio/x-mulaw", 8000), (L16, 8000), (L16, 16000)]
)
def test_wires_round_trip(content_type: str, rate: int) -> None:
    caller = PlivoCallerWire(STREAM, CALL, content_type, rate)
    agent = PlivoAgentWire(STREAM, content_type, rate)
    dec = PlivoDecoder()
    expected = ulaw_to_pcm(ULAW) if content_type == "audio/x-mulaw" else PCM
    encoding = "ulaw" if content_type == "audio/x-mulaw" else "pcm_s16le"
    steps = [
        (CALLER, caller.start(), [StreamStart(CALL, rate, encoding, T)]),
        (CALLER, caller.media(PCM), [Audio(CALLER, expected, rate, T)]),
        (AGENT, agent.play_audio(PCM), [Audio(AGENT, expected, rate, T)]),
        (AGENT, agent.checkpoint("resp-1"), [MarkSent("resp-1", T)]),
        (CALLER, caller.played_stream("resp-1"), [MarkEcho("resp-1", T)]),
        (AGENT, agent.clear_audio(), [Flush(T, "clearAudio")]),
        (CALLER, caller.cleared_audio(), []),
        (CALLER, caller.dtmf("9"), [Dtmf(T)]),
    ]
    kit.round_trip(dec, steps, T)


def test_wire_fields() -> None:
    caller = PlivoCallerWire(STREAM, CALL)
    start = json.loads(caller.start())
    assert start["sequenceNumber"] == 1 and isinstance(start["sequenceNumber"], int)
    assert start["start"]["mediaFormat"] == {"encoding": "audio/x-mulaw", "sampleRate": 8000}
    media = json.loads(caller.media(PCM))
    assert media["streamId"] == STREAM and media["sequenceNumber"] == 2
    play = json.loads(PlivoAgentWire(STREAM).play_audio(PCM))
    assert play["media"]["contentType"] == "audio/x-mulaw" and play["media"]["sampleRate"] == 8000
    assert json.loads(PlivoAgentWire(STREAM).checkpoint("x")) == {
        "event": "checkpoint",
        "streamId": STREAM,
        "name": "x",
    }
