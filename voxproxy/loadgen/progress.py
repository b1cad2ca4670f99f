"""What a load run shows while it plays: calls done of all, failed so far, and an ETA.

Pure: the clock is passed in. The ETA is when the last call should end, a call lasting
the mean of the calls that finished (dropped arrivals, which did not play, left out):

* calls ``concurrency`` at a time (the closed model): the first ``concurrency`` start
  with the run and each one that ends starts the next, so the calls in flight are the
  ones started last, at the ends seen most recently; each ends a mean after its start,
  and the calls not started yet take the slots as they free up;
* calls on an arrival schedule (the open model): every call that has not finished
  starts at its arrival (the schedule's zero read from the finished calls: their
  start less their offset) and ends a mean later.

So the ETA counts down while calls play, including the last ones. Calls that run
longer than the mean are given the longest finished call's length instead; a run whose
calls have outlasted that too has no estimate (shown as ``—``, not ``0:00``), as
before the first call has finished.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CallDone:
    """One finished call, as the progress display counts it."""

    duration_s: float  # from its start (a free slot, or its arrival) to its end
    failed: bool  # it ended in an error: it did not get through, or broke off
    index: int | None = None  # the call's index in the plan
    dropped: bool = False  # an arrival that found every slot busy: it never played


class CallCounter:
    """Calls done and failed so far, over every worker, and the time left."""

    __slots__ = (
        "arrivals",
        "concurrency",
        "done",
        "done_indices",
        "ends_s",
        "failed",
        "longest_s",
        "played",
        "started_s",
        "total",
        "total_duration_s",
        "zero_s",
    )

    def __init__(
        self,
        total: int,
        concurrency: int,
        started_s: float,
        arrivals: Mapping[int, float] | None = None,
    ) -> None:
        self.total = total
        self.arrivals = arrivals  # open model: each call's offset from the schedule's zero
        self.concurrency = max(1, min(concurrency, total))
        self.started_s = started_s
        self.zero_s: float | None = None  # the schedule's zero, as the calls show it
        self.done = 0
        self.failed = 0
        self.played = 0  # finished calls that played (not dropped)
        self.total_duration_s = 0.0
        self.longest_s = 0.0
        self.ends_s: list[float] = []  # when the played calls ended, in order
        self.done_indices: set[int] = set()

    def add(self, call: CallDone, now_s: float) -> None:
        self.done += 1
        self.failed += call.failed
        if call.index is not None:
            self.done_indices.add(call.index)
        if call.dropped:
            return
        self.played += 1
        self.total_duration_s += call.duration_s
        self.longest_s = max(self.longest_s, call.duration_s)
        self.ends_s.append(now_s)
        offset = self.arrivals.get(call.index) if self.arrivals and call.index is not None else None
        if offset is not None:
            zero = now_s - call.duration_s - offset
            self.zero_s = zero if self.zero_s is None else min(self.zero_s, zero)

    def eta_s(self, now_s: float) -> float | None:
        """Seconds left, or None while there is no estimate."""
        if self.done >= self.total:
            return 0.0
        if self.played == 0:
            return None
        for length in (self.total_duration_s / self.played, self.longest_s):
            end = self._end_s(length, now_s)
            if end > now_s:
                return end - now_s
        return None

    def _end_s(self, length: float, now_s: float) -> float:
        """When the last call ends if each lasts ``length``."""
        if self.arrivals is not None:
            zero = self.zero_s if self.zero_s is not None else self.started_s
            left = [t for i, t in self.arrivals.items() if i not in self.done_indices]
            if len(left) < self.total - self.done:  # calls counted without an index
                left = sorted(self.arrivals.values())[self.done :]
            return zero + max(left, default=0.0) + length
        # Closed: the first `concurrency` calls start at once, each end starts the next.
        starts = [self.started_s] * self.concurrency + self.ends_s
        started = min(self.total, self.concurrency + self.played)
        in_flight = started - self.done
        busy = [s + length for s in starts[started - in_flight : started]]
        slots = sorted(busy + [now_s] * (self.concurrency - len(busy)))  # free ones: now
        waiting = self.total - started  # they take the slots as they free up, in turn
        ends = []
        for k, free in enumerate(slots):
            more = waiting // self.concurrency + (k < waiting % self.concurrency)
            ends.append(max(free, now_s) + more * length if more else free)
        return max(ends)

    def line(self, now_s: float) -> str:
        eta = self.eta_s(now_s)
        shown = "—" if eta is None else f"{int(eta) // 60}:{int(eta) % 60:02d}"
        return f"{self.done}/{self.total} calls · {self.failed} failed · ETA {shown}"
