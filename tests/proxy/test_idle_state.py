"""After a call ends and the proxy is idle, its state equals a fresh proxy's.

A day of calls, not one call: generated sequences of calls (paced and bursty wires,
OpenAI Realtime among them, raw bursts up to 50x real time, measurement cheap or far
over its budget so that it queues and sheds, calls cut short, every terminal) with idle
gaps from 0 to 30 s, on a fake clock and a fake loop, through the proxy's own call
observers and measurement queue. After the last call and its gap, whatever gates a new
call (admission, the measurement queue, the live calls, the lag monitor) reads as it
does on a proxy that never took a call; and every call got exactly one receipt.

The sticky 503 of 8235969 broke exactly this: the queue remembered the arrival of the
last item it measured, and after half a second idle it called itself "shedding".
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st
from support.scripted import CallPlan, ScriptedCall, TurnPlan, WirePlan, render

from voxproxy.clips import clip
from voxproxy.clock import LagMonitor
from voxproxy.core.receipt import Receipt
from voxproxy.proxy.measuring import MeasurementQueue
from voxproxy.proxy.websocket import CallContext, Proxy, ProxyConfig
from voxproxy.transports.ends import NOT_A_CALL, EndCause
from voxproxy.transports.websocket import EndInfo, RelayConfig

MS = 1_000_000
S = 1_000 * MS


@functools.cache
def call_pool() -> tuple[ScriptedCall, ...]:
    """Rendered once: the wires a day of calls mixes."""
    turns = (
        TurnPlan(clip("caller_where_is_order"), clip("agent_order_status"), 600.0),
        TurnPlan(clip("caller_yes"), clip("agent_confirm"), 900.0),
    )
    return (
        render(CallPlan(dialect="raw", send_mode="paced", turns=turns, seed=1)),
        render(CallPlan(dialect="raw", send_mode="burst", turns=turns, burst_speedup=50.0)),
        render(CallPlan(dialect="twilio", send_mode="paced", turns=turns, seed=2)),
        render(WirePlan(dialect="openai-realtime", send_mode="burst", turns=turns, seed=3)),
        render(WirePlan(dialect="openai-realtime", send_mode="paced", turns=turns, seed=4)),
        render(WirePlan(dialect="telnyx", send_mode="paced", turns=turns, seed=5)),
    )


TERMINALS = [c for c in EndCause if c not in NOT_A_CALL]


class FakeLoop:
    """The loop's next round (call_soon) and its timers (call_later) on a fake clock."""

    def __init__(self, now: list[int]) -> None:
        self.now = now
        self.soon: list[Callable[[], None]] = []
        self.timers: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0

    def call_soon(self, fn: Callable[[], None]) -> None:
        self.soon.append(fn)

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self.timers, (self.now[0] + int(delay_s * S), self._seq, fn))

    def run_until(self, t_ns: int) -> None:
        """Every round and timer due up to ``t_ns``, in order; the clock ends there."""
        while True:
            while self.soon:
                todo, self.soon = self.soon, []
                for fn in todo:
                    fn()
            if not self.timers or self.timers[0][0] > t_ns:
                break
            due, _, fn = heapq.heappop(self.timers)
            self.now[0] = max(self.now[0], due)
            fn()
        self.now[0] = max(self.now[0], t_ns)


class Day:
    """One proxy on a fake clock; its measurement costs ``cost_ns`` of fake CPU an item."""

    def __init__(self) -> None:
        self.now = [10 * S]
        self.cpu = [0]
        self.cost_ns = 0
        self.loop = FakeLoop(self.now)
        self.receipts: list[Receipt] = []
        self.proxy = Proxy(
            ProxyConfig(
                RelayConfig("ws://127.0.0.1:9"), dialect="auto", secret=b"day", max_loop_lag_ms=100
            ),
            sinks=[self.receipts.append],
        )
        self.proxy.clock_lag = LagMonitor(period_s=3600.0, clock=lambda: self.now[0])
        self.proxy.measuring = MeasurementQueue(
            cpu_ns=self._cpu,
            loop_cpu_ns=lambda: self.cpu[0],
            now_ns=lambda: self.now[0],
            call_soon=self.loop.call_soon,
            call_later=self.loop.call_later,
            lagging=self.proxy._lagging,
        )

    def _cpu(self) -> int:
        self.cpu[0] += self.cost_ns  # every reading: measurement took this long...
        self.now[0] += self.cost_ns  # ...of the loop's time too (it falls behind, sheds)
        return self.cpu[0]

    def call(self, scripted: ScriptedCall, keep: float, cause: EndCause, cost_us: int) -> None:
        """A call through the proxy's observer, as the relay drives it: admitted, its
        messages (the first ``keep`` of them) at their arrival times, then its end. A
        caller refused (503) while measurement is really behind comes back after the
        Retry-After second, as callers do, and must be admitted then."""
        self.cost_ns = cost_us * 1000
        admission = self.proxy.server.admission
        if not admission.admit():
            assert self.proxy.measuring.queued, f"refused with nothing queued: {admission.reason}"
            self.idle(1.0)
            assert admission.admit(), admission.reason
        start = self.now[0]
        ctx = self.proxy._observer(start)
        assert isinstance(ctx, CallContext)
        ctx.on_upstream_open(start + MS, 101)
        messages = scripted.messages[: max(1, int(len(scripted.messages) * keep))]
        for t, direction, payload in messages:
            self.loop.run_until(start + 2 * MS + t)
            ctx.on_message(direction, payload, self.now[0])
        self.loop.run_until(self.now[0] + 5 * MS)
        ctx.on_end(self.now[0], EndInfo(cause=cause, initiator="caller"))
        admission.release()

    def idle(self, gap_s: float) -> None:
        self.loop.run_until(self.now[0] + int(gap_s * S))


def gate_state(day: Day) -> dict[str, object]:
    """Everything of a proxy that gates a new call or holds a call's state."""
    proxy, queue = day.proxy, day.proxy.measuring
    admission = proxy.server.admission
    return {
        "admission.active": admission.active,
        "overloaded": proxy._overloaded(),
        "proxy.active": proxy.active,
        "live calls": len(proxy.live),
        "queued": queue.queued,
        "behind_ns": queue.behind_ns,
        "shedding": queue.shedding,
        "waiting": len(queue._waiting),
        "parked": len(queue._parked),
        "timers pending": len(day.loop.timers) + len(day.loop.soon),
        "loop lag readings": proxy.clock_lag.recent_lags_ns(S),
    }


calls = st.tuples(
    st.integers(0, 5),  # (call_pool)
    st.sampled_from([1.0, 1.0, 0.5, 0.05]),  # whole, or cut short
    st.sampled_from(TERMINALS),
    st.sampled_from([0, 5, 400, 2000, 20000]),  # µs a CPU reading: cheap to overload
    st.sampled_from([0.0, 0.01, 0.3, 0.6, 5.0, 30.0]),  # idle after it
)


@settings(max_examples=25, deadline=None)
@given(st.lists(calls, min_size=1, max_size=4))
def test_an_idle_proxy_after_any_day_of_calls_is_a_fresh_proxy(
    day_plan: list[tuple[int, float, EndCause, int, float]],
) -> None:
    fresh = gate_state(Day())
    day = Day()
    for n, (which, keep, cause, cost_us, gap_s) in enumerate(day_plan, start=1):
        day.call(call_pool()[which], keep, cause, cost_us)
        day.idle(gap_s)
        if not day.proxy.measuring.queued and not day.loop.timers:  # idle: all measured
            assert gate_state(day) == fresh, f"after call {n} of {day_plan} and {gap_s} s idle"
    day.idle(30.0)
    assert gate_state(day) == fresh
    assert len(day.receipts) == len(day_plan)  # exactly one receipt a call
