"""The measurement queue on fake clocks: grouped (each call's messages measured together
every ``group_ms``), or measured at once within the budget and queued past it (order kept
per call, calls taking turns); shed past ``shed_after_ms``, given up past ``max_backlog``.
No sleeps, no timed assertions: the CPU clock and the loop are fakes."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import pytest

from voxproxy.proxy.measuring import (
    DEFAULT_GROUP_MS,
    DEFAULT_MAX_BACKLOG,
    DEFAULT_MAX_BUDGET_MS,
    DEFAULT_SHARE,
    MeasurementQueue,
    Queued,
)

MS = 1_000_000


class FakeLoop:
    def __init__(self) -> None:
        self.scheduled: list[Callable[[], None]] = []
        self.later: list[tuple[float, Callable[[], None]]] = []

    def call_soon(self, fn: Callable[[], None]) -> None:
        self.scheduled.append(fn)

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> None:
        self.later.append((delay_s, fn))

    def elapse(self) -> None:
        """The delay of every call_later has passed: they run (as the loop would)."""
        todo, self.later = self.later, []
        for _, fn in todo:
            fn()

    def turn(self) -> None:
        todo, self.scheduled = self.scheduled, []
        for fn in todo:
            fn()


class Call:
    """A call that measures each item in ``cost_ns`` of fake CPU."""

    def __init__(self, name: str, cpu: list[int], cost_ns: int) -> None:
        self.name = name
        self.backlog: deque[Queued] | None = None
        self.cpu = cpu
        self.cost_ns = cost_ns
        self.measured: list[tuple[object, bool]] = []
        self.drained = 0
        self.gave_up = False
        self.pump_due = False  # (no pumps here: tests/core/session/test_pumps.py has them)

    def measure_item(self, item: Queued, shed: bool) -> None:
        self.cpu[0] += self.cost_ns
        self.measured.append((item[1], shed))

    def measure_queued(
        self, limit: int, cpu_ns: Callable[[], int], stop_at: int, shed_before: int
    ) -> int:
        """As the core's batch (session/batch.measure) does it, one item at a time."""
        backlog = self.backlog
        shed = measured = 0
        while backlog and measured < limit:
            item = backlog.popleft()
            measured += 1
            late = item[3] < shed_before
            shed += late
            self.measure_item(item, late)
            if cpu_ns() >= stop_at:
                break
        return shed

    def backlog_drained(self) -> None:
        self.drained += 1

    def give_up(self) -> None:
        self.gave_up = True
        assert self.backlog is not None
        self.backlog.clear()

    def message(
        self, queue: MeasurementQueue, payload: str, t_ns: int, urgent: bool = False
    ) -> None:
        """What CallContext.on_message does with the queue (``urgent``: one of the call's
        first messages, before its wire has named it)."""
        if queue.may_measure_now(self, urgent):
            start = queue.cpu_now()
            self.measure_item((0, payload, t_ns, t_ns), False)
            queue.charge(queue.cpu_now() - start)
        else:
            queue.defer(self, (0, payload, t_ns), urgent)


def make(
    budget_ms: float = 1.0,
    group_ms: float = 0.0,
    shed_after_ms: float = 500.0,
    max_backlog: int = 100,
    share: float = DEFAULT_SHARE,
    max_budget_ms: float = DEFAULT_MAX_BUDGET_MS,
    *,
    loop_cpu_ns: Callable[[], int] | None = None,
    lagging: Callable[[], bool] | None = None,
) -> tuple[MeasurementQueue, FakeLoop, list[int], list[int]]:
    """A queue on a fake loop and fake clocks: the CPU time ``cpu[0]`` (the loop's too,
    unless ``loop_cpu_ns`` reads it) and the time now ``now[0]``."""
    loop, cpu, now = FakeLoop(), [0], [0]
    queue = MeasurementQueue(
        group_ms=group_ms,
        budget_ms=budget_ms,
        share=share,
        max_budget_ms=max_budget_ms,
        shed_after_ms=shed_after_ms,
        max_backlog=max_backlog,
        cpu_ns=lambda: cpu[0],
        loop_cpu_ns=loop_cpu_ns or (lambda: cpu[0]),
        now_ns=lambda: now[0],
        call_soon=loop.call_soon,
        call_later=loop.call_later,
        lagging=lagging,
    )
    return queue, loop, cpu, now


def test_within_the_budget_everything_is_measured_at_once() -> None:
    queue, loop, cpu, _ = make(budget_ms=1.0)
    a = Call("a", cpu, cost_ns=MS // 10)
    for turn in range(5):
        for k in range(9):  # 0.9 ms per turn of the loop
            a.message(queue, f"{turn}.{k}", 0)
        loop.turn()
    assert len(a.measured) == 45 and queue.deferred == 0 and a.backlog is None


def test_past_the_budget_messages_wait_for_later_turns_in_order() -> None:
    queue, loop, cpu, _ = make(budget_ms=1.0)
    a, b = Call("a", cpu, cost_ns=MS // 2), Call("b", cpu, cost_ns=MS // 2)
    for k in range(6):
        a.message(queue, f"a{k}", 0)
        b.message(queue, f"b{k}", 0)
    # 0.5 ms each: two measured at once, then the budget is spent.
    assert [p for p, _ in a.measured] == ["a0"] and [p for p, _ in b.measured] == ["b0"]
    assert queue.queued == 10
    turns = 0
    while queue.queued:
        before = cpu[0]
        loop.turn()
        turns += 1
        # A turn measures while under the budget: at most one item beyond it.
        assert cpu[0] - before <= queue.budget_ns + MS // 2
    assert turns == 5
    assert [p for p, _ in a.measured] == [f"a{k}" for k in range(6)]  # order kept per call
    assert [p for p, _ in b.measured] == [f"b{k}" for k in range(6)]
    assert a.backlog is None and a.drained == 1 and b.drained == 1
    assert not any(shed for _, shed in a.measured + b.measured)
    # Once drained, the next message is measured at once again.
    loop.turn()
    a.message(queue, "a6", 0)
    assert a.measured[-1] == ("a6", False) and a.backlog is None


def test_a_busy_loop_lets_measurement_take_as_long_as_forwarding_took() -> None:
    queue, loop, cpu, _ = make(budget_ms=1.0, share=1.0, max_budget_ms=10.0)
    a = Call("a", cpu, cost_ns=MS)
    for k in range(40):
        a.message(queue, f"m{k}", 0)  # m0 at once (1 ms), the rest queued
    loop.turn()  # nothing known of forwarding yet: 1 ms
    assert len(a.measured) == 2
    cpu[0] += 4 * MS  # forwarding took 4 ms of the loop before the next turn
    loop.turn()
    assert len(a.measured) == 6
    cpu[0] += 50 * MS  # a long turn of forwarding: measurement still gets at most 10 ms
    loop.turn()
    assert len(a.measured) == 16
    loop.turn()  # no forwarding in between: back to 1 ms
    assert len(a.measured) == 17


def test_by_default_measurement_takes_half_of_forwarding_in_slices_of_1_ms_at_most() -> None:
    queue, loop, cpu, _ = make(budget_ms=0.25)  # the defaults: share 0.5, at most 1 ms
    a = Call("a", cpu, cost_ns=MS // 4)
    for k in range(80):
        a.message(queue, f"m{k}", 0)  # m0 at once (0.25 ms), the rest queued
    loop.turn()  # nothing known of forwarding yet: the least budget
    assert len(a.measured) == 2
    cpu[0] += 3 * MS // 2  # forwarding took 1.5 ms: measurement may take 0.75 ms
    loop.turn()
    assert len(a.measured) == 5
    cpu[0] += 50 * MS  # a long turn of forwarding: still 1 ms at most
    loop.turn()
    assert len(a.measured) == 9
    loop.turn()  # an idle loop: the least budget, turn after turn
    assert len(a.measured) == 10


def test_a_call_with_a_backlog_queues_even_under_the_budget() -> None:
    queue, loop, cpu, _ = make(budget_ms=1.0)
    a = Call("a", cpu, cost_ns=2 * MS)
    a.message(queue, "first", 0)  # over the budget alone
    a.message(queue, "second", 0)
    loop.turn()  # a new turn: budget again, but "second" waits behind nothing now
    a.message(queue, "third", 0)
    loop.turn()
    assert [p for p, _ in a.measured] == ["first", "second", "third"]


@pytest.mark.parametrize("group_ms", [0.0, DEFAULT_GROUP_MS])
def test_a_call_s_first_messages_are_measured_at_once_past_the_budget(group_ms: float) -> None:
    """Until its wire has named it, a call's messages (urgent) do not wait for the budget
    (nor for the group): its wire id is known as its start is forwarded. Behind items
    of its own already queued, they still wait their turn (its order is kept)."""
    queue, loop, cpu, _ = make(budget_ms=1.0, group_ms=group_ms)
    a, b = Call("a", cpu, cost_ns=2 * MS), Call("b", cpu, cost_ns=2 * MS)
    a.message(queue, "a0", 0)
    a.message(queue, "a1", 0)  # past the budget (or grouped): queued
    b.message(queue, "connected", 0, urgent=True)
    b.message(queue, "start", 0, urgent=True)
    a.message(queue, "a2", 0, urgent=True)  # behind a's queue
    assert [p for p, _ in b.measured] == ["connected", "start"] and b.backlog is None
    assert [p for p, _ in a.measured] == ([] if group_ms else ["a0"])
    loop.elapse()
    while queue.queued:
        loop.turn()
    assert [p for p, _ in a.measured] == ["a0", "a1", "a2"]


def test_messages_that_waited_too_long_are_shed_and_counted() -> None:
    queue, loop, cpu, now = make(budget_ms=1.0, shed_after_ms=500.0)
    a = Call("a", cpu, cost_ns=MS)
    for k in range(4):
        now[0] = k * 20 * MS  # 20 ms frames, each queued as it comes
        a.message(queue, f"m{k}", now[0])
    assert not queue.shedding
    now[0] = 560 * MS  # the loop was stalled: m1 and m2 waited more than 500 ms
    # The queue says it sheds while an item queued now has waited too long.
    assert queue.shedding and queue.behind_ns == 540 * MS
    while queue.queued:
        loop.turn()
    assert a.measured == [("m0", False), ("m1", True), ("m2", True), ("m3", False)]
    assert queue.shed == 2
    assert not queue.shedding and queue.behind_ns == 0  # caught up
    # A message that arrived long ago (the loop read it late) but is queued now has not
    # waited in the queue: measured, not shed (its arrival time keeps its figures exact).
    a.message(queue, "m4", 0)
    assert not queue.shedding and queue.behind_ns == 0
    loop.turn()
    assert a.measured[-1] == ("m4", False) and queue.shed == 2


def test_a_call_too_far_behind_gives_up() -> None:
    queue, loop, cpu, _ = make(budget_ms=1.0, max_backlog=10)
    a, b = Call("a", cpu, cost_ns=2 * MS), Call("b", cpu, cost_ns=0)
    a.message(queue, "a0", 0)
    for k in range(11):
        a.message(queue, f"a{k + 1}", 0)
    assert a.gave_up and queue.given_up == 1 and queue.queued == 0
    b.message(queue, "b0", 0)  # other calls are not held up by it
    loop.turn()
    loop.turn()
    assert [p for p, _ in b.measured] == ["b0"]


def test_while_the_loop_lags_measurement_yields_to_forwarding_and_says_how_far_behind() -> None:
    lagging = [False]
    queue, loop, cpu, now = make(
        share=1.0, max_budget_ms=10.0, max_backlog=DEFAULT_MAX_BACKLOG, lagging=lambda: lagging[0]
    )
    a = Call("a", cpu, cost_ns=MS)
    for k in range(40):
        a.message(queue, f"m{k}", 0)  # m0 at once, the rest queued (arrived at 0)
    loop.turn()
    assert len(a.measured) == 2 and queue.behind_ns == 0  # now is still 0
    cpu[0] += 4 * MS  # forwarding took 4 ms: measurement may take as much...
    lagging[0] = True  # ...but the loop runs late: only the least budget
    now[0] = 30 * MS
    loop.turn()
    assert len(a.measured) == 3 and queue.yielded == 1
    assert queue.behind_ns == 30 * MS  # the item measured waited 30 ms
    lagging[0] = False
    cpu[0] += 4 * MS
    loop.turn()
    assert len(a.measured) == 7 and queue.yielded == 1  # keeping up with forwarding again
    while queue.queued:
        loop.turn()
    loop.turn()  # a turn with nothing queued
    assert queue.behind_ns == 0 and not any(shed for _, shed in a.measured)


def test_a_light_turn_does_not_read_the_loops_cpu_time() -> None:
    """The loop's CPU time (a system call) is read only where the budget may need it: after
    a turn that measured the least budget or more, or with items queued."""
    reads = [0]

    def loop_cpu() -> int:
        reads[0] += 1
        return cpu[0]

    queue, loop, cpu, _ = make(
        share=1.0, max_budget_ms=10.0, max_backlog=DEFAULT_MAX_BACKLOG, loop_cpu_ns=loop_cpu
    )
    a = Call("a", cpu, cost_ns=MS // 10)
    for turn in range(20):
        for k in range(9):  # 0.9 ms a turn: under the least budget
            a.message(queue, f"{turn}.{k}", 0)
        cpu[0] += 5 * MS  # forwarding
        loop.turn()
    assert reads[0] == 0 and len(a.measured) == 180 and queue.deferred == 0
    # A heavy turn: read at its end; with nothing read before it, the least budget.
    for k in range(70):
        a.message(queue, f"h{k}", 0)  # 1 ms at once (10 of them), the rest queued
    assert len(a.measured) == 190 and queue.queued == 60
    loop.turn()
    assert reads[0] == 1 and len(a.measured) == 200  # 1 ms: nothing known of forwarding
    cpu[0] += 5 * MS  # forwarding took 5 ms before the next turn: measurement may too
    loop.turn()
    assert reads[0] == 2 and len(a.measured) == 250 and queue.queued == 0  # 5 ms, not 1


def test_grouped_each_calls_messages_wait_for_the_group_and_are_measured_together() -> None:
    queue, loop, cpu, _ = make(budget_ms=10.0, group_ms=DEFAULT_GROUP_MS)
    order: list[object] = []
    a, b = Call("a", cpu, cost_ns=MS // 10), Call("b", cpu, cost_ns=MS // 10)
    a.measured = b.measured = order  # type: ignore[assignment]  (one list: the order)
    for k in range(3):
        a.message(queue, f"a{k}", 0)
        b.message(queue, f"b{k}", 0)
    # Nothing measured yet; one turn waits the group's time, none on the loop's next round.
    assert order == [] and queue.queued == 6 and not loop.scheduled
    assert [delay for delay, _ in loop.later] == [DEFAULT_GROUP_MS / 1000]
    loop.elapse()
    assert [p for p, _ in order] == ["a0", "a1", "a2", "b0", "b1", "b2"]
    assert a.backlog is None and b.backlog is None and a.drained == 1 and b.drained == 1
    assert not loop.scheduled and not loop.later  # nothing queued: nothing scheduled
    a.message(queue, "a3", 0)  # the next message starts the next group
    assert len(loop.later) == 1 and len(order) == 6


def test_grouped_a_group_over_the_budget_goes_on_after_forwardings_turns() -> None:
    queue, loop, cpu, _ = make(budget_ms=1.0, group_ms=DEFAULT_GROUP_MS)
    a = Call("a", cpu, cost_ns=MS // 2)
    for k in range(10):
        a.message(queue, f"m{k}", 0)
    loop.elapse()
    assert len(a.measured) == 2 and len(loop.scheduled) == 1 and not loop.later  # 1 ms
    turns = 0
    while queue.queued:
        loop.turn()
        turns += 1
    assert turns == 4 and [p for p, _ in a.measured] == [f"m{k}" for k in range(10)]
    assert not loop.scheduled and not loop.later and a.drained == 1


def test_a_negative_group_time_is_refused() -> None:
    with pytest.raises(ValueError, match="group_ms"):
        MeasurementQueue(group_ms=-1.0)


def fresh_state(queue: MeasurementQueue) -> dict[str, object]:
    """What of the queue gates anything (admission, the next turn's budget): an idle
    queue must read as a fresh one's."""
    return {
        "queued": queue.queued,
        "behind_ns": queue.behind_ns,
        "shedding": queue.shedding,
        "oldest": queue.oldest_queued_ns(),
        "waiting": len(queue._waiting),
        "parked": len(queue._parked),
    }


@pytest.mark.parametrize("group_ms", [0.0, DEFAULT_GROUP_MS])
@pytest.mark.parametrize("idle_s", [0.0, 0.6, 40.0])
def test_a_drained_queue_is_not_behind_however_long_it_stays_idle(
    group_ms: float, idle_s: float
) -> None:
    # The sticky 503 of 8235969: a turn that emptied the queue kept the arrival of the
    # oldest item it had measured, so "behind" grew with the idle time after one call and
    # admission refused every later caller (measurement "shedding").
    queue, loop, cpu, now = make(budget_ms=0.25, group_ms=group_ms)
    fresh = fresh_state(make(budget_ms=0.25, group_ms=group_ms)[0])
    a = Call("a", cpu, cost_ns=MS)  # over the budget: items queue
    for k in range(50):  # one second of 20 ms frames
        now[0] = k * 20 * MS
        a.message(queue, f"m{k}", now[0])
    while queue.queued:
        loop.elapse()
        loop.turn()
    assert len(a.measured) == 50
    now[0] += int(idle_s * 1e9)
    assert fresh_state(queue) == fresh
    loop.turn()
    loop.elapse()
    assert fresh_state(queue) == fresh
