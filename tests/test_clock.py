"""The shell's clock-lag monitor: how late the event loop's readings run."""

from __future__ import annotations

import time

import pytest
from support.waiting import wait_until

from voxproxy.clock import LagMonitor, new_secret

MS = 1_000_000


def test_max_between_is_the_longest_block_that_overlaps_the_interval() -> None:
    m = LagMonitor(min_lag_ms=0.5)
    m.record(1000 * MS, 40 * MS)  # the loop was blocked over [960, 1000] ms
    m.record(2000 * MS, 5 * MS)  # [1995, 2000]
    m.record(3000 * MS, 0)  # not a block: not kept
    assert m.max_between(900 * MS, 950 * MS) == 0  # ends before the block starts
    assert m.max_between(900 * MS, 970 * MS) == 40 * MS
    assert m.max_between(999 * MS, 1001 * MS) == 40 * MS
    assert m.max_between(1001 * MS, 1990 * MS) == 0
    assert m.max_between(1001 * MS, 2500 * MS) == 5 * MS
    assert m.max_between(0, 10_000 * MS) == 40 * MS
    assert m.max_lag_ns == 40 * MS


def test_only_lags_worth_keeping_are_kept_and_the_memory_is_bounded() -> None:
    m = LagMonitor(min_lag_ms=1.0, keep=10)
    for i in range(100):
        m.record(i * 10 * MS, 2 * MS)
    m.record(2000 * MS, MS // 2)
    assert m.max_between(0, 89 * 10 * MS) == 0  # the first 90 were dropped
    assert m.max_between(95 * 10 * MS, 96 * 10 * MS) == 2 * MS
    assert m.max_between(1999 * MS, 2001 * MS) == 0


async def test_a_blocked_loop_is_seen() -> None:
    m = LagMonitor(period_s=0.01)
    readings: list[int] = []  # when the monitor took each reading
    record = m.record

    def spy(t_ns: int, lag_ns: int, cpu_ns: int | None = None) -> None:
        readings.append(t_ns)
        record(t_ns, lag_ns, cpu_ns)

    m.record = spy  # type: ignore[method-assign]
    m.start()
    await wait_until(lambda: readings, what="the monitor running")
    t0 = time.monotonic_ns()
    time.sleep(0.15)  # a synchronous block of the event loop, as a busy measurement would
    blocked_until = time.monotonic_ns()
    await wait_until(lambda: readings[-1] > blocked_until, what="a reading after the block")
    t1 = time.monotonic_ns()
    await m.stop()
    # The block is found around when it happened, about as long as it was.
    assert m.max_between(t0, t1) >= 100 * MS
    assert m.max_between(t1 + 1_000 * MS, t1 + 2_000 * MS) == 0


def test_the_lag_now_is_the_last_reading_or_how_overdue_the_next_one_is() -> None:
    now = [0]
    m = LagMonitor(period_s=0.02, clock=lambda: now[0])
    assert m.lag_now_ns() == 0  # no reading yet
    m.record(1000 * MS, 3 * MS)
    now[0] = 1010 * MS  # the next reading is due at 1020 ms
    assert m.lag_now_ns() == 3 * MS
    now[0] = 1070 * MS  # 50 ms past it: the loop has not come round to its timer
    assert m.lag_now_ns() == 50 * MS


def test_the_recent_lags_are_the_last_windows_readings_oldest_first() -> None:
    now = [0]
    m = LagMonitor(period_s=0.02, clock=lambda: now[0])
    assert m.recent_lags_ns(1000 * MS) == []
    for i, lag in enumerate((7, 0, 3, 9)):  # readings at 0, 400, 800 and 1200 ms
        m.record(i * 400 * MS, lag * MS)
    now[0] = 1300 * MS
    assert m.recent_lags_ns(1000 * MS) == [0, 3 * MS, 9 * MS]  # those since 300 ms
    assert m.recent_lags_ns(100 * MS) == [9 * MS]


def test_the_cpu_share_is_the_loop_thread_s_cpu_over_the_window() -> None:
    now, cpu = [0], [0]
    m = LagMonitor(period_s=0.02, clock=lambda: now[0], cpu_clock=lambda: cpu[0])
    assert m.cpu_share(1_000 * MS) is None  # no reading
    m.record(now[0], 0, cpu[0])
    assert m.cpu_share(1_000 * MS) is None  # one reading: no interval
    for _ in range(50):  # a second at 30% of a core
        now[0] += 20 * MS
        cpu[0] += 6 * MS
        m.record(now[0], 0, cpu[0])
    assert m.cpu_share(1_000 * MS) == pytest.approx(0.3)
    for _ in range(25):  # then half a second at 90%: the last second averages 60%
        now[0] += 20 * MS
        cpu[0] += 18 * MS
        m.record(now[0], 0, cpu[0])
    assert m.cpu_share(1_000 * MS) == pytest.approx(0.6, abs=0.02)
    m.record(now[0] + MS, 5 * MS)  # a reading without the CPU time: not counted
    assert m.cpu_share(1_000 * MS) == pytest.approx(0.6, abs=0.02)


def test_new_secret() -> None:
    a, b = new_secret(), new_secret()
    assert len(a) == 32 and a != b
