"""Forwarding first under overload, over loopback.

* Measurement queued past its budget (``MeasurementQueue``): every message is still
  forwarded unchanged, in order, before any of it is measured; measured later, with its
  arrival times, it gives the figures measuring at once gives.
* Measurement shed: the shed messages are counted in the receipt, and no figure is
  published from near them.
* Admission on event-loop lag: a caller is refused with 503 and ``Retry-After`` while
  the (injected) lag of the last second exceeds ``max_loop_lag_ms``, and let in again
  once it has passed (a fake clock; no sleeps measured, no timed assertions).
"""

from __future__ import annotations

import shutil
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from support.faultkit import SECRET, call_hash, call_sid, healthy_call, router_agent
from support.groundtruth import beyond_lag
from support.livecall import publishing_config
from support.waiting import wait_until
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import InvalidStatus

from voxproxy.cli import build_parser
from voxproxy.clips import clip
from voxproxy.clock import LagMonitor
from voxproxy.commands.proxy import _proxy_config
from voxproxy.core.dialects.twilio import TwilioCallerWire
from voxproxy.core.events import CALLER_TO_AGENT
from voxproxy.core.receipt import Receipt
from voxproxy.core.timebase import NS_PER_MS
from voxproxy.loadgen.caller import CallerConfig, CallRecord, Say, ScriptedCaller, WaitAgentEnd
from voxproxy.loadgen.truth import turn_truths
from voxproxy.mockagent import CallLog, MockAgent, MockAgentConfig
from voxproxy.proxy.lifecycle import loop_lag_over
from voxproxy.proxy.measuring import MeasurementQueue, Queued
from voxproxy.proxy.websocket import FIRST_MESSAGES_AT_ONCE, CallContext, Proxy, ProxyConfig
from voxproxy.receipts.journal import CallJournal
from voxproxy.transports.websocket import RelayConfig

STEPS = [
    Say(clip("caller_where_is_order")),
    WaitAgentEnd(quiet_ms=400),
    Say(clip("caller_yes")),
    WaitAgentEnd(quiet_ms=400),
]

# A Twilio caller's first two messages (connected, start), measured as they come (the
# wire names the call): no budget holds them (proxy/measuring.py, ``urgent``).
NAMING_MESSAGES = 2

# Two short answers (1.5 s and 2.8 s instead of the default 4.8 s and 5.5 s), where their
# length plays no part in what is checked.
SHORT_ANSWERS = ("agent_reprompt", "agent_confirm")


async def call_through(
    queue: MeasurementQueue,
    after_call: Callable[[list[CallContext], list[Receipt]], None] | None = None,
    responses: tuple[str, ...] | None = None,
) -> tuple[Receipt, CallRecord, CallLog, list[CallContext]]:
    agent = MockAgent(
        MockAgentConfig(
            dialect="twilio", send_mode="paced", delay_ms=700.0, seed=3, responses=responses
        )
    )
    await agent.start()
    receipts: list[Receipt] = []
    proxy = Proxy(
        publishing_config(agent.url, "twilio", b"overload"),
        sinks=[receipts.append],
    )
    proxy.measuring = queue
    contexts: list[CallContext] = []
    make = proxy.server.observer_factory

    def observer(t_ns: int) -> CallContext:
        ctx = make(t_ns)
        contexts.append(ctx)  # type: ignore[arg-type]
        return ctx  # type: ignore[return-value]

    proxy.server.observer_factory = observer
    port = await proxy.start("127.0.0.1", 0)
    caller = ScriptedCaller(
        CallerConfig(url=f"ws://127.0.0.1:{port}/o", dialect="twilio", call_id="CA" + "7" * 32),
        STEPS,
    )
    record = await caller.run()
    await wait_until(lambda: proxy.active == 0, what="the call over at the proxy")
    if after_call is not None:
        after_call(contexts, receipts)
    await wait_until(lambda: receipts, what="the receipt")
    await proxy.stop()
    await agent.stop()
    assert record.error is None, record.error
    assert len(receipts) == 1
    return receipts[0], record, agent.calls[0], contexts


def texts(messages: list[tuple[bool, bytes | str]]) -> list[bytes | str]:
    return [m for _is_text, m in messages]


@pytest.mark.slow
async def test_queued_measurement_forwards_everything_and_gives_the_same_figures() -> None:
    # Nothing measured at once but the call's two first messages (connected, start: until
    # its wire names it, measured as they come, whatever the budget): the rest all queued.
    queue = MeasurementQueue(budget_ms=0.0, share=0.0)
    receipt, record, log, _ = await call_through(queue, responses=SHORT_ANSWERS)
    assert texts(log.caller_messages) == record.messages_sent
    assert texts(log.sent_messages) == record.messages_received
    messages = receipt.traffic.caller_to_agent_messages + receipt.traffic.agent_to_caller_messages
    assert queue.deferred == messages - NAMING_MESSAGES and queue.shed == 0
    assert receipt.anomalies == {}
    truths = turn_truths(record, log)
    responses = [t for t in receipt.turns if t.kind == "response"]
    assert len(responses) == len(truths) == 2
    errors = []
    for truth, turn in zip(truths, responses, strict=True):
        assert turn.ttfs_ms is not None and truth.ttfs_ns is not None, turn
        errors.append(
            beyond_lag(turn.ttfs_ms - truth.ttfs_ns / NS_PER_MS, turn.ttfs_uncertainty_ms)
        )
    # The live bounds of tests/proxy/test_websocket.py: real scheduling jitter on both legs.
    assert float(np.abs(np.array(errors)).max()) <= 60.0


@pytest.mark.slow
async def test_a_call_whose_measurement_falls_too_far_behind_is_given_up_and_still_forwarded() -> (
    None
):
    # Measured once a second, at most 20 messages queued a call: the call's
    # measurement is given up (proxy.measuring.give_up_measuring), the call is not.
    queue = MeasurementQueue(group_ms=1000.0, budget_ms=0.0, share=0.0, max_backlog=20)
    receipt, record, log, _ = await call_through(queue, responses=SHORT_ANSWERS)
    assert texts(log.caller_messages) == record.messages_sent
    assert texts(log.sent_messages) == record.messages_received
    # Given up once: what comes after is counted at once, never queued again (a call that
    # gave up for a flood queued the flood again, and again; and its wait made the whole
    # proxy look behind to admission).
    assert queue.given_up == 1
    assert receipt.measurement_disabled and receipt.turns == []
    assert receipt.anomalies.get("measurement_shed", 0) == 21  # the backlog given up on
    traffic = receipt.traffic
    assert traffic.caller_to_agent_messages == len(record.messages_sent)
    assert traffic.agent_to_caller_messages == len(record.messages_received)


@pytest.mark.slow
async def test_shed_measurement_never_holds_a_forwarded_message() -> None:
    turns: list[Callable[[], None]] = []  # the loop's turns for measurement: run by hand
    now = [0]
    queue = MeasurementQueue(
        budget_ms=0.0,
        share=0.0,
        shed_after_ms=0.0,
        call_soon=turns.append,
        now_ns=lambda: now[0] or time.monotonic_ns(),  # the real clock while the call runs
    )
    shed_until = [0]
    pending_at_end: list[int] = []

    def measure_late(contexts: list[CallContext], receipts: list[Receipt]) -> None:
        # The call is over, all of it forwarded, and nothing of it measured yet but the
        # messages that named it.
        assert not receipts
        pending_at_end.append(queue.queued)
        (ctx,) = contexts
        assert ctx.backlog is not None
        times = [item[3] for item in ctx.backlog]  # when each was queued
        # Shed what was queued in the call's first 40%; measure the rest.
        shed_until[0] = now[0] = times[0] + (times[-1] - times[0]) * 4 // 10
        while turns:
            turns.pop(0)()

    receipt, record, log, contexts = await call_through(queue, measure_late)
    assert texts(log.caller_messages) == record.messages_sent
    assert texts(log.sent_messages) == record.messages_received
    traffic = receipt.traffic
    messages = traffic.caller_to_agent_messages + traffic.agent_to_caller_messages
    assert pending_at_end == [messages - NAMING_MESSAGES]
    media = [m for m in (*record.messages_sent, *record.messages_received) if '"media"' in str(m)]
    assert 0 < receipt.anomalies["measurement_shed"] < len(media)
    assert queue.shed > 0
    # No figure is published within 2 s of the shed audio.
    session = contexts[0].session
    limit = shed_until[0] + 2_000 * NS_PER_MS
    for turn, rec in zip(session.final_turns, receipt.turns, strict=True):
        edges = [turn.caller_onset_ns, turn.caller_offset_ns, turn.agent_onset_ns]
        if any(e is not None and e < limit for e in edges):
            assert rec.ttfs_ms is None, rec
    assert any(t.reason == "measurement_shed" for t in receipt.turns), receipt.turns


async def test_calls_that_end_with_measurement_queued_get_their_receipts_at_stop() -> None:
    turns: list[Callable[[], None]] = []  # the loop's turns for measurement: never run
    queue = MeasurementQueue(budget_ms=0.0, share=0.0, call_soon=turns.append)
    async with router_agent() as agent:
        receipts: list[Receipt] = []
        proxy = Proxy(
            ProxyConfig(RelayConfig(agent.url), dialect="twilio", secret=b"stop"),
            sinks=[receipts.append],
        )
        proxy.measuring = queue
        port = await proxy.start("127.0.0.1", 0)
        call = await healthy_call(port, "queued", frames=5)
        await wait_until(lambda: proxy.active == 0, what="the call over at the proxy")
        assert not receipts and queue.queued > 0
        await proxy.stop()
    assert len(receipts) == 1 and queue.queued == 0
    assert receipts[0].traffic.caller_audio_ms == 20.0 * len(call.sent)  # all of it measured
    assert receipts[0].traffic.agent_to_caller_messages == len(call.echoed)
    assert receipts[0].terminal == "completed"


def _measurement_never_runs() -> MeasurementQueue:
    """A queue with no budget whose turns on the loop never come: every message that
    must wait for measurement stays queued."""
    turns: list[Callable[[], None]] = []
    return MeasurementQueue(
        budget_ms=0.0,
        share=0.0,
        call_soon=turns.append,
        call_later=lambda _s, fn: turns.append(fn),
    )


async def test_a_call_that_ends_with_measurement_queued_is_journalled_by_its_wire_id(
    tmp_path: Path,
) -> None:
    """Measurement far behind (no budget left, its turns never come): a call runs to its
    end, its caller sees every echo and the close, and its receipt is still owed. A
    proxy killed now leaves its journal as it is: the receipt written from it at the
    next start must carry the call's id from the wire (the start message was forwarded
    before the caller saw anything), not one of the proxy's, which nobody could match to
    the call. (A flake of tests/commands/test_proxy_shutdown.py's SIGKILL under load.)"""
    queue = _measurement_never_runs()
    journal = CallJournal.beside(tmp_path / "receipts.jsonl")
    journal.open()
    async with router_agent() as agent:
        proxy = Proxy(
            ProxyConfig(
                RelayConfig(agent.url), dialect="twilio", secret=SECRET, max_loop_lag_ms=None
            ),
            sinks=[],
        )
        proxy.measuring = queue
        proxy.journal = journal
        port = await proxy.start("127.0.0.1", 0)
        try:
            call = await healthy_call(port, "owed", frames=3)
            await wait_until(lambda: proxy.active == 0, what="the call over at the proxy")
            assert len(call.echoed) == 3 and call.close_code == 1000  # finished, for its caller
            assert queue.queued > 0  # measurement is behind: the receipt is still owed
            left_by_kill = tmp_path / "left.open-calls"
            shutil.copyfile(journal.path, left_by_kill)
        finally:
            await proxy.stop()
            journal.close()
    [entry] = CallJournal(left_by_kill).open()
    assert entry["call"] == call_hash(call.sid) and entry["call_id_source"] == "wire"


async def test_only_a_call_s_first_few_messages_skip_the_measurement_budget() -> None:
    """A wire that names no call in its first :data:`FIRST_MESSAGES_AT_ONCE` messages (a
    hostile one) buys no more measurement past the budget: its later messages, and its
    start, wait in the queue like any other."""
    queue = _measurement_never_runs()
    got: list[str | bytes] = []

    async def keep(ws: ServerConnection) -> None:
        async for m in ws:
            got.append(m)

    sid = call_sid("chatty")
    wire = TwilioCallerWire("MZ" + sid[2:], sid)
    async with router_agent(keep=keep) as agent:
        proxy = Proxy(
            ProxyConfig(
                RelayConfig(agent.url), dialect="twilio", secret=SECRET, max_loop_lag_ms=None
            ),
            sinks=[],
        )
        proxy.measuring = queue
        port = await proxy.start("127.0.0.1", 0)
        try:
            async with connect(f"ws://127.0.0.1:{port}/keep/x") as ws:
                for _ in range(FIRST_MESSAGES_AT_ONCE + 2):
                    await ws.send(wire.connected())
                await ws.send(wire.start())
                await wait_until(lambda: len(got) == FIRST_MESSAGES_AT_ONCE + 3, what="forwarded")
                assert queue.queued == 3  # two of the chatter, and the start
                assert proxy.live.find(sid) is None  # not named yet
        finally:
            await proxy.stop()


# -- admission on event-loop lag --------------------------------------------------------------


class FakeClock:
    """Monotonic nanoseconds that move only when told to."""

    def __init__(self, start_ns: int) -> None:
        self._t_ns = start_ns

    def now_ns(self) -> int:
        return self._t_ns

    def advance_ms(self, ms: float) -> None:
        self._t_ns += round(ms * NS_PER_MS)


async def test_a_lagging_loop_refuses_new_callers_with_503_and_admits_again_after() -> None:
    clock = FakeClock(10**12)
    async with router_agent() as agent:
        proxy = Proxy(
            ProxyConfig(
                RelayConfig(agent.url), dialect="twilio", secret=b"lag", max_loop_lag_ms=50.0
            )
        )
        proxy.clock_lag = LagMonitor(period_s=3600.0, clock=clock.now_ns)
        port = await proxy.start("127.0.0.1", 0)
        try:
            assert (await healthy_call(port, "before", frames=3)).close_code == 1000
            for _ in range(3):  # the loop ran 80 ms late, reading after reading
                proxy.clock_lag.record(clock.now_ns(), 80 * NS_PER_MS)
                clock.advance_ms(100)
            proxy.clock_lag.record(clock.now_ns(), 2 * NS_PER_MS)  # (one reading in time)
            with pytest.raises(InvalidStatus) as info:
                async with connect(f"ws://127.0.0.1:{port}/echo/lagged"):
                    pass
            response = info.value.response
            assert response.status_code == 503
            assert response.headers["Retry-After"] == "1"
            assert b"overloaded (event loop lag 80 ms)" in response.body
            assert proxy.server.admission.refused_overloaded == 1
            clock.advance_ms(400)  # still within the last second
            with pytest.raises(InvalidStatus):
                async with connect(f"ws://127.0.0.1:{port}/echo/lagged"):
                    pass
            clock.advance_ms(600)  # the lag is more than a second old
            assert (await healthy_call(port, "after", frames=3)).close_code == 1000
            assert proxy.refused_calls == 2
        finally:
            await proxy.stop()


class _Waiting:
    """A call whose one queued item waits: what the queue measures of it is dropped."""

    def __init__(self) -> None:
        self.backlog: deque[Queued] | None = None
        self.pump_due = False

    def measure_queued(self, limit: int, cpu_ns: object, stop_at: int, shed_before: int) -> int:
        assert self.backlog is not None
        self.backlog.clear()
        return 0

    def backlog_drained(self) -> None:
        pass

    def give_up(self) -> None:
        pass


async def test_measurement_far_behind_refuses_new_callers_before_it_sheds() -> None:
    clock = FakeClock(10**12)
    async with router_agent() as agent:
        proxy = Proxy(ProxyConfig(RelayConfig(agent.url), dialect="twilio", secret=b"behind"))
        proxy.clock_lag = LagMonitor(period_s=3600.0, clock=clock.now_ns)
        # The queue's turns run only when the test says (drain): what is queued waits.
        turns: list[Callable[[], None]] = []
        queue = MeasurementQueue(
            now_ns=clock.now_ns,
            lagging=proxy._lagging,
            call_soon=turns.append,
            call_later=lambda _delay, fn: turns.append(fn),
        )
        proxy.measuring = queue
        waiting = _Waiting()

        def behind(ms: float) -> None:
            """Everything measured; then an item queued now waits ``ms``."""
            queue.drain()
            queue.defer(waiting, (CALLER_TO_AGENT, b"", clock.now_ns()))
            clock.advance_ms(ms)

        port = await proxy.start("127.0.0.1", 0)
        try:
            behind(350)
            assert queue.behind_ns == 350 * NS_PER_MS
            assert not queue.shedding  # 350 ms: nothing shed yet
            with pytest.raises(InvalidStatus) as info:
                async with connect(f"ws://127.0.0.1:{port}/echo/behind"):
                    pass
            assert info.value.response.status_code == 503
            assert b"overloaded (measurement 350 ms behind)" in info.value.response.body
            behind(250)  # a burst's wait
            assert (await healthy_call(port, "burst", frames=3)).close_code == 1000
            behind(20)  # caught up
            assert (await healthy_call(port, "after", frames=3)).close_code == 1000
            assert proxy.refused_calls == 1
            queue.drain()
        finally:
            await proxy.stop()


def test_measurement_yields_while_the_loop_runs_late() -> None:
    clock = FakeClock(10**12)
    proxy = Proxy(ProxyConfig(RelayConfig("ws://127.0.0.1:1"), dialect="twilio", secret=b"y"))
    proxy.clock_lag = LagMonitor(period_s=0.02, clock=clock.now_ns)
    proxy.clock_lag.record(clock.now_ns(), 1 * NS_PER_MS)
    assert not proxy._lagging()
    proxy.clock_lag.record(clock.now_ns(), 8 * NS_PER_MS)  # over YIELD_LAG_MS
    assert proxy._lagging()
    proxy.clock_lag.record(clock.now_ns(), 0)
    clock.advance_ms(40)  # the next reading is 20 ms overdue: the loop has not come round
    assert proxy._lagging()


def test_one_late_reading_is_a_moment_not_a_load() -> None:
    """Admission on the loop's lag takes the median of the last second's readings, of at
    least three of them unless they fill half the second: one late reading (just after the
    proxy started, a collection of the garbage collector) refuses nobody."""
    clock = FakeClock(10**12)
    lag = LagMonitor(period_s=0.02, clock=clock.now_ns)
    assert loop_lag_over(lag, 50.0) is None  # no reading at all
    lag.record(clock.now_ns(), 238 * NS_PER_MS)  # the first reading after start: late
    clock.advance_ms(20)
    assert loop_lag_over(lag, 50.0) is None
    lag.record(clock.now_ns(), 240 * NS_PER_MS)  # two: still under half the second
    clock.advance_ms(20)
    assert loop_lag_over(lag, 50.0) is None
    lag.record(clock.now_ns(), 90 * NS_PER_MS)  # three readings: their median counts
    assert loop_lag_over(lag, 50.0) == "event loop lag 238 ms"
    assert loop_lag_over(lag, 250.0) is None
    clock.advance_ms(2000)  # all of them more than a second old
    assert loop_lag_over(lag, 50.0) is None
    # A loop so late it took only two readings in the second (each 300 ms late): refused.
    lag.record(clock.now_ns(), 300 * NS_PER_MS)
    clock.advance_ms(300)
    lag.record(clock.now_ns(), 300 * NS_PER_MS)
    assert loop_lag_over(lag, 50.0) == "event loop lag 300 ms"


@pytest.mark.parametrize(
    ("cpu_ms_a_reading", "refused"),
    [(18, True), (12, True), (4, False), (0, False)],  # of each 20 ms between readings
)
def test_a_lag_counts_only_while_the_loop_s_thread_does_the_work(
    cpu_ms_a_reading: int, refused: bool
) -> None:
    """A loop that lags while its own thread works (90% or 60% of a core) is the proxy's
    own load: refused. One that lags while its thread mostly waited (20%, 0%) was kept
    waiting by other work on the machine (two CPU-bound jobs beside it, say): refusing
    its callers gives it no core back, so they are admitted."""
    clock, cpu = FakeClock(10**12), [0]
    lag = LagMonitor(period_s=0.02, clock=clock.now_ns)
    for _ in range(10):
        clock.advance_ms(20)
        cpu[0] += cpu_ms_a_reading * NS_PER_MS
        lag.record(clock.now_ns(), 120 * NS_PER_MS, cpu[0])
    assert lag.cpu_share(1_000 * NS_PER_MS) == pytest.approx(cpu_ms_a_reading / 20)
    why = loop_lag_over(lag, 100.0)
    assert (why == "event loop lag 120 ms") if refused else (why is None)


async def test_a_small_lag_or_no_bound_admits() -> None:
    clock = FakeClock(10**12)
    async with router_agent() as agent:
        for bound, lag_ms in ((50.0, 20), (None, 500)):
            proxy = Proxy(
                ProxyConfig(
                    RelayConfig(agent.url), dialect="twilio", secret=b"lag", max_loop_lag_ms=bound
                )
            )
            proxy.clock_lag = LagMonitor(period_s=3600.0, clock=clock.now_ns)
            port = await proxy.start("127.0.0.1", 0)
            try:
                proxy.clock_lag.record(clock.now_ns(), lag_ms * NS_PER_MS)
                assert (await healthy_call(port, f"ok{lag_ms}", frames=3)).close_code == 1000
                assert proxy.refused_calls == 0
            finally:
                await proxy.stop()


def test_the_lag_bound_flag_and_its_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    base = ["proxy", "--upstream", "ws://127.0.0.1:1"]
    assert _proxy_config(build_parser().parse_args(base)).max_loop_lag_ms == 100.0
    off = [*base, "--max-loop-lag-ms", "0"]
    assert _proxy_config(build_parser().parse_args(off)).max_loop_lag_ms is None
    monkeypatch.setenv("VOXPROXY_PROXY_MAX_LOOP_LAG_MS", "40")
    assert _proxy_config(build_parser().parse_args(base)).max_loop_lag_ms == 40.0
    with pytest.raises(SystemExit):
        build_parser().parse_args([*base, "--max-loop-lag-ms", "-1"])
