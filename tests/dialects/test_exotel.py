"""Dialect ``exotel``: the Exotel Voicebot applet (PROTOCOLS.md section 1, table)."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from support.eventview import views

from voxproxy.audio.g711 import pcm_to_ulaw, ulaw_to_pcm
from voxproxy.audio.pcm import pcm_to_bytes
from voxproxy.dialects import make_decoder
from voxproxy.dialects.exotel import ExotelAgentWire, ExotelCallerWire, ExotelDecoder
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
    StreamStop,
)

T = 99
STREAM = "a1b2c3d4e5f6stream"
CALL = "a1b2c3d4e5f6"
PCM = np.array([0, 1000, -1000, 8000, -32000, 5], dtype=np.int16)
B64 = base64.b64encode(pcm_to_bytes(PCM)).decode()


def msg(**fields: object) -> str:
    return json.dumps(fields)


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


def anomaly(kind: AnomalyKind, d: Direction) -> Anomaly:
    return Anomaly(kind, d, T)


CASES: list[tuple[str, Direction, str, list[Event]]] = [
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

BAD: list[tuple[str, Direction, bytes | str, AnomalyKind]] = [
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


@pytest.mark.parametrize(
    ("name", "direction", "message", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_decode(name: str, direction: Direction, message: str, expected: list[Event]) -> None:
    del name
    assert views(ExotelDecoder().decode(direction, message, T)) == views(expected)


@pytest.mark.parametrize(("name", "direction", "message", "kind"), BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_an_anomaly(
    name: str, direction: Direction, message: bytes | str, kind: AnomalyKind
) -> None:
    del name
    assert ExotelDecoder().decode(direction, message, T) == [anomaly(kind, direction)]


def test_a_mulaw_stream_decodes_mulaw_both_ways() -> None:
    dec = ExotelDecoder()
    dec.decode(CALLER, start_msg(encoding="audio/x-mulaw", sample_rate="8000"), T)
    ulaw = pcm_to_ulaw(PCM)
    payload = base64.b64encode(ulaw).decode()
    for d in (CALLER, AGENT):
        (a,) = dec.decode(d, msg(event="media", media={"payload": payload}), T)
        assert isinstance(a, Audio)
        np.testing.assert_array_equal(a.pcm, ulaw_to_pcm(ulaw))


@pytest.mark.parametrize("rate", [8000, 16000])
def test_wires_round_trip(rate: int) -> None:
    caller = ExotelCallerWire(STREAM, CALL, rate)
    agent = ExotelAgentWire(STREAM)
    dec = make_decoder("exotel")
    steps: list[tuple[Direction, str, list[Event]]] = [
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
    for direction, message, expected in steps:
        assert views(dec.decode(direction, message, T)) == views(expected), message
    media = json.loads(caller.media(np.zeros(rate // 10, np.int16)))
    assert media["stream_sid"] == STREAM and media["media"]["timestamp"] == "0"
    assert json.loads(caller.media(PCM))["media"]["timestamp"] == "100"


def test_registered_name() -> None:
    assert make_decoder("exotel").name == "exotel"
