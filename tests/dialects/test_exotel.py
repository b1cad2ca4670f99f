"""Dialect ``exotel``: the Exotel Voicebot applet (PROTOCOLS.md section 1, table)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.dialectkit import AGENT, CALLER, PCM, anomaly_at, b64, msg, round_trip, table_tests

from voxproxy.audio.g711 import pcm_to_ulaw, ulaw_to_pcm
from voxproxy.audio.pcm import pcm_to_bytes
from voxproxy.dialects import make_decoder
from voxproxy.dialects.exotel import ExotelAgentWire, ExotelCallerWire, ExotelDecoder
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

T = 99
STREAM = "a1b2c3d4e5f6stream"
CALL = "a1b2c3d4e5f6"
B64 = b64(pcm_to_bytes(PCM))


def start_msg(**fmt: object) -> str:
    media_format = {"encoding": "base64", "sample_rate": "8000", "bit_rate": "128kbps", **fmt}
    return msg(
        event="start",
        sequence_number=1,
        stream_sid=STREAM,
        start={
            "stream_sid": STREAM,
            "call_sid": CALL,
            "account_sid": "acme",
            "from": "+919876543210",
            "to": "08047491899",
            "custom_parameters": {},
            "media_format": media_format,
        },
    )


anomaly = anomaly_at(T)


CASES = [  # (name, direction, message, events): support.dialectkit.Case
    ("connected", CALLER, msg(event="connected"), []),
    ("start (slin 8 kHz)", CALLER, start_msg(), [StreamStart(CALL, 8000, "pcm_s16le", T)]),
    (
        "start at 16 kHz",
        CALLER,
        start_msg(sample_rate=16000),
        [StreamStart(CALL, 16000, "pcm_s16le", T)],
    ),
    (
        "start with a mulaw media format",
        CALLER,
        start_msg(encoding="audio/x-mulaw;rate=8000", sample_rate=None),
        [StreamStart(CALL, 8000, "ulaw", T)],
    ),
    (
        "media",
        CALLER,
        msg(
            event="media",
            sequence_number=3,
            stream_sid=STREAM,
            media={"chunk": 2, "timestamp": "20", "payload": B64},
        ),
        [Audio(CALLER, PCM, 8000, T)],
    ),
    ("dtmf", CALLER, msg(event="dtmf", stream_sid=STREAM, dtmf={"digit": "1"}), [Dtmf(T)]),
    (
        "mark echo",
        CALLER,
        msg(event="mark", stream_sid=STREAM, mark={"name": "m"}),
        [MarkEcho("m", T)],
    ),
    (
        "stop",
        CALLER,
        msg(event="stop", stream_sid=STREAM, stop={"reason": "callended"}),
        [StreamStop(T)],
    ),
    (
        "agent media",
        AGENT,
        msg(event="media", stream_sid=STREAM, media={"payload": B64}),
        [Audio(AGENT, PCM, 8000, T)],
    ),
    (
        "agent mark",
        AGENT,
        msg(event="mark", stream_sid=STREAM, mark={"name": "m"}),
        [MarkSent("m", T)],
    ),
    ("agent clear", AGENT, msg(event="clear", stream_sid=STREAM), [Flush(T, "clear")]),
    (
        "agent clear, pipecat's streamSid",
        AGENT,
        msg(event="clear", streamSid=STREAM),
        [Flush(T, "clear")],
    ),
    ("stop from the agent", AGENT, msg(event="stop"), [anomaly(AnomalyKind.UNKNOWN_EVENT, AGENT)]),
]

BAD = [  # (name, direction, message, anomaly kind): support.dialectkit.Bad
    ("malformed JSON", AGENT, "{]", AnomalyKind.MALFORMED),
    ("binary", CALLER, pcm_to_bytes(PCM), AnomalyKind.UNEXPECTED_BINARY),
    (
        "invalid base64",
        AGENT,
        msg(event="media", media={"payload": "%%"}),
        AnomalyKind.INVALID_BASE64,
    ),
    (
        "payload not a string",
        CALLER,
        msg(event="media", media={"payload": 5}),
        AnomalyKind.MALFORMED,
    ),
    ("a rate Exotel does not offer", CALLER, start_msg(sample_rate="11025"), AnomalyKind.BAD_AUDIO),
    ("start not an object", CALLER, msg(event="start", start=None), AnomalyKind.MALFORMED),
]


test_decode, test_bad_input_is_an_anomaly, test_registered_name = table_tests(
    "exotel", ExotelDecoder, T, CASES, BAD
)


def test_a_mulaw_stream_decodes_mulaw_both_ways() -> None:
    dec = ExotelDecoder()
    dec.decode(CALLER, start_msg(encoding="audio/x-mulaw", sample_rate="8000"), T)
    ulaw = pcm_to_ulaw(PCM)
    payload = b64(ulaw)
    for d in (CALLER, AGENT):
        (a,) = dec.decode(d, msg(event="media", media={"payload": payload}), T)
        assert isinstance(a, Audio)
        np.testing.assert_array_equal(a.pcm, ulaw_to_pcm(ulaw))


@pytest.mark.parametrize("rate", [8000, 16000])
def test_wires_round_trip(rate: int) -> None:
    caller = ExotelCallerWire(STREAM, CALL, rate)
    agent = ExotelAgentWire(STREAM)
    dec = make_decoder("exotel")
    steps = [
        (CALLER, caller.connected(), []),
        (CALLER, caller.start(), [StreamStart(CALL, rate, "pcm_s16le", T)]),
        (CALLER, caller.media(PCM), [Audio(CALLER, PCM, rate, T)]),
        (AGENT, agent.media(PCM), [Audio(AGENT, PCM, rate, T)]),
        (AGENT, agent.mark("resp-1"), [MarkSent("resp-1", T)]),
        (CALLER, caller.mark("resp-1"), [MarkEcho("resp-1", T)]),
        (AGENT, agent.clear(), [Flush(T, "clear")]),
        (CALLER, caller.dtmf("2"), [Dtmf(T)]),
        (CALLER, caller.stop(), [StreamStop(T)]),
    ]
    round_trip(dec, steps, T)
    media = json.loads(caller.media(np.zeros(rate // 10, np.int16)))
    assert media["stream_sid"] == STREAM and media["media"]["timestamp"] == "0"
    assert json.loads(caller.media(PCM))["media"]["timestamp"] == "100"
