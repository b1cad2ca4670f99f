"""Stream positions to clock times, for one direction's detector.

Each pushed chunk anchors its first sample's position to the shared clock; a
position maps to the time of the anchor at or before it plus its distance in
samples. Positions where a push followed a gap in time are kept as breaks, which
edge walks never cross.
"""

from __future__ import annotations

from bisect import bisect_right

_NEAR_END = 8  # anchors looked at from the end before a binary search
_PRUNE_BATCH = 64  # anchors (or breaks) before a position that make a trim worth it


class Timeline:
    """Maps stream positions to clock times through per-chunk anchors (binary search)."""

    __slots__ = ("_breaks", "_pos", "_rate", "_t")

    def __init__(self, sample_rate_hz: int) -> None:
        self._rate = sample_rate_hz
        self._pos: list[int] = []  # anchor positions, increasing
        self._t: list[int] = []  # clock time of each anchor position
        self._breaks: list[int] = []  # positions where a push followed a gap in time

    def add_break(self, pos: int) -> None:
        if not self._breaks or self._breaks[-1] != pos:
            self._breaks.append(pos)

    def last_break_at_or_before(self, pos: int) -> int | None:
        i = bisect_right(self._breaks, pos) - 1
        return self._breaks[i] if i >= 0 else None

    def add(self, pos: int, t_ns: int) -> None:
        if self._pos and self._pos[-1] == pos:
            self._t[-1] = t_ns  # the previous anchor covered no samples
            return
        self._pos.append(pos)
        self._t.append(t_ns)

    def t_at(self, pos: int) -> int:
        anchors = self._pos
        n = len(anchors)
        # The usual questions are about the latest audio (the batch being analysed: its
        # last few chunks): a short walk back from the end before a binary search.
        i = n - 1
        stop = n - _NEAR_END
        while i >= 0 and i >= stop:
            if anchors[i] <= pos:
                return self._t[i] + (pos - anchors[i]) * 1_000_000_000 // self._rate
            i -= 1
        if i < 0:
            if n == 0:
                raise IndexError("no anchor")
            return self._t[0] + (pos - anchors[0]) * 1_000_000_000 // self._rate
        i = bisect_right(anchors, pos, 0, i + 1) - 1
        if i < 0:
            i = 0
        return self._t[i] + (pos - anchors[i]) * 1_000_000_000 // self._rate

    def earliest(self, lo: int, hi: int) -> int:
        """The earliest time of a position in ``[lo, hi]``, or earlier (a lower bound):
        times rise with positions under each anchor, so the least is at ``lo`` or at an
        anchor inside."""
        t = self.t_at(lo)
        i = bisect_right(self._pos, lo)
        j = bisect_right(self._pos, hi)
        if j > i:
            inside = min(self._t[i:j])
            if inside < t:
                return inside
        return t

    def covers(self, pos: int) -> bool:
        """Whether ``pos`` still maps to a time (its anchor was not pruned)."""
        return bool(self._pos) and pos >= self._pos[0]

    def first_break_after(self, pos: int) -> int | None:
        i = bisect_right(self._breaks, pos)
        return self._breaks[i] if i < len(self._breaks) else None

    def prune_before(self, pos: int) -> None:
        # Trimmed in batches: only once more than _PRUNE_BATCH anchors lie before ``pos``.
        anchors = self._pos
        if len(anchors) > _PRUNE_BATCH + 1 and anchors[_PRUNE_BATCH + 1] <= pos:
            i = bisect_right(anchors, pos) - 1
            del anchors[:i]
            del self._t[:i]
        breaks = self._breaks
        if len(breaks) > _PRUNE_BATCH + 1 and breaks[_PRUNE_BATCH + 1] <= pos:
            j = bisect_right(breaks, pos) - 1
            del breaks[:j]
