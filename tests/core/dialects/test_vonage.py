"""Dialect ``vonage``: Vonage Voice API websockets (docs/protocols.md section 4)."""

from __future__ import annotations

import json

import numpy as np
from support import dialectkit as kit
from support.dialectkit import AGENT, CALLER, PCM, Kind, msg

from voxproxy.core.audio.pcm import pcm_to_bytes
from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.vonage import (
    VonageAgentWire,
    VonageCallerWire,
    VonageDecoder,
    marker_name,
)
from voxproxy.core.events import Audio, Dtmf, Flush, MarkEcho, MarkSent, StreamStart

T = 7_000
L16 = pcm_to_bytes(PCM)


anomaly = kit.anomaly_at(T)
unknown = kit.unknown_at(T)


CASES = [  # (name, direction, message, events): support.dialectkit.Case
    (
        "connected",
        CALLER,
        json.dumps(
            {"event": "websocket:connected", "content-type": "audio/l16;rate=16000", "x": "1"}
        ),
        [StreamStart(None, 16000, "pcm_s16le", T)],
    ),
    (
        "connected at 8 kHz",
        CALLER,
        json.dumps({"event": "websocket:connected", "content-type": "audio/l16;rate=8000"}),
        [StreamStart(None, 8000, "pcm_s16le", T)],
    ),
    ("caller audio", CALLER, L16, [Audio(CALLER, PCM, 16000, T)]),
    ("agent audio", AGENT, L16, [Audio(AGENT, PCM, 16000, T)]),
    ("empty binary", AGENT, b"", []),
    ("dtmf", CALLER, msg(event="websocket:dtmf", digit="5", duration=260), [Dtmf(T)]),
    ("clear", AGENT, msg(action="clear"), [Flush(T, "clear")]),
    ("cleared", CALLER, msg(event="websocket:cleared"), []),
    (
        "notify",
        AGENT,
        msg(action="notify", payload={"b": 2, "a": "resp-1"}),
        [MarkSent('{"a":"resp-1","b":2}', T)],
    ),
    (
        "notify echo",
        CALLER,
        msg(event="websocket:notify", payload={"a": "resp-1", "b": 2}),
        [MarkEcho('{"a":"resp-1","b":2}', T)],
    ),
    ("unknown action", AGENT, msg(action="transfer"), unknown(AGENT)),
    ("unknown event", CALLER, msg(event="websocket:media:update"), unknown(CALLER)),
]

BAD = [  # (name, direction, message, anomaly kind): support.dialectkit.Bad
    ("malformed JSON", CALLER, "{", Kind.MALFORMED),
    ("agent text without an action", AGENT, msg(event="clearAudio"), Kind.MALFORMED),
    ("caller text without an event", CALLER, msg(action="clear"), Kind.MALFORMED),
    ("notify without a payload", AGENT, msg(action="notify"), Kind.MALFORMED),
    ("notify echo without a payload", CALLER, msg(event="websocket:notify"), Kind.MALFORMED),
    (
        "an unknown content type",
        CALLER,
        json.dumps({"event": "websocket:connected", "content-type": "audio/opus"}),
        Kind.BAD_AUDIO,
    ),
    (
        "a rate Vonage does not send",
        CALLER,
        json.dumps({"event": "websocket:connected", "content-type": "audio/l16;rate=44100"}),
        Kind.BAD_AUDIO,
    ),
]


test_decode, test_bad_input_is_an_anomaly, test_registered_name = kit.table_tests(
    "vonage", lambda: VonageDecoder(DialectOptions()), T, CASES, BAD
)


def test_the_connected_rate_applies_to_both_directions_and_odd_bytes_carry() -> None:
    dec = VonageDecoder(DialectOptions())
    dec.decode(CALLER, VonageCallerWire(8000).connected(), T)
    a = dec.decode(AGENT, L16[:3], T)
    b = dec.decode(AGENT, L16[3:], T)
    got = np.concatenate([e.pcm for e in a + b if isinstance(e, Audio)])
    np.testing.assert_array_equal(got, PCM)
    assert all(e.sample_rate_hz == 8000 for e in a + b if isinstance(e, Audio))


def test_wires_round_trip() -> None:
    caller = VonageCallerWire(16000, {"caller_ref": "x"})
    agent = VonageAgentWire()
    dec = make_decoder("vonage")
    payload = {"name": "resp-3"}
    steps = [
        (CALLER, caller.connected(), [StreamStart(None, 16000, "pcm_s16le", T)]),
        (CALLER, caller.audio(PCM), [Audio(CALLER, PCM, 16000, T)]),
        (AGENT, agent.audio(PCM), [Audio(AGENT, PCM, 16000, T)]),
        (AGENT, agent.notify(payload), [MarkSent(marker_name(payload), T)]),
        (CALLER, caller.notify(payload), [MarkEcho(marker_name(payload), T)]),
        (AGENT, agent.clear(), [Flush(T, "clear")]),
        (CALLER, caller.cleared(), []),
        (CALLER, caller.dtmf("3"), [Dtmf(T)]),
    ]
    kit.round_trip(dec, steps, T)
    assert json.loads(caller.connected())["caller_ref"] == "x"
