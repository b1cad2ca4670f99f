"""A call's queued messages measured in one call (voxproxy/core/session/batch.py): the same
receipt as measuring them one by one; shedding, the budget and the audio it reports."""

from __future__ import annotations

import random
from collections import deque

from support.scripted import ScriptedCall
from support.spacekit import SpaceCase, random_case, render_case

from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.events import Audio, ToolEvent
from voxproxy.core.receipt import CloseInfo, Receipt
from voxproxy.core.session import CallSession
from voxproxy.core.session.batch import Item, measure

MS = 1_000_000


def _session(dialect: str) -> CallSession:
    return CallSession(
        make_decoder(dialect, DialectOptions(secret=b"batch")), 0, secret=b"batch", link_id="batch"
    )


def _close(session: CallSession, call: ScriptedCall) -> Receipt:
    return session.close(call.end_ns, "completed", CloseInfo(initiator="caller"))


def _items(call: ScriptedCall) -> list[Item]:
    """The call's messages, with a tool event from the event API among them."""
    items: list[Item] = [(d, p, t, t) for t, d, p in call.messages]  # queued as they came
    at = len(items) // 2
    t_ns = items[at][2]
    event = ToolEvent("tool.started", t_ns, operation_id="op", tool="t")
    items.insert(at, (None, event, t_ns, t_ns))
    return items


def _one_by_one(call: ScriptedCall, dialect: str, items: list[Item]) -> Receipt:
    session = _session(dialect)
    for d, p, t, _queued in items:
        if d is None:
            session.on_event(p)  # type: ignore[arg-type]
        else:
            session.on_message(d, p, t)  # type: ignore[arg-type]
    return _close(session, call)


def test_a_batch_gives_the_receipt_of_one_message_at_a_time() -> None:
    rng = random.Random(20261202)
    cases: list[SpaceCase] = [random_case(rng) for _ in range(6)]
    for case in cases:
        call, dialect = render_case(case)
        items = _items(call)
        expected = _one_by_one(call, dialect, items)
        session = _session(dialect)
        queued = deque(items)
        visits = 0
        named = False
        while queued:
            done = measure(session, queued, 8, lambda: 0, 1, -(1 << 62))
            assert done.shed == 0
            visits += 1
            named = named or done.named_by is not None
        # 8 a visit (the clock never reaches the stop), but for the visit that ended at the
        # message that named the call, on a wire that names calls.
        assert named == (expected.call_id_source == "wire"), case
        least = -(-len(items) // 8)
        assert least <= visits <= least + named
        got = _close(session, call)
        assert got.model_dump() == expected.model_dump(), case
        assert any(t.ttfs_ms is not None for t in got.turns)  # figures were made
        assert [e.kind for e in got.events] == ["tool.started"]


def _carries_audio(dialect: str, item: Item) -> bool:
    d, p, t, _queued = item
    return any(
        type(ev) is Audio
        for ev in make_decoder(dialect, DialectOptions(secret=b"batch")).decode(d, p, t)
    )  # type: ignore[arg-type]


def test_the_budget_stops_a_batch_and_late_messages_are_shed() -> None:
    case = random_case(random.Random(7))
    call, dialect = render_case(case)
    items: list[Item] = [(d, p, t, t) for t, d, p in call.messages]  # queued as they came
    session = _session(dialect)
    queued: deque[Item] = deque(items)
    cpu = [0]

    def cpu_ns() -> int:
        cpu[0] += 1
        return cpu[0]

    # The CPU clock reaches the stop after the third item: three are measured.
    done = measure(session, queued, 8, cpu_ns, 3, -(1 << 62))
    shed, last_audio = done.shed, done.last_audio_ns
    assert len(queued) == len(items) - 3 and shed == 0
    audio = [it[2] for it in items[:3] if _carries_audio(dialect, it)]
    assert last_audio == (audio[-1] if audio else -1)
    # Messages queued before shed_before are shed: counted, their audio not analysed.
    cut = queued[4][2]
    done = measure(session, queued, 8, lambda: 0, 1, cut)
    shed, last_audio = done.shed, done.last_audio_ns
    assert len(queued) == len(items) - 11
    assert shed == sum(1 for it in items[3:11] if it[2] < cut) and shed >= 1
    audio = [it[2] for it in items[3:11] if _carries_audio(dialect, it)]
    assert audio and last_audio == audio[-1]
    assert session.anomalies["measurement_shed"] == sum(
        1 for it in items[3:11] if it[2] < cut and _carries_audio(dialect, it)
    )


def test_a_message_is_shed_for_its_wait_in_the_queue_not_for_its_age() -> None:
    """A message the loop read late (it arrived long before, kept in the socket while the
    loop waited for a core) but queued just now is measured: its kernel arrival time
    keeps its figures exact, and measurement is not behind."""
    case = random_case(random.Random(11))
    call, dialect = render_case(case)
    now = call.messages[-1][0] + 10**9
    items: list[Item] = [(d, p, t, now) for t, d, p in call.messages]  # all queued now
    session = _session(dialect)
    queued: deque[Item] = deque(items)
    while queued:
        assert measure(session, queued, 64, lambda: 0, 1, now - 500 * 10**6).shed == 0
    assert "measurement_shed" not in session.anomalies
    assert any(t.ttfs_ms is not None for t in _close(session, call).turns)


def test_a_batch_stops_at_the_message_that_names_the_call_and_says_which() -> None:
    """The shell registers the call under its wire ids (for the event API) before the
    call's next items are measured: the batch hands back the message that named it."""
    from voxproxy.core.dialects.twilio import TwilioCallerWire
    from voxproxy.core.events import CALLER_TO_AGENT

    sid = "CA" + "5" * 32
    wire = TwilioCallerWire("MZ" + "5" * 32, sid)
    start = wire.start()
    items: deque[Item] = deque()
    for k, payload in enumerate([wire.connected(), start, wire.media(b"\xff" * 160)]):
        items.append((CALLER_TO_AGENT, payload, k * 20_000_000, k * 20_000_000))
    session = _session("twilio")
    done = measure(session, items, 8, lambda: 0, 1, -(1 << 62))
    assert done.named_by == start and len(items) == 1  # stopped right after it
    assert session.wire_call_id_hash is not None
    done = measure(session, items, 8, lambda: 0, 1, -(1 << 62))
    assert done.named_by is None and not items  # named once
