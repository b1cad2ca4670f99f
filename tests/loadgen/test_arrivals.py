"""The open model's schedule (k6's constant and ramping arrival rates): call i starts
when the expected number of arrivals reaches i."""

from __future__ import annotations

import math

import pytest

from voxproxy.core.errors import ConfigError
from voxproxy.loadgen.arrivals import arrival_times, default_cap


def expected_arrivals(t: float, rate: float, ramp: float) -> float:
    """N(t): the integral of the rate, linear from 0 to ``rate`` over ``ramp``, then flat."""
    if t <= ramp:
        return rate * t * t / (2 * ramp) if ramp else 0.0
    return rate * ramp / 2 + rate * (t - ramp)


def test_a_constant_rate_starts_a_call_every_one_over_rate_seconds() -> None:
    assert arrival_times(2.0, 0.0, 3.0) == pytest.approx((0.0, 0.5, 1.0, 1.5, 2.0, 2.5))


def test_a_ramp_then_a_hold() -> None:
    times = arrival_times(2.0, 4.0, 1.0)
    assert times == pytest.approx((0.0, 2.0, math.sqrt(8), math.sqrt(12), 4.0, 4.5))


@pytest.mark.parametrize(("rate", "ramp", "hold"), [(5.0, 10.0, 20.0), (0.7, 3.0, 11.0)])
def test_calls_started_by_any_time_follow_the_rate_integral(
    rate: float, ramp: float, hold: float
) -> None:
    times = arrival_times(rate, ramp, hold)
    assert len(times) == math.floor(rate * ramp / 2 + rate * hold + 1e-9)
    assert list(times) == sorted(times)
    for k in range(1, 200):
        t = (ramp + hold) * k / 200
        started = sum(1 for x in times if x <= t)
        # Call i starts when N reaches i: by t, floor(N(t)) + 1 calls have started.
        due = math.floor(expected_arrivals(t, rate, ramp) + 1e-9) + 1  # (float rounding)
        assert started == min(len(times), due), t


@pytest.mark.parametrize(
    ("rate", "ramp", "hold"), [(0.0, 0.0, 10.0), (1.0, -1.0, 5.0), (1.0, 0.0, 0.0), (0.1, 0, 5)]
)
def test_a_schedule_without_calls_or_with_bad_figures_is_refused(
    rate: float, ramp: float, hold: float
) -> None:
    with pytest.raises(ConfigError):
        arrival_times(rate, ramp, hold)


def test_the_default_cap_holds_the_arrivals_of_the_longest_call() -> None:
    assert default_cap(0.1, 40.0) == 10  # never fewer than 10
    assert default_cap(5.0, 103.2) == 516 and default_cap(2.0, 35.0) == 70
