"""What one scripted call records (``voxproxy/loadgen/record.py``): when each received
agent sample played, from the chunks it came in, and the agent's talk-spurts as the
caller's detector closes them."""

from __future__ import annotations

from collections import deque
from typing import Any, cast

from voxproxy.core.analysis.vadconfig import Spurt
from voxproxy.core.timebase import NS_PER_S
from voxproxy.loadgen.record import AgentChunk, CallRecord

MS = NS_PER_S // 1000


def test_a_sample_plays_at_its_chunk_s_start_plus_its_offset_at_the_agent_s_rate() -> None:
    rec = CallRecord(agent_rate_hz=8000)
    rec.agent_chunks = [
        AgentChunk(stream_pos=0, n=800, play_ns=1_000 * MS, arrival_ns=900 * MS),
        # A gap in playout (an underrun): the next run starts later than 100 ms on.
        AgentChunk(stream_pos=800, n=1600, play_ns=1_500 * MS, arrival_ns=1_450 * MS),
    ]
    assert rec.play_time(0) == 1_000 * MS
    assert rec.play_time(80) == 1_010 * MS  # 80 samples at 8 kHz: 10 ms
    assert rec.play_time(799) == 1_000 * MS + 799 * NS_PER_S // 8000
    assert rec.play_time(800) == 1_500 * MS
    assert rec.play_time(2399) == 1_500 * MS + 1599 * NS_PER_S // 8000
    assert rec.play_time(2400) is None  # never received
    assert CallRecord(agent_rate_hz=8000).play_time(0) is None


def test_play_times_are_whole_nanoseconds_rounded_down() -> None:
    rec = CallRecord(agent_rate_hz=24000)
    rec.agent_chunks = [AgentChunk(stream_pos=10, n=3, play_ns=7, arrival_ns=0)]
    assert [rec.play_time(p) for p in (9, 10, 11, 12, 13)] == [None, 7, 41673, 83340, None]


class FakeDetector:
    """The caller's detector of the agent, as far as the record uses it."""

    def __init__(self) -> None:
        self.spurts: deque[Spurt] = deque()
        self.speaking = False
        self.calls: list[tuple[str, int]] = []

    def advance(self, t_ns: int) -> None:
        self.calls.append(("advance", t_ns))

    def finish(self, t_ns: int) -> None:
        self.calls.append(("finish", t_ns))


def test_hearing_the_agent_moves_closed_spurts_into_the_record_in_order() -> None:
    rec = CallRecord()
    vad = FakeDetector()
    heard: Any = cast(Any, vad)
    assert rec.hear_agent(heard, 100) is False and rec.agent_spurts == []
    vad.spurts.extend([Spurt(10, 20), Spurt(30, 45)])
    vad.speaking = True
    assert rec.hear_agent(heard, 200) is True
    assert rec.agent_spurts == [(10, 20), (30, 45)] and not vad.spurts
    vad.spurts.append(Spurt(60, 90))
    vad.speaking = False
    assert rec.hear_agent(heard, 300, final=True) is False
    assert rec.agent_spurts == [(10, 20), (30, 45), (60, 90)]
    assert vad.calls == [("advance", 100), ("advance", 200), ("finish", 300)]
