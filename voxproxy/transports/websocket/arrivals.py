"""What a call's arrival stamps are worth, and how long the proxy held its messages.

The relay stamps each message with its arrival at the host (``transports.stamped``):
exact for a message that ends its read, bounded for one that queued behind others in
the socket while the loop ran late (it arrived between the previous read that emptied
the socket and the read's stamp), and the read's own time on a leg without kernel
stamps (TLS, another platform), late by as much as the loop was. :class:`ArrivalLog`
keeps, per call, where such stamps lie: the figures' uncertainty takes from it what is
really unknown near their edges (``proxy.lifecycle.MeasuredCall``), instead of the
loop's lag near every edge.

:class:`ForwardDelays` is the proxy's own part of the call: per direction, how long
each message took from its arrival at the host to its write to the other leg (the
receipt's ``forwarding``, MEASUREMENT.md 2: never part of a figure).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

MIN_ERROR_NS = 500_000  # a bound below this is not kept (the loop monitor's own floor)
JOIN_NS = 100_000_000  # stamps this close share one span of the log
MAX_SPANS = 4096  # per kind; past it the last span grows (which only states more)
# The edges of the delay histogram (ms): a delay falls in the first bucket whose edge is
# at or above it; the last bucket holds the rest.
DELAY_EDGES_MS = (
    0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0,
    50.0, 75.0, 100.0, 150.0, 200.0, 300.0, 500.0, 1000.0, 2000.0, 5000.0,
)  # fmt: skip
_EDGES_NS = tuple(round(ms * 1_000_000) for ms in DELAY_EDGES_MS)


class _Spans:
    """Spans of time (start, end) with the largest value noted in each, and the latest
    moment a stamp of each was noted (its read), in time order."""

    __slots__ = ("ends", "reads", "starts", "values")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.values: list[int] = []
        self.reads: list[int] = []

    def note(self, t_ns: int, value: int, read_ns: int) -> None:
        starts = self.starts
        if starts and (t_ns <= self.ends[-1] + JOIN_NS or len(starts) >= MAX_SPANS):
            if t_ns > self.ends[-1]:
                self.ends[-1] = t_ns
            if t_ns < starts[-1]:  # (a stamp may be a little older than the last one)
                starts[-1] = t_ns
            if value > self.values[-1]:
                self.values[-1] = value
            if read_ns > self.reads[-1]:
                self.reads[-1] = read_ns
            return
        starts.append(t_ns)
        self.ends.append(t_ns)
        self.values.append(value)
        self.reads.append(read_ns)

    def overlapping(self, start_ns: int, end_ns: int) -> list[tuple[int, int, int]]:
        """(start, value, read) of the spans that overlap ``[start_ns, end_ns]`` (a walk:
        the two legs' stamps interleave a little out of order, and it runs at the receipt)."""
        return [
            (a, v, r)
            for a, b, v, r in zip(self.starts, self.ends, self.values, self.reads, strict=True)
            if a <= end_ns and b >= start_ns
        ]


class ArrivalLog:
    """One call's stamps that are not exact: bounded ones (a message that queued behind
    others in its read: its stamp may be late by up to the bound, and by no more than
    the loop's lag while it waited) and the read times of legs without kernel stamps
    (late by the loop's lag then)."""

    __slots__ = ("_bounded", "_read_times", "kernel", "read_time")

    def __init__(self) -> None:
        self._bounded = _Spans()
        self._read_times = _Spans()
        self.kernel = [0, 0]  # per direction: reads stamped by the kernel
        self.read_time = [0, 0]  # ... stamped when the loop ran them

    def note_bounded(self, t_ns: int, bound_ns: int, read_ns: int) -> None:
        """A message stamped ``t_ns`` arrived no earlier than ``t_ns - bound_ns``; the loop
        read it at ``read_ns``."""
        if bound_ns >= MIN_ERROR_NS:
            self._bounded.note(t_ns, bound_ns, max(read_ns, t_ns))

    def note_read_time(self, t_ns: int) -> None:
        """A read stamped when the loop ran it (no kernel stamp)."""
        self._read_times.note(t_ns, 1, t_ns)

    def error_between(self, start_ns: int, end_ns: int, lag: Callable[[int, int], int]) -> int:
        """The most a stamp in ``[start_ns, end_ns]`` may be late, ``lag(a, b)`` being the
        loop's longest block over ``[a, b]``: that block over the interval if a read there
        had no kernel stamp; for the messages that queued behind others there, their
        bound, but no more than the loop's longest block from their earliest arrival to
        their read (a message waits in the socket only while the loop does not come round
        to it: the bound from the previous read is loose after a quiet stretch, an agent's
        first burst after seconds of silence; and the block that kept a read waiting is
        seen when the loop comes back, after the read, maybe after the edge itself)."""
        worst = 0
        for a, bound, read in self._bounded.overlapping(start_ns, end_ns):
            if bound > worst:
                worst = max(worst, min(bound, lag(a - bound, read)))
        if self._read_times.overlapping(start_ns, end_ns):
            worst = max(worst, lag(start_ns, end_ns))
        return worst

    @property
    def read_times(self) -> bool:
        """Some reads of the call had no kernel stamp."""
        return bool(self._read_times.starts)


class ForwardDelays:
    """One direction's forwarding delays (arrival at the host to the write to the other
    leg), as a histogram: cheap per message, fixed in size per call."""

    __slots__ = ("counts", "max_ns", "n")

    def __init__(self) -> None:
        self.counts = [0] * (len(_EDGES_NS) + 1)
        self.n = 0
        self.max_ns = 0

    def add(self, delay_ns: int) -> None:
        if delay_ns < 0:
            delay_ns = 0
        self.counts[bisect_left(_EDGES_NS, delay_ns)] += 1
        self.n += 1
        if delay_ns > self.max_ns:
            self.max_ns = delay_ns

    def quantile_ms(self, q: float) -> float | None:
        """The ``q`` quantile, as the upper edge of its bucket (ms; the largest delay
        seen for the last bucket), or None without messages."""
        if not self.n:
            return None
        rank = q * self.n
        seen = 0
        for i, count in enumerate(self.counts):
            seen += count
            if seen >= rank and count:
                edge = DELAY_EDGES_MS[i] if i < len(DELAY_EDGES_MS) else None
                top = self.max_ns / 1_000_000
                return top if edge is None or edge > top else edge
        return self.max_ns / 1_000_000
