"""Every message builder's exact output for fixed inputs, pinned (see support.wiregolden).

The builders (``*CallerWire``, ``*AgentWire``, ``RawWire``, the Realtime wires) feed the
load generator, the mock agent and the scripted kits: a refactor must not change one byte
they send. ``wire_golden.json`` holds what each scenario below produced when it was
pinned (text messages as they are, binary ones and encoded audio as hex); a test fails on
any difference, spacing, key order, escapes and counters included.

To re-pin after a deliberate wire change (and only then): ``PYTHONPATH=$PWD:$PWD/tests python
tests/core/dialects/test_wire_golden.py --write``, and say why in the commit.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from support.wiregolden import Message, golden_tests, main

from voxproxy.core.audio.g711 import pcm_to_ulaw
from voxproxy.core.dialects import exotel, plivo, raw, telnyx, twilio, vonage
from voxproxy.core.dialects.openai_realtime import (
    PCM16,
    PCMA,
    PCMU,
    OpenAIRealtimeAgentWire,
    OpenAIRealtimeCallerWire,
)

GOLDEN = Path(__file__).with_name("wire_golden.json")


def samples(n: int, step: int = 997) -> np.ndarray:
    """``n`` fixed 16-bit samples that sweep the whole range (no randomness)."""
    return ((np.arange(n, dtype=np.int64) * step) % 65536 - 32768).astype(np.int16)


PCM = samples(160)
NAME = 'mark "ü" 1'  # a quote and a non-ASCII letter: escapes are part of the bytes


def _raw() -> list[Message]:
    w = raw.RawWire
    return [
        w.start(16000),
        w.start(8000, "call-ü"),
        w.audio(b"\x01\x02\x03"),
        w.clear(),
        w.transcript(NAME, final=False),
        w.transcript("yes", role="assistant"),
    ]


def _twilio_caller(account: str | None) -> Callable[[], list[Message]]:
    def run() -> list[Message]:
        if account is None:
            w = twilio.TwilioCallerWire("MZ" + "1" * 32, "CA" + "2" * 32)
        else:
            w = twilio.TwilioCallerWire("MZ1", "CA1", account)
        ulaw = pcm_to_ulaw(PCM)
        return [
            w.connected(),
            w.start(),
            w.start({"FirstName": "Jané", "tenant": "42"}),
            w.media(ulaw),
            w.media(ulaw[:80]),
            w.media(b""),
            w.media(ulaw[:7]),
            w.mark(NAME),
            w.dtmf("5"),
            w.stop(),
            w.mark("after-stop"),
        ]

    return run


def _twilio_agent() -> list[Message]:
    w = twilio.TwilioAgentWire("MZ" + "1" * 32)
    return [w.media(pcm_to_ulaw(PCM)), w.media(b""), w.mark(NAME), w.clear(), w.clear()]


def _stream_caller(w: Any, payloads: list[Any], digit: str) -> list[Message]:
    """A Twilio-vocabulary caller's session (Telnyx, Exotel): open, media, mark, dtmf, stop."""
    opening = [w.connected(), w.start()]  # first: the start message takes sequence number 1
    media = [w.media(p) for p in payloads]
    return [*opening, *media, w.mark(NAME), w.dtmf(digit), w.stop()]


def _telnyx_caller(encoding: str, rate: int) -> Callable[[], list[Message]]:
    def run() -> list[Message]:
        w = telnyx.TelnyxCallerWire("st-1", "v3:cc-1", encoding, rate)
        payload = telnyx.encode(PCM, encoding)
        return _stream_caller(w, [payload, payload[:40], payload[:3]], "#")

    return run


def _telnyx_agent() -> list[Message]:
    w = telnyx.TelnyxAgentWire()
    encoded = [telnyx.encode(PCM[:8], e) for e in ("PCMU", "PCMA", "L16")]
    return [*encoded, w.media(encoded[0]), w.media(b""), w.mark(NAME), w.clear()]


def _plivo_caller(content_type: str, rate: int) -> Callable[[], list[Message]]:
    def run() -> list[Message]:
        w = plivo.PlivoCallerWire("st-1", "call-1", content_type, rate)
        return [
            w.start(),
            w.encode(PCM[:8]),
            w.media(PCM),
            w.media(PCM[:40]),
            w.played_stream(NAME),
            w.cleared_audio(),
            w.dtmf("9"),
            w.media(PCM[:3]),
        ]

    return run


def _plivo_agent(content_type: str, rate: int) -> Callable[[], list[Message]]:
    def run() -> list[Message]:
        w = plivo.PlivoAgentWire("st-1", content_type, rate)
        return [w.play_audio(PCM), w.play_audio(PCM[:0]), w.checkpoint(NAME), w.clear_audio()]

    return run


def _exotel_caller(rate: int) -> Callable[[], list[Message]]:
    def run() -> list[Message]:
        w = exotel.ExotelCallerWire("st-1", "call-1", rate)
        return _stream_caller(w, [PCM, PCM[:40], PCM[:3]], "0")

    return run


def _exotel_agent() -> list[Message]:
    w = exotel.ExotelAgentWire("st-1")
    return [w.media(PCM), w.mark(NAME), w.clear()]


def _vonage() -> list[Message]:
    c8 = vonage.VonageCallerWire(8000)
    c16 = vonage.VonageCallerWire(16000, {"caller_ref": "x", "content-type": "override"})
    payload = {"name": NAME, "n": 2}
    a = vonage.VonageAgentWire
    return [
        c8.connected(),
        c16.connected(),
        c8.audio(PCM[:4]),
        c8.dtmf("3"),
        c8.dtmf("4", duration_ms=250),
        c8.notify(payload),
        c8.cleared(),
        a.audio(PCM[:4]),
        a.clear(),
        a.notify(payload),
        vonage.marker_name(payload),
    ]


def _realtime_caller(beta: bool) -> Callable[[], list[Message]]:
    def run() -> list[Message]:
        w = OpenAIRealtimeCallerWire(beta=beta)
        tools: list[dict[str, object]] = [{"type": "function", "name": "lookup"}]
        return [
            w.session_update(),
            w.session_update(PCMU, PCMA, server_vad=False),
            w.session_update(PCM16, PCMU, tools=tools),
            w.append(b"\x00\x01\x02"),
            w.commit(),
            w.truncate("item_1", 1234),
            w.truncate("item_2", 0, content_index=1),
            w.response_cancel(),
            w.response_cancel("resp_1"),
            w.response_create(),
            w.function_call_output("call_1", NAME),
            w.output_audio_buffer_clear(),
        ]

    return run


def _realtime_agent(beta: bool) -> Callable[[], list[Message]]:
    def run() -> list[Message]:
        w = OpenAIRealtimeAgentWire(beta=beta)
        return [
            w.session_created("sess_1"),
            w.session_updated("sess_1", PCMU, PCMA),
            w.speech_started(100, "item_1"),
            w.speech_stopped(900, "item_1"),
            w.committed("item_1"),
            w.committed("item_2", "item_1"),
            w.response_created("resp_1"),
            w.audio_delta("resp_1", "item_3", b"\x00\x01"),
            w.audio_done("resp_1", "item_3"),
            w.function_call_arguments_done("resp_1", "item_4", "call_1", "lookup", NAME),
            w.response_done("resp_1"),
            w.response_done("resp_2", "cancelled", "turn_detected"),
            w.input_transcription_completed("item_1", NAME),
            w.item_truncated("item_3", 420),
            w.error("bad", NAME),
        ]

    return run


SCENARIOS: dict[str, Callable[[], list[Message]]] = {
    "raw": _raw,
    "twilio caller": _twilio_caller(None),
    "twilio caller, own account sid": _twilio_caller("AC" + "9" * 32),
    "twilio agent": _twilio_agent,
    "telnyx caller PCMU 8k": _telnyx_caller("PCMU", 8000),
    "telnyx caller PCMA 8k": _telnyx_caller("PCMA", 8000),
    "telnyx caller L16 16k": _telnyx_caller("L16", 16000),
    "telnyx agent": _telnyx_agent,
    "plivo caller mulaw 8k": _plivo_caller(plivo.MULAW, 8000),
    "plivo caller L16 16k": _plivo_caller(plivo.L16, 16000),
    "plivo agent mulaw 8k": _plivo_agent(plivo.MULAW, 8000),
    "plivo agent L16 8k": _plivo_agent(plivo.L16, 8000),
    "exotel caller 8k": _exotel_caller(8000),
    "exotel caller 16k": _exotel_caller(16000),
    "exotel agent": _exotel_agent,
    "vonage": _vonage,
    "realtime caller GA": _realtime_caller(False),
    "realtime caller beta": _realtime_caller(True),
    "realtime agent GA": _realtime_agent(False),
    "realtime agent beta": _realtime_agent(True),
}


test_every_scenario_is_pinned, test_sends_the_pinned_bytes = golden_tests(GOLDEN, SCENARIOS)

if __name__ == "__main__":
    main(GOLDEN, SCENARIOS)
