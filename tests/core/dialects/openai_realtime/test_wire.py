"""Dialect ``openai-realtime``: the message builders, both directions, GA and beta: what they
build decodes to what it means, and follows the protocol (their exact bytes are pinned in
../test_wire_golden.py)."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from support import dialectkit as kit
from support.dialectkit import AGENT, CALLER
from support.realtimekit import T, decoder

from voxproxy.core.audio.g711 import pcm_to_ulaw, ulaw_to_pcm
from voxproxy.core.audio.pcm import bytes_to_pcm
from voxproxy.core.dialects.openai_realtime import (
    PCM16,
    PCMA,
    PCMU,
    OpenAIRealtimeAgentWire,
    OpenAIRealtimeCallerWire,
)
from voxproxy.core.events import Audio, Flush, StageMark, StreamStart

# -- message builders, both directions, GA and beta ----------------------------------------


@pytest.mark.parametrize("beta", [False, True])
def test_builders_round_trip(beta: bool) -> None:
    client = OpenAIRealtimeCallerWire(beta=beta)
    server = OpenAIRealtimeAgentWire(beta=beta)
    dec = decoder()
    pcm = np.arange(-2400, 2400, 10, dtype=np.int16)
    ulaw = pcm_to_ulaw(pcm)
    steps = [
        (AGENT, server.session_created("sess_9"), [StreamStart("sess_9", 24000, "pcm_s16le", T)]),
        (CALLER, client.session_update(PCMU, PCM16), []),
        (AGENT, server.session_updated("sess_9", PCMU, PCM16), []),
        (CALLER, client.append(ulaw), [Audio(CALLER, ulaw_to_pcm(ulaw), 8000, T)]),
        (CALLER, client.commit(), []),
        (
            AGENT,
            server.speech_started(0, "item_u"),
            [StageMark("server_speech_started", T, T - 60_000_000)],
        ),
        (AGENT, server.speech_stopped(60, "item_u"), [StageMark("server_speech_stopped", T, T)]),
        (AGENT, server.committed("item_u"), []),
        (AGENT, server.response_created("resp_1"), [StageMark("response_created", T)]),
        (
            AGENT,
            server.audio_delta("resp_1", "item_a", PCM16.encode(pcm)),
            [StageMark("first_audio_delta", T), Audio(AGENT, pcm, 24000, T)],
        ),
        (AGENT, server.audio_done("resp_1", "item_a"), []),
        (
            CALLER,
            client.truncate("item_a", 15),
            [Flush(T, "conversation.item.truncate", 15.0, "item_a")],
        ),
        (AGENT, server.item_truncated("item_a", 15), []),
        (CALLER, client.response_cancel("resp_1"), [Flush(T, "response.cancel")]),
        (CALLER, client.output_audio_buffer_clear(), [Flush(T, "output_audio_buffer.clear")]),
        (
            AGENT,
            server.response_done("resp_1", "cancelled", "client_cancelled"),
            [StageMark("response_done", T, detail="cancelled/client_cancelled")],
        ),
        (AGENT, server.error("bad", "nope"), []),
        (CALLER, client.response_create(), []),
    ]
    kit.round_trip(dec, steps, T)


def test_builder_messages_follow_the_protocol() -> None:
    ga = json.loads(OpenAIRealtimeCallerWire().session_update(PCMU, PCMA))
    assert ga == {
        "type": "session.update",
        "session": {
            "type": "realtime",
            "audio": {
                "input": {
                    "format": {"type": "audio/pcmu"},
                    "turn_detection": {"type": "server_vad"},
                },
                "output": {"format": {"type": "audio/pcma"}},
            },
        },
    }
    pcm = json.loads(OpenAIRealtimeCallerWire().session_update())
    assert pcm["session"]["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
    beta = json.loads(OpenAIRealtimeCallerWire(beta=True).session_update(PCM16, PCMU))
    assert beta["session"]["input_audio_format"] == "pcm16"
    assert beta["session"]["output_audio_format"] == "g711_ulaw"
    truncate = json.loads(OpenAIRealtimeCallerWire.truncate("item_1", 1730))
    assert truncate == {
        "type": "conversation.item.truncate",
        "item_id": "item_1",
        "content_index": 0,
        "audio_end_ms": 1730,
    }
    server = OpenAIRealtimeAgentWire()
    d = json.loads(server.audio_delta("r", "i", b"\x01\x00"))
    assert (
        d["type"] == "response.output_audio.delta" and base64.b64decode(d["delta"]) == b"\x01\x00"
    )
    assert bytes_to_pcm(base64.b64decode(d["delta"])).tolist() == [1]
    assert json.loads(OpenAIRealtimeAgentWire(beta=True).audio_delta("r", "i", b""))["type"] == (
        "response.audio.delta"
    )
    done = json.loads(server.response_done("r", "cancelled", "turn_detected"))
    assert done["response"]["status_details"]["reason"] == "turn_detected"
    assert done["event_id"] != d["event_id"]
