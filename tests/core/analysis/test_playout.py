"""The playout model of agent audio (MEASUREMENT.md section 3)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from voxproxy.core.analysis.playout import MAX_AHEAD_NS, MAX_QUEUED_CHUNKS, Playout

MS = 1_000_000
RATE = 16000


def chunk(ms: int, value: int = 1000) -> np.ndarray:
    return np.full(ms * RATE // 1000, value, dtype=np.int16)


@dataclass(frozen=True)
class AddCase:
    name: str
    adds: list[tuple[int, int]]  # (duration ms, arrival ms)
    starts: list[int]  # expected starts, ms
    cursor: int  # expected cursor, ms


ADD_CASES = [
    AddCase("first chunk starts on arrival", [(20, 100)], [100], 120),
    AddCase("paced chunks play back to back", [(20, 20), (20, 40), (20, 60)], [20, 40, 60], 80),
    AddCase("a burst queues", [(200, 0), (200, 20), (200, 40)], [0, 200, 400], 600),
    AddCase("after a gap, start = arrival", [(20, 0), (20, 500)], [0, 500], 520),
    AddCase(
        "late arrival after a burst drains", [(100, 0), (100, 10), (50, 150)], [0, 100, 200], 250
    ),
    AddCase("empty chunk starts at the cursor", [(100, 0), (0, 10)], [0, 100], 100),
]


@pytest.mark.parametrize("case", ADD_CASES, ids=lambda c: c.name)
def test_start_is_max_of_arrival_and_cursor(case: AddCase) -> None:
    p = Playout(RATE)
    starts = [p.add(chunk(d), t * MS) for d, t in case.adds]
    assert starts == [s * MS for s in case.starts]
    assert p.cursor_ns == case.cursor * MS
    assert p.chunks == len(case.adds)
    assert p.audio_ns == sum(d for d, _ in case.adds) * MS


def test_queued_and_playing() -> None:
    p = Playout(RATE)
    assert p.queued_ns(0) == 0 and not p.playing_at(0)
    p.add(chunk(200), 0)
    p.add(chunk(200), 10 * MS)
    assert p.queued_ns(50 * MS) == 350 * MS
    assert p.playing_at(399 * MS)
    assert not p.playing_at(400 * MS)
    assert p.queued_ns(1000 * MS) == 0


@dataclass(frozen=True)
class FlushCase:
    name: str
    adds: list[tuple[int, int]]  # (duration ms, arrival ms)
    flush_at: int
    dropped: int  # ms
    cut: bool
    cursor: int | None  # ms
    audible_after: int  # ms of audio that still plays after the flush (from release_all)


FLUSH_CASES = [
    FlushCase("nothing sent", [], 100, 0, False, None, 0),
    FlushCase("after everything played", [(100, 0)], 300, 0, False, 100, 100),
    FlushCase("inside a playing chunk", [(100, 0)], 40, 60, True, 40, 40),
    FlushCase(
        "burst: cuts one, drops the rest",
        [(200, 0), (200, 10), (200, 20)],
        250,
        350,
        True,
        250,
        250,
    ),
    FlushCase("exactly on a chunk boundary", [(200, 0), (200, 10)], 200, 200, True, 200, 200),
    FlushCase("at the very start", [(200, 0)], 0, 200, True, 0, 0),
]


@pytest.mark.parametrize("case", FLUSH_CASES, ids=lambda c: c.name)
def test_flush_drops_queued_audio_and_cuts_at_t(case: FlushCase) -> None:
    p = Playout(RATE)
    for d, t in case.adds:
        p.add(chunk(d), t * MS)
    result = p.flush(case.flush_at * MS)
    assert result.t_ns == case.flush_at * MS
    assert result.dropped_ns == case.dropped * MS
    assert result.cut_audible is case.cut
    assert p.cursor_ns == (None if case.cursor is None else case.cursor * MS)
    assert p.dropped_ns == case.dropped * MS
    played = p.release_all()
    assert sum(r.pcm.size for r in played) == case.audible_after * RATE // 1000
    if played:
        # Nothing plays past the flush.
        last = played[-1]
        assert last.start_ns + last.pcm.size * 1_000_000_000 // RATE <= case.flush_at * MS


def test_audio_after_a_flush_starts_at_arrival() -> None:
    p = Playout(RATE)
    p.add(chunk(1000), 0)
    p.flush(300 * MS)
    assert p.add(chunk(100), 350 * MS) == 350 * MS
    assert p.cursor_ns == 450 * MS
    # An arrival before the (cut) cursor still waits for it.
    p2 = Playout(RATE)
    p2.add(chunk(1000), 0)
    p2.flush(300 * MS)
    assert p2.add(chunk(100), 300 * MS) == 300 * MS


def test_flush_keeps_the_audible_part_of_a_cut_chunk() -> None:
    p = Playout(RATE)
    x = np.arange(1600, dtype=np.int16)  # 100 ms
    p.add(x, 0)
    p.flush(25 * MS)
    (r,) = p.release_all()
    np.testing.assert_array_equal(r.pcm, x[:400])
    assert r.start_ns == 0


def test_flush_never_drops_audio_already_released() -> None:
    p = Playout(RATE)
    p.add(chunk(200), 0)
    first = p.release(50 * MS)
    result = p.flush(80 * MS)
    assert result.dropped_ns == 120 * MS
    rest = p.release_all()
    assert sum(r.pcm.size for r in first + rest) == 80 * RATE // 1000


def test_release_splits_chunks_exactly_and_marks_continuity() -> None:
    p = Playout(RATE)
    a = np.arange(0, 1600, dtype=np.int16)  # 100 ms at 0
    b = np.arange(1600, 3200, dtype=np.int16)  # 100 ms, queued behind a
    p.add(a, 0)
    p.add(b, 10 * MS)
    assert p.release(0) == []
    r1 = p.release(30 * MS)
    assert [(r.start_ns, r.pcm.size, r.continuous) for r in r1] == [(0, 480, False)]
    assert p.release(30 * MS) == []
    r2 = p.release(150 * MS)
    assert [(r.start_ns, r.pcm.size, r.continuous) for r in r2] == [
        (30 * MS, 1120, True),
        (100 * MS, 800, True),
    ]
    r3 = p.release_all()
    assert [(r.start_ns, r.pcm.size, r.continuous) for r in r3] == [(150 * MS, 800, True)]
    joined = np.concatenate([r.pcm for r in r1 + r2 + r3])
    np.testing.assert_array_equal(joined, np.concatenate([a, b]))
    assert p.audible_until_ns == 200 * MS
    assert p.first_audible_ns == 0


def test_release_after_a_gap_is_not_continuous() -> None:
    p = Playout(RATE)
    p.add(chunk(20), 0)
    p.add(chunk(20), 500 * MS)
    out = p.release_all()
    assert [(r.start_ns, r.continuous) for r in out] == [(0, False), (500 * MS, False)]


def test_release_after_a_flush_and_new_audio() -> None:
    p = Playout(RATE)
    p.add(chunk(200), 0)
    p.flush(50 * MS)
    p.add(chunk(20), 50 * MS)  # arrives right at the cut: plays on without a gap
    p.add(chunk(20), 300 * MS)  # after a pause
    out = p.release_all()
    assert [(r.start_ns, r.pcm.size, r.continuous) for r in out] == [
        (0, 800, False),
        (50 * MS, 320, True),
        (300 * MS, 320, False),
    ]


def test_release_of_less_than_one_sample_releases_nothing() -> None:
    p = Playout(RATE)
    p.add(chunk(20), 0)
    assert p.release(1000) == []  # 1 µs: not one sample yet
    assert p.release(62_500)[0].pcm.size == 1


@pytest.mark.parametrize("offset_ms", [0, 40, 250])
def test_downstream_offset_shifts_everything(offset_ms: int) -> None:
    off = offset_ms * MS
    p = Playout(RATE, downstream_offset_ns=off)
    assert p.add(chunk(200), 0) == off
    assert p.add(chunk(200), 10 * MS) == off + 200 * MS
    assert p.cursor_ns == off + 400 * MS
    # Queries take arrival-clock times and apply the offset.
    assert p.queued_ns(100 * MS) == 300 * MS
    assert p.playing_at(399 * MS)
    assert not p.playing_at(400 * MS)
    result = p.flush(250 * MS)
    assert result.t_ns == off + 250 * MS
    assert result.dropped_ns == 150 * MS
    assert result.cut_audible
    # release() takes playout times.
    out = p.release(off + 100 * MS)
    assert [(r.start_ns, r.pcm.size) for r in out] == [(off, 1600)]
    out = p.release_all()
    assert [(r.start_ns, r.pcm.size) for r in out] == [
        (off + 100 * MS, 1600),
        (off + 200 * MS, 800),
    ]
    assert p.first_audible_ns == off


def test_counters_accumulate_over_flushes() -> None:
    p = Playout(RATE)
    p.add(chunk(100), 0)
    p.flush(50 * MS)
    p.add(chunk(100), 60 * MS)
    p.flush(70 * MS)
    assert p.dropped_ns == 50 * MS + 90 * MS
    assert p.audio_ns == 200 * MS
    assert p.chunks == 2


def test_8k_timeline() -> None:
    p = Playout(8000)
    assert p.add(np.zeros(160, np.int16), 0) == 0
    assert p.cursor_ns == 20 * MS
    r = p.flush(5 * MS)
    assert r.dropped_ns == 15 * MS
    (out,) = p.release_all()
    assert out.pcm.size == 40


# -- audio far ahead of real time: kept as positions, not samples (issue 14, item 5) ------------


def _burst(p: Playout, seconds: int, chunk_ms: int = 1000) -> list[int]:
    """``seconds`` of audio sent in ``chunk_ms`` chunks, 1 ms apart: far ahead of real time."""
    return [p.add(chunk(chunk_ms, i + 1), i * MS) for i in range(seconds * 1000 // chunk_ms)]


def _queued_samples(p: Playout) -> int:
    return sum(q.pcm.size for q in p._queue if q.pcm is not None)


def test_audio_far_ahead_keeps_its_timing_but_not_its_samples() -> None:
    bounded = Playout(RATE, max_ahead_ns=10_000 * MS)
    unbounded = Playout(RATE, max_ahead_ns=1 << 62)
    starts = _burst(bounded, 100)
    assert starts == _burst(unbounded, 100)  # the timeline is the same to the nanosecond
    assert bounded.cursor_ns == unbounded.cursor_ns == 100_000 * MS
    assert bounded.audio_ns == unbounded.audio_ns
    # Chunks that would start more than 10 s after their arrival keep no samples ...
    assert bounded.unkept_chunks == 89 and bounded.unkept_ns == 89_000 * MS
    assert _queued_samples(bounded) == 11 * RATE
    assert _queued_samples(unbounded) == 100 * RATE
    assert len(bounded._queue) == 12  # ... and a run of them is one span
    # They play all the same, as spans without samples, exactly where the model puts them.
    mid = bounded.release(30_500 * MS)
    assert [(r.start_ns, r.duration_ns, r.pcm is None) for r in mid[-3:]] == [
        (9_000 * MS, 1_000 * MS, False),
        (10_000 * MS, 1_000 * MS, False),
        (11_000 * MS, 19_500 * MS, True),
    ]
    assert sum(r.duration_ns for r in mid) == 30_500 * MS
    rest = bounded.release_all()
    assert [(r.start_ns, r.duration_ns, r.pcm, r.continuous) for r in rest] == [
        (30_500 * MS, 69_500 * MS, None, True)
    ]
    assert bounded.audible_until_ns == unbounded.cursor_ns


def test_a_flush_cuts_audio_kept_as_a_span_like_any_other() -> None:
    bounded = Playout(RATE, max_ahead_ns=5_000 * MS)
    unbounded = Playout(RATE, max_ahead_ns=1 << 62)
    for p in (bounded, unbounded):
        _burst(p, 20)
    a, b = bounded.flush(12_250 * MS), unbounded.flush(12_250 * MS)
    assert a == b and a.dropped_ns == 7_750 * MS and a.cut_audible
    assert bounded.cursor_ns == unbounded.cursor_ns == 12_250 * MS
    # After the flush, new audio is near real time again: its samples are kept.
    assert bounded.add(chunk(100), 12_300 * MS) == 12_300 * MS
    out = bounded.release_all()
    assert [(r.start_ns, r.duration_ns, r.pcm is None) for r in out[-2:]] == [
        (6_000 * MS, 6_250 * MS, True),
        (12_300 * MS, 100 * MS, False),
    ]
    assert sum(r.duration_ns for r in out) == 12_350 * MS


def test_the_samples_held_stay_bounded_however_far_the_agent_runs_ahead() -> None:
    p = Playout(RATE)  # the default: a minute ahead of real time
    held = 0
    piece = chunk(20)
    for i in range(30_000):  # 10 minutes of audio in 20 ms chunks, sent within 30 s
        p.add(piece, i * MS)
        p.release(i * MS)  # what has played is handed over
        if i % 500 == 499:
            held = max(held, _queued_samples(p))
            assert len(p._queue) <= MAX_QUEUED_CHUNKS + 1
    assert held <= (MAX_AHEAD_NS // 1_000_000_000 + 1) * RATE
    assert p.cursor_ns == 600_000 * MS
    assert p.unkept_ns >= 500_000 * MS


def test_too_many_queued_chunks_are_kept_as_spans() -> None:
    p = Playout(RATE, max_queued_chunks=10)
    for _ in range(50):  # 1 ms chunks, queued: only ten keep their samples
        p.add(chunk(1), 0)
    assert len(p._queue) == 11 and p.unkept_chunks == 40
    assert p.cursor_ns == 50 * MS
    out = p.release_all()
    assert [(r.start_ns, r.duration_ns, r.pcm is None) for r in out[-2:]] == [
        (9 * MS, 1 * MS, False),
        (10 * MS, 40 * MS, True),
    ]
