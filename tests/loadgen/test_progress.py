"""The load run's progress line: calls done of all, failures so far, and an ETA that
counts down to the end of the last call (none before the first has finished, nor once
the calls have outlasted every finished one)."""

from __future__ import annotations

import pytest

from voxproxy.loadgen.progress import CallCounter, CallDone


def test_no_eta_before_a_call_has_finished() -> None:
    c = CallCounter(total=10, concurrency=2, started_s=100.0)
    assert c.eta_s(130.0) is None
    assert c.line(130.0) == "0/10 calls · 0 failed · ETA —"


def test_the_eta_is_the_plan_measured_by_the_finished_calls() -> None:
    # 10 calls of 12 s, 2 at a time: 5 waves, 60 s in all.
    c = CallCounter(total=10, concurrency=2, started_s=0.0)
    c.add(CallDone(12.0, failed=False), 12.0)
    c.add(CallDone(12.0, failed=True), 12.0)
    assert c.eta_s(12.0) == pytest.approx(48.0)
    assert c.line(12.0) == "2/10 calls · 1 failed · ETA 0:48"
    # The clock runs between calls: the ETA counts down.
    assert c.eta_s(20.0) == pytest.approx(40.0)
    for end in (24, 24, 36, 36, 48, 48):
        c.add(CallDone(12.0, failed=False), end)
    assert c.eta_s(48.0) == pytest.approx(12.0)
    c.add(CallDone(12.0, failed=False), 60.0)
    c.add(CallDone(12.0, failed=False), 60.0)
    assert c.eta_s(60.0) == 0.0
    assert c.line(60.0) == "10/10 calls · 1 failed · ETA 0:00"


def test_the_last_wave_counts_down_to_its_end_not_to_zero() -> None:
    # 4 calls of 35 s, 2 at a time: the second wave starts at 35 s and ends at 70 s.
    # Before, with no call waiting, the ETA froze and then read 0:00 with 35 s to go.
    c = CallCounter(total=4, concurrency=2, started_s=0.0)
    c.add(CallDone(35.0, failed=False), 35.0)
    c.add(CallDone(35.0, failed=False), 35.0)
    etas = [c.eta_s(t) for t in (35.0, 36.0, 50.0, 69.0)]
    assert etas == pytest.approx([35.0, 34.0, 20.0, 1.0])


def test_calls_that_outrun_the_mean_get_the_longest_then_no_estimate() -> None:
    c = CallCounter(total=3, concurrency=3, started_s=0.0)
    c.add(CallDone(10.0, failed=False), 10.0)
    c.add(CallDone(20.0, failed=False), 20.0)
    assert c.eta_s(14.0) == pytest.approx(1.0)  # the mean, 15 s
    assert c.eta_s(16.0) == pytest.approx(4.0)  # past it: the longest, 20 s
    assert c.eta_s(25.0) is None and c.line(25.0).endswith("ETA —")  # past both


def test_a_run_slower_than_planned_keeps_the_waves_not_started() -> None:
    # 9 calls, 3 at a time, each 10 s; the first wave ended 30 s late (at 40 s): two
    # more waves of 10 s are left.
    c = CallCounter(total=9, concurrency=3, started_s=0.0)
    for _ in range(3):
        c.add(CallDone(10.0, failed=False), 40.0)
    assert c.eta_s(40.0) == pytest.approx(20.0)


def test_concurrency_above_the_calls_counts_as_the_calls() -> None:
    # 2 calls, "50 at a time": one wave; the second call, started with the first, is
    # about done when the first is.
    c = CallCounter(total=2, concurrency=50, started_s=0.0)
    c.add(CallDone(8.0, failed=False), 8.0)
    assert c.eta_s(4.0) == pytest.approx(4.0)
    assert c.eta_s(7.9) == pytest.approx(0.1)


def test_on_an_arrival_schedule_the_eta_is_the_last_arrival_plus_a_call() -> None:
    # 80 arrivals, one every 0.5 s from a zero that came 2 s after the counter started
    # (workers starting), calls of 35 s; arrivals 10-19 found every slot busy.
    arrivals = {i: i * 0.5 for i in range(80)}
    c = CallCounter(total=80, concurrency=60, started_s=0.0, arrivals=arrivals)
    for i in range(10, 20):
        c.add(CallDone(0.0, failed=True, index=i, dropped=True), 2.0 + i * 0.5)
    for i in range(10):
        c.add(CallDone(35.0, failed=False, index=i), 2.0 + i * 0.5 + 35.0)
    # Dropped arrivals do not shorten the mean; the last arrival is at 2 + 39.5 s.
    assert c.eta_s(45.0) == pytest.approx(2.0 + 39.5 + 35.0 - 45.0)
    assert c.eta_s(46.0) == pytest.approx(2.0 + 39.5 + 35.0 - 46.0)
    assert c.line(45.0).startswith("20/80 calls · 10 failed · ETA 0:31")
