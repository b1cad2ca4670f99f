"""The mock agent's turn-taking on passed-in times: caller messages stamped ``t_ns``
go straight into a call (no socket, no clock, no sleep), and its decisions (the
caller's turn, the answer's schedule, a barge-in and the stop it plans) are read back.
The speaker and the timers, which read the clock and send, are the shell around this
(tests/mockagent/test_server.py runs them over loopback)."""

from __future__ import annotations

from typing import cast

import numpy as np
from websockets.asyncio.server import ServerConnection

from voxproxy.clips import load_clips
from voxproxy.core.timebase import NS_PER_MS, NS_PER_S
from voxproxy.mockagent.call import Call
from voxproxy.mockagent.config import MockAgentConfig
from voxproxy.mockagent.server import MockAgent
from voxproxy.simcall.log import CallLog, ResponseLog

RATE = 16_000
FRAME = 320  # 20 ms
T0 = 1_000 * NS_PER_S  # the clock time of the caller's first sample
LEAD_MS = 300.0


def _call(**config: object) -> Call:
    cfg = MockAgentConfig(responses=["agent_reprompt"], **config)  # type: ignore[arg-type]
    log = CallLog(index=0, path="/", headers={}, subprotocol=None)
    return Call(MockAgent(cfg), cast(ServerConnection, None), log)


def _speak(call: Call, name: str, *, start_ms: float, total_ms: float) -> None:
    """The caller's audio: clip ``name`` at ``start_ms`` on a silent timeline, sent in 20 ms
    frames, each stamped when its last sample was captured."""
    pcm = np.zeros(round(total_ms * RATE / 1000), dtype=np.int16)
    clip = load_clips()[name].pcm
    a = round(start_ms * RATE / 1000)
    pcm[a : a + clip.size] = clip[: pcm.size - a]
    for k in range(pcm.size // FRAME):
        t_ns = T0 + (k + 1) * FRAME * NS_PER_S // RATE
        call._on_message(pcm[k * FRAME : (k + 1) * FRAME].astype("<i2").tobytes(), t_ns)


def _true_ns(at_ms: float) -> int:
    return T0 + round(at_ms * NS_PER_MS)


def test_the_answer_is_scheduled_its_delay_after_the_caller_s_true_offset() -> None:
    call = _call(delay_ms=600.0)
    hello = load_clips()["caller_hello"]
    _speak(call, "caller_hello", start_ms=LEAD_MS, total_ms=LEAD_MS + hello.duration_ms + 1_500)
    [spurt] = call.log.caller_spurts
    assert abs(spurt.offset_ns - _true_ns(LEAD_MS + hello.offset_ms)) < 30 * NS_PER_MS
    assert abs(spurt.onset_ns - _true_ns(LEAD_MS + hello.onset_ms)) < 30 * NS_PER_MS
    pending = call.pending
    assert pending is not None and not pending.held
    clip = pending.clip
    onset_ns = clip.onset_sample * NS_PER_S // clip.sample_rate_hz
    assert pending.start_ns + onset_ns == spurt.offset_ns + 600 * NS_PER_MS


def _playing(call: Call, until_ns: int) -> ResponseLog:
    r = ResponseLog(1, "agent_reprompt", False, 0, None, 600.0, None, 0, T0, T0, 1)
    call.playing, call.playing_end_ns = r, until_ns
    return r


def test_a_caller_talking_over_the_answer_is_a_barge_in_with_a_planned_stop() -> None:
    call = _call(barge_in="flush", reaction_ms=150.0)
    r = _playing(call, until_ns=T0 + 10 * NS_PER_S)
    hello = load_clips()["caller_hello"]
    _speak(call, "caller_hello", start_ms=LEAD_MS, total_ms=LEAD_MS + hello.duration_ms + 1_500)
    assert r.interrupted_ns is not None
    true_onset = _true_ns(LEAD_MS + hello.onset_ms)
    assert true_onset <= r.interrupted_ns <= true_onset + 300 * NS_PER_MS  # heard, not guessed
    assert call.stop_at_ns == r.interrupted_ns + 150 * NS_PER_MS
    assert len(call.log.caller_spurts) == 1 and call.pending is not None  # and it is answered


def test_an_agent_that_never_yields_ignores_the_turn_it_was_talked_over_in() -> None:
    call = _call(barge_in="never")
    r = _playing(call, until_ns=T0 + 10 * NS_PER_S)
    hello = load_clips()["caller_hello"]
    _speak(call, "caller_hello", start_ms=LEAD_MS, total_ms=LEAD_MS + hello.duration_ms + 1_500)
    assert r.interrupted_ns is not None  # it heard the caller ...
    assert call.stop_at_ns is None  # ... and plans no stop
    assert (call.log.ignored_spurts, call.pending) == (1, None)


def test_a_cough_is_not_a_turn_to_answer() -> None:
    cough = load_clips()["noise_cough"]
    call = _call()
    _speak(call, "noise_cough", start_ms=LEAD_MS, total_ms=LEAD_MS + cough.duration_ms + 1_500)
    assert call.pending is None
    assert call.log.noise_spurts == len(call.log.caller_spurts) >= 1
