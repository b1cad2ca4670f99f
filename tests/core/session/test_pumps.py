"""Many calls' pumps finished together (voxproxy/core/session/pumps.py), through the proxy's
measurement queue: every call's receipt is the one it gets measured alone."""

from __future__ import annotations

import heapq
import random
import sys
from collections.abc import Callable

import numpy as np
import pytest
from support.queued import QueuedSession
from support.spacekit import random_case, render_case

from voxproxy.core.analysis.vad import SpeechDetector
from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.receipt import CloseInfo, Receipt
from voxproxy.core.session import CallSession
from voxproxy.core.session.pumps import PumpGroup, WaitingPump
from voxproxy.proxy.measuring import Item, MeasurementQueue

MS = 1_000_000


def _calls(seed: int, n: int) -> list[tuple[list[Item], int, int, str]]:
    """``n`` calls of the space (wires, rates, voices, barge-ins, noise), each started at
    its own time within the first 2 s: (items, start, end, dialect)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        call, dialect = render_case(random_case(rng))
        off = rng.randrange(0, 2000) * MS + rng.randrange(0, MS)
        items: list[Item] = [(d, p, t + off) for t, d, p in call.messages]
        out.append((items, off, call.end_ns + off, dialect))
    return out


def _session(start: int, dialect: str) -> CallSession:
    return CallSession(
        make_decoder(dialect, DialectOptions(secret=b"pumps")),
        start,
        secret=b"pumps",
        link_id="pumps",
    )


def _close(session: CallSession, end: int) -> Receipt:
    return session.close(end, "completed", CloseInfo(initiator="caller"))


def _alone(calls: list[tuple[list[Item], int, int, str]]) -> list[Receipt]:
    out = []
    for items, start, end, dialect in calls:
        session = _session(start, dialect)
        for d, p, t in items:
            session.on_message(d, p, t)  # type: ignore[arg-type]
        out.append(_close(session, end))
    return out


def _free_queue(soon: list[Callable[[], None]], max_backlog: int) -> MeasurementQueue:
    """A grouped queue whose clocks never move (no budget is ever spent, nothing is
    shed); its turns are appended to ``soon``, for the test to run."""
    return MeasurementQueue(
        group_ms=50.0,
        budget_ms=0.25,
        max_budget_ms=1.0,
        shed_after_ms=1e9,
        max_backlog=max_backlog,
        cpu_ns=lambda: 0,
        loop_cpu_ns=lambda: 0,
        now_ns=lambda: 0,
        call_soon=soon.append,
        call_later=lambda _s, fn: soon.append(fn),
    )


def _grouped(
    calls: list[tuple[list[Item], int, int, str]], cost: int
) -> tuple[list[Receipt], PumpGroup, int]:
    """Every call's messages queued as they arrive and measured in the queue's group
    turns every 50 ms; ``cost``: fake CPU a clock reading advances (0: no budget is ever
    spent; else turns stop at the budget and the rest waits for the next turn)."""
    cpu = [0]

    def cpu_ns() -> int:
        cpu[0] += cost
        return cpu[0]

    later: list[Callable[[], None]] = []
    soon: list[Callable[[], None]] = []
    now = [0]
    queue = MeasurementQueue(
        group_ms=50.0,
        budget_ms=0.25,
        max_budget_ms=1.0,
        shed_after_ms=1e9,  # nothing is shed: the figures must be the ones alone
        max_backlog=1 << 30,
        cpu_ns=cpu_ns,
        loop_cpu_ns=lambda: cpu[0],
        now_ns=lambda: now[0],
        call_soon=soon.append,
        call_later=lambda _s, fn: later.append(fn),
    )
    sessions = [_session(start, dialect) for _, start, _, dialect in calls]
    wrapped = [QueuedSession(s) for s in sessions]
    for s in sessions:
        s.pumps = queue.pumps
    arrivals = heapq.merge(
        *[[(t, i, (d, p, t)) for d, p, t in items] for i, (items, _, _, _) in enumerate(calls)]
    )
    turns = 0
    next_turn = 50 * MS
    for t, i, item in arrivals:
        while t >= next_turn:  # the loop's turns due before this message
            now[0] = next_turn
            todo = later + soon
            later.clear()
            soon.clear()
            for fn in todo:
                fn()
            turns += 1
            next_turn += 50 * MS
        now[0] = t
        queue.defer(wrapped[i], item)
    queue.drain()
    ends = [end for _, _, end, _ in calls]
    return [_close(s, end) for s, end in zip(sessions, ends, strict=True)], queue.pumps, turns


@pytest.mark.parametrize("cost", [0, 20_000])
@pytest.mark.parametrize("seed", [1, 2])
def test_pumps_finished_together_give_every_call_its_own_receipt(seed: int, cost: int) -> None:
    calls = _calls(seed, 8)
    alone = _alone(calls)
    grouped, pumps, turns = _grouped(calls, cost)
    # The group's pass did the work: many passes (the calls overlap for part of their
    # time, on wires of different rates), each finishing two calls' pumps or more.
    assert turns > 500
    assert pumps.passes >= 50
    assert pumps.pumps >= 2 * pumps.passes
    for got, want in zip(grouped, alone, strict=True):
        assert got.model_dump() == want.model_dump()
    assert sum(t.ttfs_ms is not None for r in alone for t in r.turns) >= 8  # figures made


def _waiting(start: int, dialect: str) -> CallSession:
    """A session whose group is open and never runs: every pump waits for the call's
    next input (or its close)."""
    session = _session(start, dialect)
    group = PumpGroup()
    group.open = True
    session.pumps = group
    return session


def test_a_call_given_input_while_its_pump_waits_finishes_it_alone_first() -> None:
    (items, start, end, dialect), *_ = _calls(3, 1)
    session = _waiting(start, dialect)
    waited = []
    for k, (d, p, t) in enumerate(items):
        session.on_message(d, p, t)  # type: ignore[arg-type]
        if session.pump_due:
            waited.append(k)
    assert len(waited) > 50
    assert (
        _close(session, end).model_dump() == _alone([(items, start, end, dialect)])[0].model_dump()
    )
    # Cut after a message that left a pump waiting: close() finishes it first.
    cut = items[: waited[len(waited) // 2] + 1]
    session = _waiting(start, dialect)
    for d, p, t in cut:
        session.on_message(d, p, t)  # type: ignore[arg-type]
    assert session.pump_due
    assert _close(session, end).model_dump() == _alone([(cut, start, end, dialect)])[0].model_dump()


@pytest.mark.parametrize("seed", [4, 5])
def test_a_pump_due_on_a_calls_last_queued_item_is_passed_in_the_same_turn(seed: int) -> None:
    # One call, one message queued per turn: every pump falls due on the last item the
    # call has queued. The turn still passes it (the call waits parked, with nothing
    # queued), so the group never holds a session past a turn, and a session nothing else
    # refers to is freed at once (the proxy's calls are).
    (items, start, end, dialect), *_ = _calls(seed, 1)
    soon: list[Callable[[], None]] = []
    queue = _free_queue(soon, max_backlog=1 << 30)
    session = _session(start, dialect)
    session.pumps = queue.pumps
    call = QueuedSession(session)
    fell_due = 0
    for item in items:
        queue.defer(call, item)
        while soon:
            soon.pop(0)()
        fell_due += session._due is not None
        assert len(queue.pumps) == 0
        assert call.backlog is None  # drained: nothing waits for a later turn
    assert queue.pumps.passes == 0  # (one call: each pass finished one pump)
    assert fell_due > 50  # pumps the group made the energies of, waiting for input
    got = _close(session, end)
    assert got.model_dump() == _alone([(items, start, end, dialect)])[0].model_dump()
    del call
    # Held by this function's name and getrefcount's argument: nothing else.
    assert sys.getrefcount(session) == 2


def test_a_pass_that_fails_leaves_each_pump_to_its_call() -> None:
    # Batches that are not whole frames: the pass cannot make their energies. Each pump
    # still leaves the group passed (its call, parked for it, goes on and finishes the
    # pump alone), and a pump finished alone meanwhile is skipped.
    det = SpeechDetector(8000)
    odd = np.zeros(7, dtype=np.int16)
    failed = WaitingPump(0, odd, odd, det)
    done = WaitingPump(0, odd, odd, det)
    done.finished = True
    group = PumpGroup()
    group.add(failed)
    group.add(done)
    group.run()
    assert len(group) == 0
    assert failed.passed and failed.energies is None
    assert done.passed and done.energies is None
    assert (group.passes, group.pumps) == (0, 0)
    # Whole frames: the same pass makes them.
    whole = np.zeros(det._frame * 5, dtype=np.int16)
    good = WaitingPump(0, whole, whole, det)
    group.add(good)
    group.run()
    assert good.passed and good.energies is not None


def test_a_call_given_up_through_the_queue_keeps_its_traffic_and_counts_what_it_shed() -> None:
    # More queued than max_backlog: the call stops measuring (the proxy's own call does
    # the same: proxy.measuring.give_up_measuring). Its traffic is all counted, the
    # messages dropped from its queue counted as shed, and later ones only counted.
    (items, start, end, dialect), *_ = _calls(7, 1)
    assert len(items) > 120
    soon: list[Callable[[], None]] = []
    queue = _free_queue(soon, max_backlog=100)
    session = _session(start, dialect)
    session.pumps = queue.pumps
    call = QueuedSession(session)
    for item in items[:120]:  # no turn of the loop runs: they queue
        queue.defer(call, item)
    assert session.measurement_disabled
    assert call.backlog is not None and len(call.backlog) == 19  # (queued after giving up)
    for item in items[120:]:
        queue.defer(call, item)
    queue.drain()
    got = _close(session, end)
    # Each time 101 are queued (no turn runs) the backlog is given up, counted as shed.
    assert got.anomalies.get("measurement_shed") == 101 * (len(items) // 101)
    alone = _alone([(items, start, end, dialect)])[0]
    for field in ("messages", "bytes"):  # every message counted, each way
        for way in ("caller_to_agent", "agent_to_caller"):
            name = f"{way}_{field}"
            assert getattr(got.traffic, name) == getattr(alone.traffic, name) > 0
    assert got.turns == [] and alone.turns
