"""The mock agent as an OpenAI Realtime server (``voxproxy/mockagent/realtime.py``) on
passed-in times: client messages stamped ``t_ns`` go straight into a call whose socket
only records what is sent (no clock, no sleep but the loop's own turns), and the
protocol around the mock's turn-taking is read back: session formats, the server VAD's
events and their positions, function-call turns, truncation and cancel."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import numpy as np
from websockets.asyncio.server import ServerConnection

from voxproxy.clips import load_clips
from voxproxy.core.audio.resample import resample_linear
from voxproxy.core.dialects.openai_realtime import PCM16, PCMU, OpenAIRealtimeCallerWire
from voxproxy.core.timebase import NS_PER_MS, NS_PER_S
from voxproxy.mockagent.config import MockAgentConfig
from voxproxy.mockagent.realtime import PREFIX_PADDING_MS, RealtimeCall
from voxproxy.mockagent.server import MockAgent
from voxproxy.simcall.log import CallLog, ResponseLog

RATE = PCM16.sample_rate_hz  # what the client appends (24 kHz PCM)
FRAME = RATE // 50  # 20 ms
T0 = 1_000 * NS_PER_S
LEAD_MS = 300.0
CLIENT = OpenAIRealtimeCallerWire()


class Sent:
    """The call's socket: every message it was asked to send, decoded."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def send(self, message: str | bytes) -> None:
        self.messages.append(json.loads(message))

    def types(self) -> list[str]:
        return [m["type"] for m in self.messages]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m["type"] == kind]


def _call(**config: Any) -> tuple[RealtimeCall, Sent]:
    cfg = MockAgentConfig(dialect="openai-realtime", responses=["agent_reprompt"], **config)
    sent = Sent()
    log = CallLog(index=3, path="/", headers={}, subprotocol=None)
    return RealtimeCall(MockAgent(cfg), cast(ServerConnection, sent), log), sent


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def _speak(call: RealtimeCall, name: str, start_ms: float, total_ms: float, t0: int = T0) -> int:
    """Clip ``name`` at ``start_ms`` on a silent timeline, appended in 20 ms frames each
    stamped when its last sample was captured; the time of the last frame."""
    clip = load_clips()[name]
    speech = resample_linear(clip.pcm, clip.sample_rate_hz, RATE)
    pcm = np.zeros(round(total_ms * RATE / 1000), dtype=np.int16)
    a = round(start_ms * RATE / 1000)
    pcm[a : a + speech.size] = speech[: pcm.size - a]
    t_ns = t0
    for k in range(pcm.size // FRAME):
        t_ns = t0 + (k + 1) * FRAME * NS_PER_S // RATE
        call._on_message(CLIENT.append(pcm[k * FRAME : (k + 1) * FRAME].tobytes()), t_ns)
    return t_ns


def _turn(call: RealtimeCall, t0: int = T0) -> int:
    hello = load_clips()["caller_hello"]
    return _speak(call, "caller_hello", LEAD_MS, LEAD_MS + hello.duration_ms + 1_500, t0)


async def test_a_session_update_sets_both_formats_and_the_clips_follow_the_output() -> None:
    call, sent = _call()
    assert call.clips["agent_reprompt"].sample_rate_hz == PCM16.sample_rate_hz
    call._on_message(CLIENT.session_update(PCM16, PCMU), T0)
    await _settle()
    (updated,) = sent.of("session.updated")
    audio = updated["session"]["audio"]
    assert audio["input"]["format"] == PCM16.ga_object()
    assert audio["output"]["format"] == PCMU.ga_object()
    assert (call.in_format, call.out_format) == (PCM16, PCMU)
    assert call.clips["agent_reprompt"].sample_rate_hz == 8000  # the answer's rate, now
    beta = OpenAIRealtimeCallerWire(beta=True)
    call._on_message(beta.session_update(PCMU, PCM16), T0 + 1)
    await _settle()
    assert (call.in_format, call.out_format) == (PCMU, PCM16)
    assert call.clips["agent_reprompt"].sample_rate_hz == PCM16.sample_rate_hz


async def test_a_caller_turn_is_announced_as_a_server_vad_would_then_answered() -> None:
    call, sent = _call()
    _turn(call)
    await _settle()
    types = sent.types()
    start = types.index("input_audio_buffer.speech_started")
    assert types[start:] == [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "response.created",
    ]
    (started,) = sent.of("input_audio_buffer.speech_started")
    (stopped,) = sent.of("input_audio_buffer.speech_stopped")
    (committed,) = sent.of("input_audio_buffer.committed")
    assert started["item_id"] == stopped["item_id"] == committed["item_id"] == "item_u3_1"
    # Speech starts where the appended audio stood when the VAD heard it, less the prefix
    # padding; it stops at "all audio appended so far" when the turn closed: past the
    # speech's end (the silence the VAD waited), before the rest appended after it.
    hello = load_clips()["caller_hello"]
    onset_ms, offset_ms = LEAD_MS + hello.onset_ms, LEAD_MS + hello.offset_ms
    heard_at_ms = started["audio_start_ms"] + PREFIX_PADDING_MS  # heard within 100 ms
    assert onset_ms <= heard_at_ms <= onset_ms + 100
    assert offset_ms < stopped["audio_end_ms"] < call.appended_ns // NS_PER_MS
    assert call.pending is not None and call.pending_ids == ("resp_3_1", "item_3_1")
    assert sent.of("response.created")[0]["response"]["id"] == "resp_3_1"


async def test_a_tool_turn_is_answered_by_a_function_call_then_by_speech_after_its_output() -> None:
    call, sent = _call(realtime_tool_turns=(0,), realtime_followup_ms=250.0)
    end = _turn(call)
    await _settle()
    assert sent.types()[-5:] == [
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "response.created",
        "response.function_call_arguments.done",
        "response.done",
    ]
    (fn,) = sent.of("response.function_call_arguments.done")
    assert fn["call_id"] == "call_3_0" and fn["name"] == call.cfg.tool_name
    assert json.loads(fn["arguments"]) == {"turn": 0, "order": "A0000"}
    assert call.pending is None and call.awaiting_tool is not None
    call._on_message(CLIENT.response_create(), end + 10 * NS_PER_MS)  # before the output
    await _settle()
    assert len(sent.of("response.created")) == 1 and call.pending is None
    t = end + 100 * NS_PER_MS
    call._on_message(CLIENT.function_call_output("call_3_0", '{"ok": true}'), t)
    call._on_message(CLIENT.response_create(), t)
    await _settle()
    assert [m["response"]["id"] for m in sent.of("response.created")] == ["resp_3_1", "resp_3_2"]
    p = call.pending
    assert p is not None and call.pending_ids == ("resp_3_2", "item_3_2")
    onset_ns = p.clip.onset_sample * NS_PER_S // p.clip.sample_rate_hz
    assert p.start_ns + onset_ns == t + 250 * NS_PER_MS  # the follow-up's onset, as configured


async def test_a_truncate_is_confirmed_with_the_claimed_end() -> None:
    call, sent = _call()
    call._on_message(CLIENT.truncate("item_3_1", 1234), T0)
    await _settle()
    (truncated,) = sent.of("conversation.item.truncated")
    assert truncated["item_id"] == "item_3_1" and truncated["audio_end_ms"] == 1234


async def test_a_response_cancel_stops_the_answer_playing_and_only_that() -> None:
    call, _ = _call()
    call._on_message(CLIENT.response_cancel(), T0)  # nothing playing: nothing to stop
    assert call.stop_reason is None and call.stop_at_ns is None
    r = ResponseLog(1, "agent_reprompt", False, 0, None, 600.0, None, 0, T0, T0, 1)
    call.playing = r
    call.response_ids[r.index] = ("resp_3_1", "item_3_1")
    call._on_message(CLIENT.response_cancel(), T0 + 5)
    assert call.stop_reason == "client_cancelled" and call.stop_at_ns == T0 + 5
    assert call.wake.is_set()
    call.stop_reason = call.stop_at_ns = None
    call.done.add("resp_3_1")  # already done: a late cancel changes nothing
    call._on_message(CLIENT.response_cancel(), T0 + 6)
    assert call.stop_reason is None and call.stop_at_ns is None
