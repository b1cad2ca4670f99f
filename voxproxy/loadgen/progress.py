"""What a load run shows while it plays: calls done of all, failed so far, and an ETA.

Pure: the clock is passed in. The ETA is the plan's length as the finished calls
measure it: a call lasts its scenario's length (the mean of the finished calls), calls
play ``concurrency`` at a time, so the run lasts about ``ceil(calls / concurrency)``
call lengths; and never less than the waves of calls that have not started yet. Before
the first call has finished there is nothing to measure, and no ETA is shown. Under
an arrival rate (the open model) calls start on their schedule: the run lasts until
the last one starts, plus a call's length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CallDone:
    """One finished call, as the progress display counts it."""

    duration_s: float  # from its start (a free slot) to its end
    failed: bool  # it ended in an error: it did not get through, or broke off


class CallCounter:
    """Calls done and failed so far, over every worker, and the time left."""

    __slots__ = (
        "concurrency",
        "done",
        "failed",
        "last_start_s",
        "started_s",
        "total",
        "total_duration_s",
    )

    def __init__(
        self, total: int, concurrency: int, started_s: float, last_start_s: float | None = None
    ) -> None:
        self.total = total
        self.last_start_s = last_start_s  # open model: when the last call is due
        self.concurrency = max(1, min(concurrency, total))
        self.started_s = started_s
        self.done = 0
        self.failed = 0
        self.total_duration_s = 0.0

    def add(self, call: CallDone) -> None:
        self.done += 1
        self.failed += call.failed
        self.total_duration_s += call.duration_s

    def eta_s(self, now_s: float) -> float | None:
        """Seconds left, or None while no call has finished."""
        if self.done == 0:
            return None
        left = self.total - self.done
        if left <= 0:
            return 0.0
        mean = self.total_duration_s / self.done
        if self.last_start_s is not None:
            return max(self.last_start_s + mean - (now_s - self.started_s), 0.0)
        planned = mean * math.ceil(self.total / self.concurrency)
        not_started = max(0, left - self.concurrency)  # at most `concurrency` are playing
        waiting = mean * math.ceil(not_started / self.concurrency)
        return max(planned - (now_s - self.started_s), waiting, 0.0)

    def line(self, now_s: float) -> str:
        eta = self.eta_s(now_s)
        shown = "—" if eta is None else f"{int(eta) // 60}:{int(eta) % 60:02d}"
        return f"{self.done}/{self.total} calls · {self.failed} failed · ETA {shown}"
