"""Dialect ``exotel``: the Exotel Voicebot applet (docs/protocols.md section 4)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support import dialectkit as kit
from support.dialectkit import AGENT, CALLER, PCM, Kind, msg

from voxproxy.core.audio.g711 import pcm_to_ulaw, ulaw_to_pcm
from voxproxy.core.audio.pcm import pcm_to_bytes
from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.exotel import ExotelAgentWire, ExotelCallerWire, ExotelDecoder
from voxproxy.core.events import Audio, Flush, StreamStart

T = 99
STREAM = "a1b2c3d4e5f6stream"
CALL = "a1b2c3d4e5f6"
B64 = kit.b64(pcm_to_bytes(PCM))


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


anomaly = kit.anomaly_at(T)
SHARED_CASES, SHARED_BAD = kit.twilio_vocabulary(
    T, "stream_sid", STREAM, B64, lambda d: Audio(d, PCM, 8000, T)
)


CASES = [  # (name, direction, message, events): support.dialectkit.Case
    *SHARED_CASES,
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
        "agent clear, pipecat's streamSid",
        AGENT,
        msg(event="clear", streamSid=STREAM),
        [Flush(T, "clear")],
    ),
]

BAD = [  # (name, direction, message, anomaly kind): support.dialectkit.Bad
    *SHARED_BAD,
    ("payload not a string", CALLER, msg(event="media", media={"payload": 5}), Kind.MALFORMED),
    ("a rate Exotel does not offer", CALLER, start_msg(sample_rate="11025"), Kind.BAD_AUDIO),
]


test_decode, test_bad_input_is_an_anomaly, test_registered_name = kit.table_tests(
    "exotel", ExotelDecoder, T, CASES, BAD
)


def test_a_mulaw_stream_decodes_mulaw_both_ways() -> None:
    dec = ExotelDecoder()
    dec.decode(CALLER, start_msg(encoding="audio/x-mulaw", sample_rate="8000"), T)
    ulaw = pcm_to_ulaw(PCM)
    payload = kit.b64(ulaw)
    for d in (CALLER, AGENT):
        (a,) = dec.decode(d, msg(event="media", media={"payload": payload}), T)
        assert isinstance(a, Audio)
        np.testing.assert_array_equal(a.pcm, ulaw_to_pcm(ulaw))


@pytest.mark.parametrize("rate", [8000, 16000])
def test_wires_round_trip(rate: int) -> None:
    caller = ExotelCallerWire(STREAM, CALL, rate)
    frames = ((PCM, Audio(CALLER, PCM, rate, T)), (PCM, Audio(AGENT, PCM, rate, T)))
    start = [StreamStart(CALL, rate, "pcm_s16le", T)]
    kit.twilio_round_trip(make_decoder("exotel"), caller, ExotelAgentWire(STREAM), T, start, frames)
    media = json.loads(caller.media(np.zeros(rate // 10, np.int16)))
    assert media["stream_sid"] == STREAM and media["media"]["timestamp"] == "0"
    assert json.loads(caller.media(PCM))["media"]["timestamp"] == "100"
