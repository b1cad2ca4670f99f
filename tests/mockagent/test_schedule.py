"""When the mock agent speaks, on passed-in times (no clock, no sleep)."""

from __future__ import annotations

import random

import numpy as np

from voxproxy.mockagent.config import AgentClip, MockAgentConfig
from voxproxy.mockagent.schedule import Pending, next_response, pacing, start_of

MS = 1_000_000
RATE = 16_000
ONSET = 4_000  # 250 ms of leading silence
ONSET_NS = ONSET * 1_000_000_000 // RATE


def _clip(name: str = "a") -> AgentClip:
    return AgentClip(name, np.zeros(RATE, dtype=np.int16), RATE, ONSET)


def _answer(start_ns: int) -> Pending:
    return Pending(_clip(), False, caller_offset_ns=0, delay_ms=600.0, start_ns=start_ns)


def test_an_answer_s_speech_is_due_its_delay_after_the_caller_s_last_word() -> None:
    cfg = MockAgentConfig(responses=["a", "b"], delay_ms=600.0)
    clips = {"a": _clip("a"), "b": _clip("b")}
    p = next_response(cfg, clips, rotation=0, rng=random.Random(1), caller_offset_ns=5_000 * MS)
    assert p.clip.name == "a" and not p.greeting and not p.held
    assert p.start_ns + ONSET_NS == 5_600 * MS  # the onset, not the first sample, is on time
    again = next_response(cfg, clips, rotation=3, rng=random.Random(1), caller_offset_ns=0)
    assert again.clip.name == "b"  # the rotation goes round the response names


def test_jitter_stays_within_its_bound_and_follows_the_seed() -> None:
    cfg = MockAgentConfig(responses=["a"], delay_ms=600.0, jitter_ms=100.0)
    clips = {"a": _clip()}
    delays = [next_response(cfg, clips, 0, random.Random(s), 0).delay_ms for s in range(50)]
    assert all(500.0 <= d <= 700.0 for d in delays)
    assert len(set(delays)) > 1
    same = [next_response(cfg, clips, 0, random.Random(s), 0).delay_ms for s in range(50)]
    assert same == delays


def test_an_answer_on_time_plays_from_its_first_sample() -> None:
    start = start_of(_answer(1_000 * MS), now_ns=1_000 * MS + MS)  # within the 2 ms slack
    assert (start.t0_ns, start.skip) == (1_000 * MS, 0)
    assert start.speech_ns == 1_000 * MS + ONSET_NS


def test_a_late_turn_skips_leading_silence_to_keep_the_speech_on_time() -> None:
    late_ns = 100 * MS
    start = start_of(_answer(1_000 * MS), now_ns=1_000 * MS + late_ns)
    assert start.skip == late_ns * RATE // 1_000_000_000  # 100 ms of samples
    assert start.t0_ns == 1_000 * MS + late_ns
    assert start.speech_ns == 1_000 * MS + ONSET_NS  # as planned


def test_a_turn_later_than_the_silence_starts_on_speech_now() -> None:
    now = 1_000 * MS + ONSET_NS + 50 * MS
    start = start_of(_answer(1_000 * MS), now_ns=now)
    assert start.skip == ONSET
    assert start.t0_ns == start.speech_ns == now


def test_a_greeting_starts_when_its_turn_comes() -> None:
    greeting = Pending(_clip(), True, None, 0.0, start_ns=0)
    start = start_of(greeting, now_ns=7 * MS)
    assert (start.t0_ns, start.skip, start.speech_ns) == (7 * MS, 0, 7 * MS + ONSET_NS)


def test_paced_chunks_keep_real_time_and_bursts_run_ahead() -> None:
    assert pacing(MockAgentConfig(send_mode="paced", paced_chunk_ms=20), RATE) == (320, 20 * MS)
    burst = MockAgentConfig(send_mode="burst", burst_chunk_ms=200, burst_speedup=10.0)
    assert pacing(burst, 8_000) == (1_600, 20 * MS)  # 200 ms of audio every 20 ms
