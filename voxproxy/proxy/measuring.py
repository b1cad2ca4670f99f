"""Measurement after forwarding, in groups, within a budget per turn of the event loop.

The relay forwards a message first and only then hands it to measurement
(``transports/websocket/``). Measurement runs in the same event loop, so every
microsecond it spends delays the next message of every call: a core saturated
by measurement would make the calls wait for it. :class:`MeasurementQueue` puts
a bound on that, and keeps the two kinds of work apart:

* **Grouped** (the default, ``group_ms`` > 0): every message is queued with its call,
  and the queue is measured every ``group_ms``, each call's messages together (a few
  per call, a call's state warm while they run), within the budget below. Forwarding
  and measurement interleaved message by message cost more CPU than each alone, and
  what grouping saves comes from not interleaving them, not from measuring a call's
  messages in a row (docs/performance.md, "Measurement in groups"). Whether a queued
  message carried audio is known once it is measured: the call then tells the relay's
  idle timer (``CallObserver.last_media_s``). ``group_ms=0`` measures a message at once
  while the turn's budget lasts (the bullets below). While a group is measured, a call
  whose pump falls due is *parked* there (its later messages wait with it, over turns
  of the loop if the budget runs out), and once every call has measured up to its pump,
  or ``PASS_PUMPS`` wait, :attr:`MeasurementQueue.pumps` makes their energies in one
  numpy pass (``session/pumps.py``: the same figures); then the calls go on, each
  finishing its pump first, within the budget.

* Each turn of the loop measurement may spend a budget: ``budget_ms``, or a share of
  what forwarding took since the previous turn (``share`` times it, at most
  ``max_budget_ms``), so that measurement keeps up with a busy loop without ever
  taking more of it than forwarding does, in slices short enough that the forwarding
  waiting behind one stays short. Not grouped, a message is measured at once
  while under the budget (the common case: nothing queues). What forwarding took is read
  from the loop thread's CPU time, a system call, only after a turn that measured its
  least budget or more, or left items queued: after a lighter turn the next one has the
  least budget.
* Past the budget, and for as long as a call has messages queued (its order is
  kept), messages are queued per call and measured on the loop's next turns,
  within the budget, the calls taking turns a few messages at a time. Messages
  carry their arrival times, and the measurement core reads no clock, so a
  message measured late gives exactly the figures it would have given at once.
* A message that has waited in the queue longer than ``shed_after_ms`` is *shed*
  (its wait counts from when the proxy queued it, not from its arrival at the host:
  a loop that read it late, kept waiting for a core, is not measurement falling
  behind, and its kernel arrival time keeps its figures exact): decoded
  (stream starts, marks, flushes and the playout timeline stay exact) but its
  audio not analysed (:meth:`CallSession.on_message` with ``shed=True``): the
  figures near it are withheld with the reason ``measurement_shed``, and it is
  counted (``measurement_shed`` in the receipt's anomalies and in
  ``voxproxy_anomalies_total``; :attr:`MeasurementQueue.shed` here).
* A call with more than ``max_backlog`` messages queued gives up measuring: it
  keeps only its traffic counts (``measurement_disabled`` in its receipt), so that
  memory stays bounded whatever the load.

* While the loop runs late (``lagging()``: the proxy's last event-loop lag reading
  over ``YIELD_LAG_MS``), measurement yields: its budget per turn is the least one,
  ``budget_ms``, whatever forwarding took. A core that no longer keeps up with the
  calls' forwarding *and* their measurement then gives forwarding the core, and it is
  measurement that falls behind (and, past ``shed_after_ms``, sheds), not the calls.
  :attr:`MeasurementQueue.behind_ns` says how far behind it is: the proxy's admission
  refuses new calls past ``ADMIT_BEHIND_MS``, long before anything is shed.

Forwarding never waits on more than one budget of measurement per turn of the
loop (plus the one message being measured when the budget ran out): at most
``max_budget_ms``, and no more than the forwarding of that turn took. Apart from that
budget: a call's first few messages, until its wire has named it, are measured as they
come (:meth:`MeasurementQueue.may_measure_now`'s ``urgent``), so that the call is known
by its wire's id from then on (event API, crash journal).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from voxproxy.core.events import AnomalyKind
from voxproxy.core.session.batch import Item as BatchItem
from voxproxy.core.session.call import CallSession
from voxproxy.core.session.pumps import PumpGroup
from voxproxy.core.timebase import NS_PER_MS

# Messages are queued this long (at most) before they are measured together: of 0, 20, 50
# and 100 ms, 50 cost the least CPU per message (docs/performance.md, "Measurement in
# groups").
DEFAULT_GROUP_MS = 50.0
DEFAULT_BUDGET_MS = 0.25
# Measurement may take half as long as forwarding took, 1 ms at most, each turn of the loop:
# finer slices keep the forwarding tail short, and the loop's idle time still goes to
# measurement (a turn with no forwarding has the least budget and the next turn comes at
# once). Grouped, a group's first slice takes the whole cap (forwarding took tens of ms
# since the last group), so the cap bounds what a group adds to forwarding's tail
# (docs/performance.md, "Measurement budget per turn").
DEFAULT_SHARE = 0.5
DEFAULT_MAX_BUDGET_MS = 1.0
DEFAULT_SHED_AFTER_MS = 500.0
_ITEMS_PER_VISIT = 8  # items of one call measured before the next call's turn
YIELD_LAG_MS = 5.0  # a loop reading this late: measurement takes only its least budget
# Measurement this far behind: no new call (proxy admission). Above how far it falls
# behind for a moment while a burst of callers' handshakes takes the core at and under
# capacity, below the 500 ms at which it sheds (docs/performance.md, "Admission on
# measurement behind").
ADMIT_BEHIND_MS = 300.0
DEFAULT_MAX_BACKLOG = 5000  # messages queued per call (50 s of 20 ms frames one way)
# Parked pumps that make a pass without waiting for every call (a queue that never
# empties, under overload, still passes its pumps on: none waits for long).
PASS_PUMPS = 64

# An item to queue: (direction, payload, t_ns) for a message, (None, event, t_ns) for an
# event from the event API. Its time is when it arrived (or was stamped). Queued, it
# carries when it was queued too (session/batch.py's Item: ``Queued`` here).
Item = tuple[object, object, int]
Queued = BatchItem


class Measured(Protocol):
    """A call as the queue sees it (``proxy.CallContext``)."""

    backlog: deque[Queued] | None

    @property
    def pump_due(self) -> bool:
        """The call's pump waits for the queue's :class:`PumpGroup` (its next items wait
        until the group has run)."""
        ...

    def measure_queued(
        self, limit: int, cpu_ns: Callable[[], int], stop_at: int, shed_before: int
    ) -> int:
        """Measure items from the left of ``backlog`` (never raises), as
        :func:`voxproxy.core.session.batch.measure` does: at most ``limit``, and none after
        ``cpu_ns()`` reaches ``stop_at`` (at least one); those queued before
        ``shed_before`` are shed. It may stop after an item that left its pump due
        (:attr:`pump_due`). Returns how many messages were shed."""
        ...

    def backlog_drained(self) -> None:
        """The call's queue is empty again (a call that ended may now close)."""
        ...

    def give_up(self) -> None:
        """Too much queued: stop measuring the call, keep counting its traffic (the
        backlog is emptied; what comes later is queued and only counted)."""
        ...


def give_up_measuring(session: CallSession, backlog: deque[Queued] | None) -> None:
    """Measurement fell too far behind for this call (:meth:`Measured.give_up`): it
    keeps its traffic counts only (its receipt says ``measurement_disabled``); each
    message still queued is counted as shed and in the call's traffic, then dropped."""
    session.measurement_disabled = True
    if backlog:
        for direction, payload, t_ns, _queued in backlog:
            if direction is not None:
                session.note_anomaly(AnomalyKind.MEASUREMENT_SHED)
                session.on_message(direction, payload, t_ns)  # type: ignore[arg-type]
        backlog.clear()


class MeasurementQueue:
    """The measurement of every call of one event loop, within a budget per turn."""

    def __init__(
        self,
        *,
        group_ms: float = DEFAULT_GROUP_MS,
        budget_ms: float = DEFAULT_BUDGET_MS,
        share: float = DEFAULT_SHARE,
        max_budget_ms: float = DEFAULT_MAX_BUDGET_MS,
        shed_after_ms: float = DEFAULT_SHED_AFTER_MS,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
        cpu_ns: Callable[[], int] = time.perf_counter_ns,
        loop_cpu_ns: Callable[[], int] = time.thread_time_ns,
        now_ns: Callable[[], int] = time.monotonic_ns,
        call_soon: Callable[[Callable[[], None]], object] | None = None,
        call_later: Callable[[float, Callable[[], None]], object] | None = None,
        lagging: Callable[[], bool] | None = None,
    ) -> None:
        """``cpu_ns`` times the work against the budget, ``loop_cpu_ns`` is the CPU time
        of the loop's thread (what forwarding took is read from it: time the process
        was idle or waited for a core is no forwarding), ``now_ns`` is the clock the
        messages were stamped with, ``call_soon`` schedules the next turn's work and
        ``call_later`` a group's (the running loop's by default); tests pass fakes of
        them. ``lagging`` says whether the loop runs late now (then measurement yields:
        the least budget per turn). ``group_ms``: how long messages are queued before
        measured together (0: measured at once while the budget lasts)."""
        if group_ms < 0:
            raise ValueError(f"group_ms must be 0 or more, got {group_ms}")
        self.group_s = group_ms / 1000.0
        self.budget_ns = int(budget_ms * NS_PER_MS)
        self.share = share
        self.max_budget_ns = int(max_budget_ms * NS_PER_MS)
        self._turn_budget_ns = self.budget_ns  # this turn's
        self._turn_end_ns: int | None = None  # the loop's CPU when the last turn ended
        self._inline_ns = 0  # measured at once since then
        self.shed_after_ns = int(shed_after_ms * NS_PER_MS)
        self.max_backlog = max_backlog
        self._cpu_ns = cpu_ns
        self._loop_cpu_ns = loop_cpu_ns
        self._now_ns = now_ns
        self._call_soon = call_soon
        self._call_later = call_later
        self._lagging = lagging
        self.yielded = 0  # turns whose budget was the least one because the loop lagged
        self._spent_ns = 0  # measurement's CPU since the loop last went round
        self._turn_pending = False  # a turn on the loop's next round
        self._group_pending = False  # a group's turn, in group_ms
        self._waiting: deque[Measured] = deque()  # calls with a backlog, taking turns
        self.deferred = 0  # messages measured on a later turn of the loop
        self.shed = 0  # messages whose analysis was shed
        self.given_up = 0  # calls that gave up measuring (backlog over max_backlog)
        self.queued = 0  # items queued now, all calls
        # Grouped: the pumps that fall due while a turn measures, finished together (one
        # energies pass: session/pumps.py). Its calls are given it (CallSession.pumps).
        self.pumps = PumpGroup()
        self._parked: list[Measured] = []  # calls whose pump waits for the pass

    # -- from the calls ------------------------------------------------------------------

    def may_measure_now(self, call: Measured, urgent: bool = False) -> bool:
        """Whether a message of ``call`` may be measured at once (then :meth:`charge`):
        never while the call has items queued (its order is kept); an ``urgent`` one (a
        call's first messages, until its wire has named it) always else, whatever the
        turn's budget; any other only within the budget, and never when grouped.

        An urgent message is not left to wait for the budget: the wire's call id it
        carries goes to the event API (which finds a call by it as soon as its agent
        could) and to the crash journal as the message is forwarded. Left behind the
        queue, a call could end, its caller seeing it finish, with its start still
        unmeasured: a proxy killed then left it journalled under an id of its own, and
        its receipt (``proxy_crashed``) could not be found by the call's id. The caller
        bounds how many of a call's messages are urgent (``proxy.websocket``)."""
        if call.backlog is not None:
            return False
        if urgent:
            return True
        return not self.group_s and self._spent_ns < self._turn_budget_ns

    def charge(self, cpu_ns: int) -> None:
        """Measurement spent ``cpu_ns`` outside the queue's own turns."""
        self._spent_ns += cpu_ns
        self._inline_ns += cpu_ns
        self._schedule()

    def cpu_now(self) -> int:
        return self._cpu_ns()

    def defer(self, call: Measured, item: Item, urgent: bool = False) -> None:
        """Queue ``item`` behind the call's earlier ones (``urgent``: measured on the
        loop's next round, not with the group)."""
        backlog = call.backlog
        if backlog is None:
            backlog = call.backlog = deque()
            self._waiting.append(call)
        backlog.append((item[0], item[1], item[2], self._now_ns()))
        self.queued += 1
        self.deferred += 1
        if len(backlog) > self.max_backlog:
            self.given_up += 1
            self.queued -= len(backlog)
            call.give_up()  # counts what was queued and empties the backlog
        self._schedule(group=not urgent)

    def oldest_queued_ns(self) -> int | None:
        """When the oldest item queued now was queued, or None when nothing is.

        Read from the queue itself, never remembered: once the queue is empty the
        proxy is caught up, however long ago its last turn ran (an idle proxy is a
        fresh one)."""
        oldest: int | None = None
        for calls in (self._waiting, self._parked):
            for call in calls:
                backlog = call.backlog
                if backlog:
                    t_ns = backlog[0][3]  # a call's first item is its oldest
                    if oldest is None or t_ns < oldest:
                        oldest = t_ns
        return oldest

    @property
    def shedding(self) -> bool:
        """Measurement is so far behind that it sheds (the oldest queued item has
        waited past ``shed_after_ms``)."""
        return self.behind_ns > self.shed_after_ns

    @property
    def behind_ns(self) -> int:
        """How long the oldest item queued now has waited (0: nothing queued): how
        far measurement is behind the calls."""
        oldest = self.oldest_queued_ns()
        return 0 if oldest is None else max(0, self._now_ns() - oldest)

    # -- the loop's turns ----------------------------------------------------------------

    def _schedule(self, group: bool = False) -> None:
        """A turn on the loop's next round; ``group``: a newly queued item's, in
        ``group_ms`` when grouped (more of every call's messages come meanwhile)."""
        if group and self.group_s:
            if self._turn_pending or self._group_pending:
                return
            self._group_pending = True
            call_later = self._call_later
            if call_later is None:
                call_later = self._call_later = asyncio.get_running_loop().call_later
            call_later(self.group_s, self._group_turn)
            return
        if self._turn_pending:
            return
        self._turn_pending = True
        call_soon = self._call_soon
        if call_soon is None:
            # The running loop's, looked up once: asyncio.get_running_loop() checks the
            # process id, a system call, on every look-up (once a turn of the loop).
            call_soon = self._call_soon = asyncio.get_running_loop().call_soon
        call_soon(self.run_turn)

    def _group_turn(self) -> None:
        self._group_pending = False
        if not self._turn_pending:  # (else the turn due on the loop's next round does it)
            self.run_turn()

    def drain(self) -> None:
        """Measure everything queued, now (at shutdown: every call's receipt is owed)."""
        while self._waiting or self._parked:
            self.run_turn(unbounded=True)

    def _pass(
        self, parked: list[Measured], waiting: deque[Measured], cpu: Callable[[], int], start: int
    ) -> int:
        """The parked calls' pumps' energies in one pass; the calls go on. Returns the
        CPU spent in the turn so far."""
        self.pumps.run()
        waiting.extend(parked)
        parked.clear()
        return cpu() - start

    def run_turn(self, unbounded: bool = False) -> None:
        """One turn of the loop has passed: measure queued items within the budget."""
        self._turn_pending = False
        inline = self._inline_ns
        self._inline_ns = 0
        waiting = self._waiting
        parked = self._parked
        loop_cpu: int | None = None
        budget = self.budget_ns
        if waiting or parked or unbounded or inline >= self.budget_ns:
            # What forwarding took since the last turn: the loop's CPU less measurement's.
            # Read only here: it is a system call, not a vDSO read like the clocks (what it
            # costs: docs/performance.md, "Measurement budget per turn"). A turn that
            # measured within the least budget, nothing queued, leaves the next one the
            # least budget.
            loop_cpu = self._loop_cpu_ns()
            end = self._turn_end_ns
            forwarding = 0 if end is None else loop_cpu - end - inline
            budget = max(budget, min(self.max_budget_ns, int(self.share * forwarding)))
            if budget > self.budget_ns and self._lagging is not None and self._lagging():
                budget = self.budget_ns  # forwarding is late: it gets the core back first
                self.yielded += 1
            if unbounded:
                budget = 1 << 62
        self._turn_budget_ns = budget
        self._spent_ns = 0
        if not waiting and not parked:
            self._turn_end_ns = loop_cpu
            return
        assert loop_cpu is not None  # read: items are queued
        cpu = self._cpu_ns
        start = cpu()
        shed_before = self._now_ns() - self.shed_after_ns
        spent = 0
        # A call whose pump falls due waits (parked), its later items with it, until every
        # call has measured up to its own pump (or PASS_PUMPS wait): then the group's one
        # pass makes their energies, and they go on.
        pumps = self.pumps
        pumps.open = bool(self.group_s)
        if parked and not waiting:
            spent = self._pass(parked, waiting, cpu, start)
        while waiting:  # at least one item a turn, however small the budget
            call = waiting.popleft()
            backlog = call.backlog
            if backlog:
                # A few of a call's items, then the next call.
                before = len(backlog)
                self.shed += call.measure_queued(_ITEMS_PER_VISIT, cpu, start + budget, shed_before)
                self.queued -= before - len(backlog)
                spent = cpu() - start
            if call.pump_due:
                # Parked even when nothing else is queued: the group holds its session
                # until the pass, which must come (and its end waits for its pump).
                parked.append(call)
            elif call.backlog:
                waiting.append(call)
            else:
                call.backlog = None
                call.backlog_drained()
            if parked and (not waiting or len(parked) >= PASS_PUMPS):
                spent = self._pass(parked, waiting, cpu, start)
            if spent >= budget:
                break
        pumps.open = False
        self._spent_ns = spent
        self._turn_end_ns = loop_cpu + spent
        if waiting or parked or (spent and not self.group_s):
            # The next turn measures the rest (after forwarding's turn), or just starts
            # afresh (measuring at once: the budget is spent).
            self._schedule()
