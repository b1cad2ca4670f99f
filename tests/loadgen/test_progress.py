"""The load run's progress line: calls done of all, failures so far, an ETA from the
finished calls' own length (none before the first has finished)."""

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
    c.add(CallDone(12.0, failed=False))
    c.add(CallDone(12.0, failed=True))
    assert c.eta_s(12.0) == pytest.approx(48.0)
    assert c.line(12.0) == "2/10 calls · 1 failed · ETA 0:48"
    # The clock runs between calls: the ETA counts down.
    assert c.eta_s(20.0) == pytest.approx(40.0)
    for _ in range(6):
        c.add(CallDone(12.0, failed=False))
    assert c.eta_s(48.0) == pytest.approx(12.0)
    c.add(CallDone(12.0, failed=False))
    c.add(CallDone(12.0, failed=False))
    assert c.eta_s(60.0) == 0.0
    assert c.line(60.0) == "10/10 calls · 1 failed · ETA 0:00"


def test_a_run_slower_than_planned_keeps_the_waves_not_started() -> None:
    # 9 calls, 3 at a time, each 10 s; the run fell 30 s behind: the planned end is past,
    # but 3 calls have not started, so at least one more wave (10 s) is left.
    c = CallCounter(total=9, concurrency=3, started_s=0.0)
    for _ in range(3):
        c.add(CallDone(10.0, failed=False))
    assert c.eta_s(60.0) == pytest.approx(10.0)


def test_concurrency_above_the_calls_counts_as_the_calls() -> None:
    # 2 calls, "50 at a time": one wave; the second call, started with the first, is
    # about done when the first is.
    c = CallCounter(total=2, concurrency=50, started_s=0.0)
    c.add(CallDone(8.0, failed=False))
    assert c.eta_s(4.0) == pytest.approx(4.0)
    assert c.eta_s(8.0) == pytest.approx(0.0)
