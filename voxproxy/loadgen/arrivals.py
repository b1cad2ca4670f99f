"""Open-model load: calls that arrive at a rate, whether or not earlier ones finished.

Like k6's ``constant-arrival-rate`` and ``ramping-arrival-rate`` executors: the rate
climbs linearly from 0 to ``rate_per_s`` over ``ramp_up_s``, then holds for
``duration_s``. Call ``i`` starts when the expected number of arrivals reaches ``i``
(the first at 0), so the schedule is exact and the same in every run and shard:

* during the ramp, ``N(t) = rate * t**2 / (2 * ramp_up)``, so
  ``t_i = sqrt(2 * ramp_up * i / rate)``;
* after it, ``N(t) = rate * ramp_up / 2 + rate * (t - ramp_up)``.

At most ``--concurrency`` calls are in flight; an arrival that finds them all busy is
not delayed (that would turn the open model back into a closed one): it is dropped
and counted as a failed call whose cause says so, as k6 counts dropped iterations.
"""

from __future__ import annotations

import math

from voxproxy.core.errors import ConfigError

DROPPED = "dropped: --concurrency calls were in flight when it was due"


def arrival_times(rate_per_s: float, ramp_up_s: float, duration_s: float) -> tuple[float, ...]:
    """Start offsets (s from the run's start) of every call of the schedule."""
    if rate_per_s <= 0 or ramp_up_s < 0 or duration_s < 0 or ramp_up_s + duration_s <= 0:
        raise ConfigError(
            "--arrival-rate must be positive, --ramp-up and --duration not negative, "
            "and together longer than 0 s"
        )
    ramp_calls = rate_per_s * ramp_up_s / 2
    total = math.floor(ramp_calls + rate_per_s * duration_s + 1e-9)
    times = []
    for i in range(total):
        if i < ramp_calls:
            times.append(math.sqrt(2 * ramp_up_s * i / rate_per_s))
        else:
            times.append(ramp_up_s + (i - ramp_calls) / rate_per_s)
    if not times:
        raise ConfigError("the arrival schedule holds no call: raise --arrival-rate or --duration")
    return tuple(times)


def default_cap(rate_per_s: float, longest_call_s: float) -> int:
    """Calls in flight at most when --concurrency is not given: the arrivals of the
    longest a call of the run can last by its script (:func:`voxproxy.loadgen.steps.
    longest_call_s`: its clips, its silences, its waits for the agent to their
    timeouts). No arrival is dropped while calls keep to their scripts, so a drop says
    the calls ran longer than their scripts allow, not that a default was short."""
    return max(10, math.ceil(rate_per_s * longest_call_s))
