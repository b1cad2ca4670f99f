"""Bad input per dialect through a live proxy on loopback: every message of a wire's
oddities (binary where text is due, malformed JSON, wrong types, huge payloads, unknown
events) is forwarded unchanged both ways and counted in the receipt, never raised.
(Split from ``test_websocket_faults.py``.)"""

from __future__ import annotations

import base64
import json

import pytest
from support.faultkit import media, router_agent, running_proxy, settle
from support.waiting import wait_until
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection

_B64_BIG = base64.b64encode(b"\xff" * 300_000).decode()
_COMMON: list[bytes | str] = [
    b"\x00\x01\x02 binary",
    b"",
    "",
    "{not json",
    "[1, 2, 3]",
    "null",
    json.dumps({"event": 17, "type": ["x"]}),
    "\ud7ff\ue000 odd unicode \u202e",
]
BAD_INPUT: dict[str, tuple[list[bytes | str], list[bytes | str]]] = {
    "raw": (
        [
            json.dumps({"type": "start", "sample_rate": "fast"}),
            json.dumps({"type": "start", "sample_rate": 3}),
            b"\x01",  # an odd byte: carried over
            b"\x02" * 300_001,
        ],
        [json.dumps({"type": "transcript", "text": 5}), json.dumps({"type": "clear"})],
    ),
    "twilio": (
        [
            json.dumps({"event": "media", "media": {"payload": "%%%"}}),
            json.dumps({"event": "start", "start": "no"}),
            json.dumps({"event": "stop"}),
            json.dumps({"event": "start", "start": {"mediaFormat": {"sampleRate": 44100}}}),
            media(_B64_BIG),
        ],
        [json.dumps({"event": "clear"}), json.dumps({"event": "mark", "mark": {}})],
    ),
    "telnyx": (
        [
            json.dumps({"event": "media", "media": {"payload": 5}}),
            json.dumps({"event": "start", "start": {"media_format": {"encoding": "OPUS"}}}),
            json.dumps({"event": "media", "media": {"payload": _B64_BIG}}),
        ],
        [json.dumps({"event": "clear"}), json.dumps({"event": "media", "media": None})],
    ),
    "plivo": (
        [
            json.dumps({"event": "media", "media": {"payload": "==="}}),
            json.dumps({"event": "start", "start": {"mediaFormat": {"sampleRate": -1}}}),
        ],
        [
            json.dumps({"event": "playAudio", "media": {"payload": "x", "sampleRate": "a"}}),
            json.dumps({"event": "clearAudio"}),
            json.dumps({"event": "checkpoint"}),
        ],
    ),
    "vonage": (
        [
            json.dumps({"event": "websocket:connected", "content-type": "audio/l16;rate=7"}),
            b"\x00" * 641,
        ],
        [json.dumps({"action": "clear"}), b"\x01" * 3],
    ),
    "exotel": (
        [
            json.dumps({"event": "media", "media": {"payload": "@@"}}),
            json.dumps({"event": "start", "start": {"media_format": {"sample_rate": "x"}}}),
            json.dumps({"event": "dtmf", "dtmf": 5}),
        ],
        [json.dumps({"event": "clear"}), json.dumps({"event": "mark"})],
    ),
    "openai-realtime": (
        [
            json.dumps({"type": "input_audio_buffer.append", "audio": "###"}),
            json.dumps({"type": "input_audio_buffer.append", "audio": _B64_BIG}),
            json.dumps({"type": "session.update", "session": {"input_audio_format": "mp3"}}),
            json.dumps({"type": "conversation.item.truncate", "item_id": 5}),
            json.dumps({"type": "response.cancel"}),
        ],
        [
            json.dumps({"type": "response.output_audio.delta", "delta": 7}),
            json.dumps({"type": "response.done", "response": "done"}),
            json.dumps({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": -5}),
            json.dumps({"type": "response.function_call_arguments.done", "call_id": 1}),
        ],
    ),
    "auto": ([b"\x00" * 7, "{}", json.dumps({"event": "connected"})], [json.dumps({"x": 1})]),
}


@pytest.mark.parametrize("dialect", sorted(BAD_INPUT))
async def test_bad_input_per_dialect_is_forwarded_unchanged_and_counted(dialect: str) -> None:
    caller_bad = _COMMON + BAD_INPUT[dialect][0]
    agent_bad = _COMMON + BAD_INPUT[dialect][1]
    got_by_agent: list[bytes | str] = []

    async def scripted(ws: ServerConnection) -> None:
        for m in agent_bad:
            await ws.send(m)
        async for m in ws:
            got_by_agent.append(m)

    async with router_agent(bad=scripted) as agent:
        async with running_proxy(agent.url, dialect=dialect) as (port, receipts, proxy):
            async with connect(f"ws://127.0.0.1:{port}/bad/x", max_size=None) as ws:
                got_by_caller = [await ws.recv() for _ in agent_bad]
                for m in caller_bad:
                    await ws.send(m)
                await wait_until(lambda: len(got_by_agent) == len(caller_bad))
            await settle(receipts, 1, proxy)
    assert got_by_caller == agent_bad
    assert got_by_agent == caller_bad
    r = receipts[0]
    assert r.terminal in ("caller_closed", "completed")
    assert r.anomalies.get("measurement_error", 0) == 0, r.anomalies
    assert sum(r.anomalies.values()) >= len(_COMMON)  # each oddity counted, none raised
    assert r.traffic.caller_to_agent_messages == len(caller_bad)
    assert r.traffic.agent_to_caller_messages == len(agent_bad)
