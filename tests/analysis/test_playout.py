"""The playout model of agent audio (MEASUREMENT.md section 3)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from voxproxy.analysis.playout import Playout

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
