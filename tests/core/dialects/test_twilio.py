"""Dialect ``twilio``'s message builders (``voxproxy/core/dialects/twilio.py``,
docs/protocols.md section 3): what the load generator's caller and the mock agent send,
field by field, and their round trip through the decoder."""

from __future__ import annotations

import base64
import json

import numpy as np
from support import dialectkit as kit
from support.dialectkit import AGENT, CALLER
from support.eventview import views

from voxproxy.core.audio.g711 import pcm_to_ulaw, ulaw_to_pcm
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.twilio import TwilioAgentWire, TwilioCallerWire, TwilioDecoder
from voxproxy.core.events import Audio, StreamStart

T = 987_654_321
STREAM = "MZ" + "1" * 32
CALL = "CA" + "2" * 32


def test_wires_round_trip() -> None:
    caller = TwilioCallerWire(STREAM, CALL)
    agent = TwilioAgentWire(STREAM)
    ulaw = pcm_to_ulaw(np.arange(-800, 800, 10, dtype=np.int16))
    ulaw_agent = pcm_to_ulaw(np.full(160, 1234, dtype=np.int16))
    said = (ulaw, Audio(CALLER, ulaw_to_pcm(ulaw), 8000, T))
    answered = (ulaw_agent, Audio(AGENT, ulaw_to_pcm(ulaw_agent), 8000, T))
    start = [StreamStart(CALL, 8000, "audio/x-mulaw", T)]
    dec = TwilioDecoder(DialectOptions())
    kit.twilio_round_trip(dec, caller, agent, T, start, (said, answered), {"FirstName": "Jane"})
    empty = caller.media(b"")
    assert views(dec.decode(CALLER, empty, T)) == views([Audio(CALLER, ulaw_to_pcm(b""), 8000, T)])


def test_caller_wire_field_types_follow_the_protocol() -> None:
    wire = TwilioCallerWire(STREAM, CALL)
    connected = json.loads(wire.connected())
    assert connected == {"event": "connected", "protocol": "Call", "version": "1.0.0"}
    start = json.loads(wire.start({"FirstName": "Jane"}))
    assert start["event"] == "start"
    assert start["sequenceNumber"] == "1"
    assert start["streamSid"] == start["start"]["streamSid"] == STREAM
    assert start["start"]["callSid"] == CALL
    assert start["start"]["tracks"] == ["inbound"]
    assert start["start"]["customParameters"] == {"FirstName": "Jane"}
    fmt = start["start"]["mediaFormat"]
    assert fmt == {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}
    assert type(fmt["sampleRate"]) is int and type(fmt["channels"]) is int

    media = [json.loads(wire.media(b"\xff" * n)) for n in (160, 160, 80, 160)]
    for m in media:
        assert m["event"] == "media"
        assert m["streamSid"] == STREAM
        assert m["media"]["track"] == "inbound"
        for key in ("chunk", "timestamp"):
            assert isinstance(m["media"][key], str)
        assert isinstance(m["sequenceNumber"], str)
    assert [m["sequenceNumber"] for m in media] == ["2", "3", "4", "5"]
    assert [m["media"]["chunk"] for m in media] == ["1", "2", "3", "4"]  # chunk starts at 1
    assert [m["media"]["timestamp"] for m in media] == ["0", "20", "40", "50"]  # ms of audio
    assert base64.b64decode(media[2]["media"]["payload"]) == b"\xff" * 80

    mark = json.loads(wire.mark("x"))
    assert mark["mark"] == {"name": "x"} and mark["sequenceNumber"] == "6"
    dtmf = json.loads(wire.dtmf("9"))
    assert dtmf["dtmf"] == {"track": "inbound_track", "digit": "9"}
    stop = json.loads(wire.stop())
    assert stop["stop"]["callSid"] == CALL
    assert [json.loads(x)["sequenceNumber"] for x in (wire.mark("y"), wire.stop())] == ["9", "10"]


def test_caller_media_text_is_what_json_dumps_writes() -> None:
    # The caller's media message is laid out by hand (the load generator's hot path); it
    # must be the very text json.dumps gives for the message, whatever the stream id
    # (quotes, backslashes, non-ASCII: escaped as json.dumps escapes them), with the
    # sequence number shared with the wire's other messages.
    rng = np.random.default_rng(5)
    for sid in (STREAM, 'MZ"quoted"\\back', "MZ\u00e9\u2028\n", ""):
        wire = TwilioCallerWire(sid, CALL)
        wire.connected()
        seq, chunk, sent_ms = 1, 0, 0  # start carries sequence number 1
        wire.start()
        for n in (160, 0, 80, 161, 4000):
            ulaw = rng.bytes(n)
            seq, chunk = seq + 1, chunk + 1
            expected = {
                "event": "media",
                "sequenceNumber": str(seq),
                "media": {
                    "track": "inbound",
                    "chunk": str(chunk),
                    "timestamp": str(sent_ms),
                    "payload": base64.b64encode(ulaw).decode(),
                },
                "streamSid": sid,
            }
            assert wire.media(ulaw) == json.dumps(expected)
            sent_ms += n // 8
            seq += 1
            assert json.loads(wire.mark("m"))["sequenceNumber"] == str(seq)


def test_agent_wire_messages_follow_the_protocol() -> None:
    wire = TwilioAgentWire(STREAM)
    media = json.loads(wire.media(b"\x00\x01"))
    assert media == {
        "event": "media",
        "streamSid": STREAM,
        "media": {"payload": base64.b64encode(b"\x00\x01").decode()},
    }
    assert json.loads(wire.mark("m")) == {
        "event": "mark",
        "streamSid": STREAM,
        "mark": {"name": "m"},
    }
    assert json.loads(wire.clear()) == {"event": "clear", "streamSid": STREAM}
