"""Units of time, and the one conversion between the two clocks (pure: nothing here
reads a clock).

Every time inside voxproxy is an integer of nanoseconds on the monotonic clock of the
process that stamped it (``t_ns``); receipts speak milliseconds. :class:`EpochAnchor`
is one reading of both the monotonic and the wall clock, taken together by a shell
(:meth:`voxproxy.clock.EpochAnchor.now`), which the core uses to put wall times on
receipts.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


def parse_utc(text: str) -> _dt.datetime:
    """An ISO 8601 time (a receipt's ``started_at``) as an aware datetime; a naive time is
    taken as UTC. Raises :class:`ValueError` when ``text`` is not one."""
    dt = _dt.datetime.fromisoformat(text.strip())
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=_dt.UTC)


@dataclass(frozen=True, slots=True)
class EpochAnchor:
    """One reading of both clocks, taken together; converts monotonic to wall time."""

    mono_ns: int
    wall_ns: int

    def wall_ns_at(self, mono_ns: int) -> int:
        return self.wall_ns + (mono_ns - self.mono_ns)

    def iso_at(self, mono_ns: int) -> str:
        wall = self.wall_ns_at(mono_ns)
        dt = _dt.datetime.fromtimestamp(wall / 1e9, tz=_dt.UTC)
        return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")
