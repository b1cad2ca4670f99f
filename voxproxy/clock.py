"""What the shells read from the world for the core: the clocks, and a random secret.

The measurement core never reads a clock and draws no random number: shells stamp every
message with ``time.monotonic_ns()`` and hand it in as ``t_ns`` (units and the pure
:class:`~voxproxy.core.timebase.EpochAnchor` are in :mod:`voxproxy.core.timebase`), and hand it
the secret its keyed hashes use. Here: :meth:`EpochAnchor.now`, one reading of both
clocks taken once per call; :class:`LagMonitor`, which measures how late the event
loop's clock readings run; :func:`new_secret`, a key for a run that was given none.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable

from voxproxy.core import timebase


def new_secret() -> bytes:
    """32 random bytes: the key of :mod:`voxproxy.core.ids`' hashes when none was configured
    (hashes then compare only within the process that made it)."""
    return secrets.token_bytes(32)


class EpochAnchor(timebase.EpochAnchor):
    """:class:`voxproxy.core.timebase.EpochAnchor`, with :meth:`now` for the shells."""

    __slots__ = ()

    @classmethod
    def now(cls) -> EpochAnchor:
        return cls(mono_ns=time.monotonic_ns(), wall_ns=time.time_ns())


class LagMonitor:
    """How late the event loop's own clock readings are: a timer every ``period_s``
    measures how much later than asked it ran. Every message stamped while the loop was
    blocked carries up to that much delay, so a figure whose edges fall near a block
    inherits it as uncertainty (MEASUREMENT.md 2). Only lags of ``min_lag_ms`` or more
    are kept, the last ``keep`` of them."""

    def __init__(
        self,
        period_s: float = 0.02,
        min_lag_ms: float = 0.5,
        keep: int = 20000,
        *,
        clock: Callable[[], int] = time.monotonic_ns,
        cpu_clock: Callable[[], int] = time.thread_time_ns,
    ) -> None:
        """``clock`` reads monotonic nanoseconds, ``cpu_clock`` the CPU time of the
        loop's thread (tests pass fakes of both)."""
        self.period_s = period_s
        self._clock = clock
        self._cpu_clock = cpu_clock
        self._min_ns = int(min_lag_ms * 1_000_000)
        self._times: deque[int] = deque(maxlen=keep)
        self._lags: deque[int] = deque(maxlen=keep)
        self._task: asyncio.Task[None] | None = None
        self.max_lag_ns = 0
        # Every reading of the last ~2.5 s (late or not), for the loop's load now.
        self._readings: deque[tuple[int, int]] = deque(maxlen=128)
        # The loop thread's CPU time at each reading that took it (None: not taken).
        self._cpu: deque[tuple[int, int]] = deque(maxlen=128)

    def record(self, t_ns: int, lag_ns: int, cpu_ns: int | None = None) -> None:
        """A reading: at ``t_ns`` the loop ran a timer ``lag_ns`` late; ``cpu_ns``, the
        loop thread's CPU time then, if read."""
        self._readings.append((t_ns, lag_ns))
        if cpu_ns is not None:
            self._cpu.append((t_ns, cpu_ns))
        if lag_ns >= self._min_ns:
            self._times.append(t_ns)
            self._lags.append(lag_ns)
            self.max_lag_ns = max(self.max_lag_ns, lag_ns)

    def max_between(self, start_ns: int, end_ns: int) -> int:
        """The largest delay a clock reading taken in ``[start_ns, end_ns]`` can carry:
        the longest block of the loop that overlaps the interval."""
        times = self._times
        worst = 0
        i = bisect_left(times, start_ns)
        n = len(times)
        while i < n:
            t = times[i]
            lag = self._lags[i]
            if t - lag > end_ns:
                if t - 5_000_000_000 > end_ns:  # no block lasts that long
                    break
            elif lag > worst:
                worst = lag
            i += 1
        return worst

    def recent_lags_ns(self, window_ns: int) -> list[int]:
        """The lags of the readings of the last ``window_ns``, oldest first."""
        since = self._clock() - window_ns
        lags = []
        for t, lag in reversed(self._readings):
            if t < since:
                break
            lags.append(lag)
        lags.reverse()
        return lags

    def cpu_share(self, window_ns: int) -> float | None:
        """The share of one core the loop's thread used over the last ``window_ns``
        (from the readings that took its CPU time), or None when fewer than two did.

        Beside the lag it tells whose the lag is: a loop that lags while its thread
        works most of the time is carrying more than its core (the proxy's own load); a
        loop that lags while its thread mostly waited was waiting for a core the
        machine gave to other work."""
        since = self._clock() - window_ns
        first: tuple[int, int] | None = None
        last: tuple[int, int] | None = None
        for reading in reversed(self._cpu):
            if reading[0] < since:
                break
            if last is None:
                last = reading
            first = reading
        if first is None or last is None or last[0] <= first[0]:
            return None
        return (last[1] - first[1]) / (last[0] - first[0])

    def lag_now_ns(self) -> int:
        """How late the loop runs now: the last reading's lag, or, when the next reading
        is overdue (the loop has not come round to its timer), how overdue it is."""
        if not self._readings:
            return 0
        t, lag = self._readings[-1]
        overdue = self._clock() - t - int(self.period_s * 1e9)
        return max(lag, overdue)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        period_ns = int(self.period_s * 1e9)
        clock = self._clock
        cpu_clock = self._cpu_clock
        while True:
            due = clock() + period_ns
            await asyncio.sleep(self.period_s)
            now = clock()
            self.record(now, now - due, cpu_clock())
