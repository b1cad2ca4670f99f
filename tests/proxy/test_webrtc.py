"""End to end over loopback WebRTC: an aiortc caller -> voxproxy (webrtc) -> the mock agent.

The proxy's receipt is compared with the truth that the caller (its capture
instants, and the arrival of every payload it received) and the agent (which
clip samples each payload it sent carried) know together
(:func:`voxproxy.loadgen.webrtc.webrtc_turn_truths`). Calls run concurrently,
with WHIP and Pipecat signaling, agents that send silence or nothing while idle,
several response delays and barge-in reaction times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from support.groundtruth import NEVER_WITHHELD
from support.livecall import (
    barge_script,
    checked_live_calls,
    every_call,
    late_answers,
    live_bounds,
    sessions_of,
    turn_errors,
)
from support.waiting import wait_until
from support.webrtckit import open_counts, webrtc_proxy

from voxproxy.clips import clip
from voxproxy.clock import LagMonitor
from voxproxy.core.receipt import Receipt
from voxproxy.core.timebase import NS_PER_MS, NS_PER_S
from voxproxy.loadgen.caller import Say, WaitAgentEnd
from voxproxy.loadgen.webrtc import (
    WebRtcCaller,
    WebRtcCallerConfig,
    WebRtcRecord,
    webrtc_turn_truths,
)
from voxproxy.mockagent import MockAgentConfig
from voxproxy.mockagent.webrtc import Idle, WebRtcMockAgent
from voxproxy.proxy.webrtc import WebRtcCallContext
from voxproxy.simcall.webrtc import WebRtcCallLog

pytestmark = pytest.mark.slow


MS, S = NS_PER_MS, NS_PER_S

RESPONSES = ("agent_confirm", "agent_order_status", "agent_reprompt", "agent_ask_number")


@dataclass
class Outcome:
    receipt: Receipt
    record: WebRtcRecord
    log: WebRtcCallLog
    loop_lag: LagMonitor  # the proxy's, of the loop the caller and the agent share


async def one_call(n: int, signaling: str, idle: Idle, delay_ms: float) -> Outcome:
    agent = WebRtcMockAgent(
        MockAgentConfig(
            delay_ms=delay_ms,
            jitter_ms=100.0,
            reaction_ms=120.0 + 40 * n,
            responses=RESPONSES,
            seed=n,
        ),
        idle=idle,
    )
    await agent.start()
    receipts: list[Receipt] = []
    try:
        async with webrtc_proxy(
            agent.url(signaling), receipts, max_uncertainty_ms=NEVER_WITHHELD, signaling=signaling
        ) as proxy:
            caller = WebRtcCaller(
                WebRtcCallerConfig(proxy.url(signaling), signaling=signaling),  # type: ignore[arg-type]
                barge_script(barge_after_ms=500.0 + 150 * n),
            )
            record = await caller.run_webrtc()
            await wait_until(lambda: bool(receipts), 10.0)
            loop_lag = proxy.clock_lag
    finally:
        await agent.stop()
    assert record.error is None, record.error
    assert len(receipts) == 1
    return Outcome(receipts[0], record, agent.calls[0], loop_lag)


CALLS = [
    ("whip", "silence", 600.0),
    ("pipecat", "silence", 1100.0),
    ("whip", "nothing", 800.0),
    ("pipecat", "nothing", 1400.0),
]


async def test_live_webrtc_calls_measure_ttfs_and_stop_latency_against_truth() -> None:
    before = open_counts()

    def check(outcomes: Sequence[Outcome]) -> None:
        ttfs_err: list[float] = []
        stop_err: list[float] = []
        for spec, o in zip(CALLS, outcomes, strict=True):
            assert o.receipt.transport == "webrtc"
            assert o.receipt.terminal == "caller_closed"
            assert o.receipt.settings.caller_frame_ms == 20.0
            truths = webrtc_turn_truths(o.record, o.log)
            # Nothing to flush on a paced wire.
            turn_errors(o.receipt, truths, "ceased", ttfs_err, stop_err, spec, o.loop_lag)
        # As for the websocket proxy: real scheduling jitter on three event loops, plus Opus.
        live_bounds("webrtc", ttfs_err, stop_err)

    def off_script(outcomes: Sequence[Outcome]) -> str | None:
        truths = [webrtc_turn_truths(o.record, o.log) for o in outcomes]
        return late_answers([spec[2] for spec in CALLS], truths)

    await checked_live_calls(lambda: every_call(one_call, CALLS), check, off_script)
    assert open_counts() == before


async def test_a_finished_webrtc_call_s_measurement_is_freed_without_the_cycle_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 14, item 5: the relay lets go of its measurement when the call ends."""
    agent = WebRtcMockAgent(MockAgentConfig(delay_ms=300.0, responses=("agent_confirm",)))
    await agent.start()
    receipts: list[Receipt] = []
    try:
        with sessions_of(monkeypatch, WebRtcCallContext) as sessions:
            async with webrtc_proxy(agent.url("whip"), receipts) as proxy:
                caller = WebRtcCaller(
                    WebRtcCallerConfig(proxy.url("whip")),
                    [Say(clip("caller_yes")), WaitAgentEnd(quiet_ms=400)],
                )
                record = await caller.run_webrtc()
                await wait_until(lambda: bool(receipts), 10.0)
                assert [ref() for ref in sessions] == [None]  # reference counting alone freed it
    finally:
        await agent.stop()
    assert record.error is None, record.error
    assert receipts[0].terminal == "caller_closed"


async def test_a_lagging_loop_refuses_offers_with_503_and_admits_again_after() -> None:
    """The WebRTC proxy's admission on measured load, as the websocket proxy's: while
    the median lag of the last second is over max_loop_lag_ms (injected readings, a
    fake clock), an offer gets 503 and Retry-After and never reaches the agent."""
    import aiohttp

    from voxproxy.clock import LagMonitor
    from voxproxy.transports.webrtc import AudioPeer

    now = [10**12]
    agent = WebRtcMockAgent(MockAgentConfig(responses=("agent_confirm",)))
    await agent.start()
    receipts: list[Receipt] = []
    caller = AudioPeer(name="caller")
    offer = await caller.create_offer()
    try:
        async with webrtc_proxy(agent.url("whip"), receipts) as proxy:
            assert proxy.config.max_loop_lag_ms == 100.0  # on by default, as for websocket
            proxy.clock_lag = LagMonitor(period_s=3600.0, clock=lambda: now[0])
            for _ in range(3):
                proxy.clock_lag.record(now[0], 150 * NS_PER_MS)
                now[0] += 100 * NS_PER_MS
            async with aiohttp.ClientSession() as http:
                async with http.post(
                    proxy.url("whip"),
                    data=offer.encode(),
                    headers={"Content-Type": "application/sdp"},
                ) as resp:
                    status, retry, body = (
                        resp.status,
                        resp.headers.get("Retry-After"),
                        await resp.text(),
                    )
            assert (status, retry) == (503, "1")
            assert "overloaded (event loop lag 150 ms)" in body
            assert proxy.server.admission.refused_overloaded == 1
            assert agent.calls == []  # never offered to the agent
            now[0] += 1500 * NS_PER_MS  # the lag has left the last second
            assert proxy._overloaded() is None
    finally:
        await caller.close()
        await agent.stop()
    assert receipts == []


def test_a_call_s_timing_counts_loop_lag_only_where_media_was_stamped_when_read() -> None:
    from voxproxy.clock import LagMonitor
    from voxproxy.proxy.webrtc import CallTiming

    monitor = LagMonitor(clock=lambda: 0)
    monitor.record(10 * S, 40 * MS)  # the loop ran 40 ms late at 10 s
    timing = CallTiming(monitor)
    # Every packet stamped by the kernel: the loop's lag moved none of them.
    assert timing.clock_lag(9 * S, 11 * S) == 0
    timing.read_stamped(10 * S)  # one read when the loop got to it (no kernel stamp)
    assert timing.clock_lag(9 * S, 11 * S) == 40 * MS
    assert timing.clock_lag(30 * S, 31 * S) == 0  # far from it


def test_a_call_s_downstream_is_bounded_by_the_caller_s_jitter_and_late_packets() -> None:
    from voxproxy.clock import LagMonitor
    from voxproxy.proxy.webrtc import (
        DOWNSTREAM_WINDOW_NS,
        JITTER_BUFFER_FACTOR,
        REPORT_AFTER_NS,
        CallTiming,
    )

    timing = CallTiming(LagMonitor(clock=lambda: 0))
    assert timing.downstream(20 * S) == 0.0  # nothing reported: nothing known
    timing.receiver_report(18 * S, 2.5)
    timing.receiver_report(19 * S, 1.0)
    assert timing.downstream(20 * S) == JITTER_BUFFER_FACTOR * 2.5
    # A report soon after the edge describes it too; one long before or after does not
    # (in whole seconds: the call keeps each second's largest).
    assert timing.downstream(18 * S - REPORT_AFTER_NS) == JITTER_BUFFER_FACTOR * 2.5
    assert timing.downstream(20 * S + DOWNSTREAM_WINDOW_NS) == 0.0
    # A packet towards the caller 35 ms late against the stream 3 s before the edge (the
    # relay's stall or the agent's burst): the buffer may have grown by as much.
    timing.late(17 * S, 35.0)
    assert timing.downstream(20 * S) == JITTER_BUFFER_FACTOR * 2.5 + 35.0
    assert timing.downstream(16 * S) == JITTER_BUFFER_FACTOR * 2.5  # before it happened


async def test_the_caller_s_receiver_reports_reach_the_call_s_timing() -> None:
    """aiortc's receiver reports (about one a second) of the audio the proxy sends the
    caller reach the call's timing, as the caller measured them."""
    reports: list[tuple[int, float]] = []
    receipts: list[Receipt] = []
    async with WebRtcMockAgent(MockAgentConfig(delay_ms=300), idle="silence") as agent:
        async with webrtc_proxy(agent.url(), receipts) as proxy:
            make = proxy.server.observer_factory

            class Spy:
                """The call's observer, its receiver reports noted on the way."""

                def __init__(self, ctx: WebRtcCallContext) -> None:
                    self.ctx = ctx

                def __getattr__(self, name: str) -> Any:
                    return getattr(self.ctx, name)

                def on_receiver_report(self, t: int, jitter_ms: float, rtt: float | None) -> None:
                    reports.append((t, jitter_ms))
                    self.ctx.on_receiver_report(t, jitter_ms, rtt)

            def observe(t_ns: int, offer: Any) -> Any:
                return Spy(make(t_ns, offer))

            proxy.server.observer_factory = observe
            script = [Say(clip("caller_yes")), WaitAgentEnd(quiet_ms=2500, start_timeout_ms=4000)]
            rec = await WebRtcCaller(WebRtcCallerConfig(proxy.url()), script).run_webrtc()
            await wait_until(lambda: receipts, 10.0, "the receipt")
    assert rec.error is None, rec.error
    assert reports, "no receiver report reached the call"
    assert all(0.0 <= j < 1000.0 for _, j in reports)
