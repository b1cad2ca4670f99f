"""The Twilio Media Streams decoder (``voxproxy/core/dialects/twilio_decoder.py``,
docs/protocols.md section 3): every message kind, the bad input each anomaly names, and
the μ-law payload."""

from __future__ import annotations

import numpy as np
from support import dialectkit as kit
from support.dialectkit import AGENT, CALLER, Direction, Kind, msg

from voxproxy.core.audio.g711 import pcm_to_ulaw, ulaw_to_pcm
from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.twilio_decoder import TwilioDecoder
from voxproxy.core.events import Audio, StreamStart

T = 987_654_321
STREAM = "MZ" + "1" * 32
CALL = "CA" + "2" * 32
ULAW = bytes([0xFF, 0x00, 0x80, 0x7F, 0x10, 0x90])
B64 = kit.b64(ULAW)


def start_msg(**fmt: object) -> str:
    media_format = {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1, **fmt}
    return msg(
        event="start",
        sequenceNumber="1",
        streamSid=STREAM,
        start={
            "accountSid": "AC" + "0" * 32,
            "streamSid": STREAM,
            "callSid": CALL,
            "tracks": ["inbound"],
            "customParameters": {},
            "mediaFormat": media_format,
        },
    )


def audio(d: Direction, data: bytes = ULAW) -> Audio:
    return Audio(d, ulaw_to_pcm(data), 8000, T)


anomaly = kit.anomaly_at(T)
unknown = kit.unknown_at(T)
SHARED_CASES, SHARED_BAD = kit.twilio_vocabulary(T, "streamSid", STREAM, B64, audio)


CASES = [  # (name, direction, message, events): support.dialectkit.Case
    *SHARED_CASES,
    ("connected", CALLER, msg(event="connected", protocol="Call", version="1.0.0"), []),
    ("start", CALLER, start_msg(), [StreamStart(CALL, 8000, "audio/x-mulaw", T)]),
    (
        "start without callSid uses the streamSid",
        CALLER,
        msg(event="start", streamSid=STREAM, start={"streamSid": STREAM}),
        [StreamStart(STREAM, 8000, "audio/x-mulaw", T)],
    ),
    (
        "start without any id",
        CALLER,
        msg(event="start", start={}),
        [StreamStart(None, 8000, "audio/x-mulaw", T)],
    ),
    ("empty payload", CALLER, msg(event="media", media={"payload": ""}), [audio(CALLER, b"")]),
    ("no event field", AGENT, msg(type="clear"), unknown(AGENT)),
]

BAD = [  # (name, direction, message, anomaly kind): support.dialectkit.Bad
    *SHARED_BAD,
    ("empty text", CALLER, "", Kind.MALFORMED),
    ("JSON string", AGENT, '"media"', Kind.MALFORMED),
    (
        "bad base64 padding",
        AGENT,
        msg(event="media", media={"payload": "AAA"}),
        Kind.INVALID_BASE64,
    ),
    (
        "non-ASCII payload",
        AGENT,
        msg(event="media", media={"payload": "ÿÿÿÿ"}),
        Kind.INVALID_BASE64,
    ),
    (
        "base64 with a newline",
        CALLER,
        msg(event="media", media={"payload": "AAAA\nAAAA"}),
        Kind.INVALID_BASE64,
    ),
    ("missing payload", CALLER, msg(event="media", media={"track": "inbound"}), Kind.MALFORMED),
    ("media missing", AGENT, msg(event="media"), Kind.MALFORMED),
    ("mark not an object", CALLER, msg(event="mark", mark="m"), Kind.MALFORMED),
    ("start at 16 kHz", CALLER, start_msg(sampleRate=16000), Kind.BAD_AUDIO),
    ("start with a string rate", CALLER, start_msg(sampleRate="8000"), Kind.BAD_AUDIO),
    ("binary from the agent", AGENT, ULAW, Kind.UNEXPECTED_BINARY),
    ("empty binary", CALLER, b"", Kind.UNEXPECTED_BINARY),
]


test_decode, test_bad_input_is_an_anomaly, test_registered_name = kit.table_tests(
    "twilio", lambda: TwilioDecoder(DialectOptions()), T, CASES, BAD
)


def test_media_payload_is_mulaw() -> None:
    pcm = np.array([0, 1000, -1000, 8000, -32000], dtype=np.int16)
    ulaw = pcm_to_ulaw(pcm)
    dec = make_decoder("twilio")
    (ev,) = dec.decode(CALLER, msg(event="media", media={"payload": kit.b64(ulaw)}), T)
    assert isinstance(ev, Audio)
    assert ev.sample_rate_hz == 8000
    np.testing.assert_array_equal(ev.pcm, ulaw_to_pcm(ulaw))
    assert np.all(np.abs(ev.pcm.astype(int) - pcm) <= np.abs(pcm) // 16 + 8)
