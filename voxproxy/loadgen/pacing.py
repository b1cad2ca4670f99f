"""One pacing timer per event loop for every real-time sender on it.

A live caller sends frame ``k`` at its absolute deadline ``t0 + (k+1)*d``. Giving each
caller its own ``asyncio.sleep`` per frame costs a timer, a future and a task wake-up per
caller per frame; with hundreds of callers on a loop that bookkeeping, not the audio, is
most of the load generator's CPU, and the wake-ups queue behind each other.

:class:`Pacer` keeps every sender's next deadline in one heap and one loop timer armed at
the earliest of them. When it fires it runs, in deadline order, every sender whose
deadline has passed (synchronously: no task per frame), then re-arms at the next one. A
sender is any callable ``send(now_ns, deadline_ns) -> next deadline or None`` (None: it
is done). The loop's timers keep whole milliseconds (uvloop's libuv timers round a delay
to the nearest ms, and count it from the loop's time cached at the start of its turn), so
a timer may fire up to about 1 ms early, as ``asyncio.sleep`` does: a fire sends what is
due within ``EARLY_NS`` (one such tick) rather than re-arming for less than the timers
can tell apart (which would spin). How early or late each frame left is the sender's to
record.

While a pacer has senders it spaces out the cyclic garbage collector's full passes
(:class:`GcHold`): a full pass scans every tracked object of the process (about 430 per
caller: its connection, record, playout and detector), 30-100 ms at 250 callers, during
which no frame leaves; by default one comes every few seconds. The young generations are
still collected as usual (about 0.2 ms, and 2-3 ms for generation 1, at 250 callers). A
full pass waits for ``FULL_GC_AFTER`` generation-1 passes instead of CPython's 10 (at 250
callers about 50 s instead of 5); it is not skipped, so what cyclic garbage there is
stays bounded in a long run (a finished caller leaves none: it lets go of its connection,
whose objects refer to each other). When the last sender of the process is done the
thresholds found are back.
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import itertools
import threading
import time
import weakref
from collections.abc import Callable
from weakref import WeakKeyDictionary

from voxproxy.core.timebase import NS_PER_MS, NS_PER_S

Send = Callable[[int, int], int | None]
EARLY_NS = NS_PER_MS  # the loop timers' resolution: what a fire counts as due already
# While senders pace: a full collection waits for this many generation-1 collections
# (CPython's default threshold: 10). At 250 callers there are about 2 a second.
FULL_GC_AFTER = 100


class GcHold:
    """Holds off full garbage collections while any pacer of the process has senders.

    The first hold raises the collector's third threshold so that a full pass waits
    for ``FULL_GC_AFTER`` more generation-1 passes; the last release puts back the
    threshold found (each hold is released once)."""

    _lock = threading.Lock()
    _holds = 0
    _saved: tuple[int, int, int] | None = None

    def __init__(self) -> None:
        self.held = False

    def hold(self) -> None:
        if self.held:
            return
        self.held = True
        with GcHold._lock:
            if GcHold._holds == 0:
                t0, t1, t2 = gc.get_threshold()
                GcHold._saved = (t0, t1, t2)
                # The third count is the generation-1 passes since the last full one.
                gc.set_threshold(t0, t1, max(t2, gc.get_count()[2] + FULL_GC_AFTER))
            GcHold._holds += 1

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        with GcHold._lock:
            GcHold._holds -= 1
            saved = GcHold._saved
            if GcHold._holds == 0 and saved is not None:
                GcHold._saved = None
                t0, t1, _ = gc.get_threshold()
                gc.set_threshold(t0, t1, saved[2])


class Pacer:
    """Paced senders of one event loop. Use :func:`pacer` for the loop's shared one."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._heap: list[tuple[int, int, Send]] = []
        self._seq = itertools.count()  # ties in deadline: first added, first sent
        self._timer: asyncio.TimerHandle | None = None
        self._armed_ns: int | None = None
        self.fires = 0  # timer callbacks run (each sends every frame then due)
        self.sends = 0  # sender calls
        self.gc_hold = GcHold()  # held while there are senders
        weakref.finalize(self, self.gc_hold.release)  # a loop closed with senders left

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, deadline_ns: int, send: Send) -> None:
        """Call ``send`` at ``deadline_ns`` (time.monotonic_ns) or as soon after as the loop can."""
        heapq.heappush(self._heap, (deadline_ns, next(self._seq), send))
        self.gc_hold.hold()
        if self._armed_ns is None or deadline_ns < self._armed_ns:
            self._arm(deadline_ns)

    def _arm(self, deadline_ns: int) -> None:
        if self._timer is not None:
            self._timer.cancel()
        delay = max(0.0, (deadline_ns - time.monotonic_ns()) / NS_PER_S)
        self._armed_ns = deadline_ns
        self._timer = self._loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._armed_ns = None
        self.fires += 1
        heap = self._heap
        due_by = time.monotonic_ns() + EARLY_NS
        # Every frame due by now, in deadline order: a sender that fell behind (the loop
        # was held up) catches up at once, as a live caller's queued frames leave after
        # a stall, taking turns with the others by deadline.
        while heap and heap[0][0] <= due_by:
            deadline, _, send = heapq.heappop(heap)
            self.sends += 1
            try:
                nxt = send(time.monotonic_ns(), deadline)
            except Exception:  # a sender's failure is its own; the others keep their pace
                nxt = None
            if nxt is not None:
                heapq.heappush(heap, (nxt, next(self._seq), send))
        if heap:
            self._arm(heap[0][0])
        else:
            self.gc_hold.release()


_PACERS: WeakKeyDictionary[asyncio.AbstractEventLoop, Pacer] = WeakKeyDictionary()


def pacer() -> Pacer:
    """The running loop's shared pacer (made on first use)."""
    loop = asyncio.get_running_loop()
    found = _PACERS.get(loop)
    if found is None:
        found = _PACERS[loop] = Pacer(loop)
    return found
