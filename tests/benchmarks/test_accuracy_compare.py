"""benchmarks/accuracy_compare.py: the agent's edges of the truth are taken at the proxy's
vantage. The caller hears the agent after the proxy forwarded it; on a busy machine that
forwarding runs late, and a truth read at the caller put the agent's onset late by it
(busy class: ttfs errors of -7 to -13 ms matched the forwarding delay of the message that
carried the agent's onset to 0.1 ms)."""

from __future__ import annotations

from types import ModuleType

from support.benchmarks import load_benchmark

from voxproxy.clips import Clip, load_clips
from voxproxy.loadgen.record import AgentChunk, CallRecord
from voxproxy.loadgen.truth import agent_speech
from voxproxy.simcall.log import CallLog, ResponseLog

MS = 1_000_000
RATE = 16000
MESSAGE = 320  # 20 ms


def _compare() -> ModuleType:
    load_benchmark("accuracy")
    import accuracy_compare

    return accuracy_compare


def _clip(name: str) -> Clip:
    return load_clips()[name]


def _answer(at_ms: int, paced: bool, write_ms: float = 0.0) -> tuple[CallLog, int]:
    """agent_hours (speech 250-4131 ms into it) sent from ``at_ms``, in real time or all
    at once, each write taking ``write_ms``; the log and its samples."""
    n = _clip("agent_hours").pcm.size
    r = ResponseLog(1, "agent_hours", False, 0, None, 0.0, None, 0, 0, 0)
    for k, pos in enumerate(range(0, n, MESSAGE)):
        t = (at_ms + (20 * k if paced else 0)) * MS
        r.sends.append((pos, min(MESSAGE, n - pos), t, t + round(write_ms * MS)))
    r.samples_sent = n
    return CallLog(1, "/", {}, None, responses=[r]), n


def test_an_answer_forwarded_late_is_moved_back_to_the_proxy_s_vantage() -> None:
    compare = _compare()
    # Written in real time from 1000 ms (each write 0.2 ms); the caller received the
    # first message 8 ms after its write (the proxy forwarded it late), the rest queued
    # behind it on the caller's playout timeline.
    log, n = _answer(1000, paced=True, write_ms=0.2)
    record = CallRecord(agent_rate_hz=RATE)
    record.agent_chunks = [AgentChunk(0, n, 1008 * MS, 1008 * MS)]
    (heard,) = agent_speech(record, log, _clip)
    assert heard.onset_ns == (1008 + 250) * MS
    moves = compare.agent_vantage(record, log, _clip)
    assert moves(heard.onset_ns) == (7_800_000, 8_000_000)
    assert moves(heard.end_ns) == (7_800_000, 8_000_000)
    # A figure ending on that edge, read 8 ms shorter than the caller's truth: exact; its
    # error is the distance to the nearer end of what the truth may be.
    assert compare.within(-8.0, *moves(heard.onset_ns)) == 0.0
    assert compare.within(-9.0, *moves(heard.onset_ns)) == -1.0
    assert abs(compare.within(-3.0, *moves(heard.onset_ns)) - 4.8) < 1e-9
    # An instant that is no agent edge is left where it was.
    assert moves(heard.onset_ns + MS) == (0, 0)


def test_a_flush_cuts_the_answer_at_the_proxy_s_vantage_where_it_came() -> None:
    compare = _compare()
    # The whole answer in one burst at 1000 ms, flushed at 1300 ms (50 ms into its
    # speech); the caller got the burst at 1002 ms and the flush at 1303 ms. The end of
    # what played moves by the flush's delay, not by how far the audio ran on.
    log, _ = _answer(1000, paced=False)
    log.responses[0].flush_ns = 1300 * MS
    record = CallRecord(agent_rate_hz=RATE, flushes=[1303 * MS])
    record.agent_chunks = [AgentChunk(0, (1303 - 1002) * RATE // 1000, 1002 * MS, 1002 * MS)]
    (heard,) = agent_speech(record, log, _clip)
    assert heard.end_ns <= 1303 * MS
    moves = compare.agent_vantage(record, log, _clip)
    assert moves(heard.onset_ns) == (2 * MS, 2 * MS)
    least, most = moves(heard.end_ns)
    assert least == most and 1 * MS <= most <= 3 * MS, most
