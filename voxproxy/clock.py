"""Clocks.

The measurement core never reads a clock: shells stamp every message with
``t_ns`` from a :class:`Clock` and hand it in. :class:`FakeClock` drives scripted
timelines in tests; :class:`EpochAnchor` converts monotonic times to wall-clock
times once per call.
"""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass
from typing import Protocol


class Clock(Protocol):
    def now_ns(self) -> int:
        """Monotonic nanoseconds."""
        ...


class MonotonicClock:
    """The process clock: ``time.monotonic_ns``."""

    __slots__ = ()

    def now_ns(self) -> int:
        return time.monotonic_ns()


class FakeClock:
    """A clock that only moves when told to."""

    __slots__ = ("_t_ns",)

    def __init__(self, start_ns: int = 0) -> None:
        self._t_ns = start_ns

    def now_ns(self) -> int:
        return self._t_ns

    def set_ns(self, t_ns: int) -> None:
        if t_ns < self._t_ns:
            raise ValueError("a FakeClock never goes backwards")
        self._t_ns = t_ns

    def advance_ms(self, ms: float) -> int:
        self._t_ns += round(ms * 1_000_000)
        return self._t_ns


@dataclass(frozen=True, slots=True)
class EpochAnchor:
    """One reading of both clocks, taken together; converts monotonic to wall time."""

    mono_ns: int
    wall_ns: int

    @classmethod
    def now(cls) -> EpochAnchor:
        return cls(mono_ns=time.monotonic_ns(), wall_ns=time.time_ns())

    def wall_ns_at(self, mono_ns: int) -> int:
        return self.wall_ns + (mono_ns - self.mono_ns)

    def iso_at(self, mono_ns: int) -> str:
        wall = self.wall_ns_at(mono_ns)
        dt = _dt.datetime.fromtimestamp(wall / 1e9, tz=_dt.UTC)
        return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")
