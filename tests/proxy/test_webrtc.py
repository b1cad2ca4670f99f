"""End to end over loopback WebRTC: an aiortc caller -> voxproxy (webrtc) -> the mock agent.

The proxy's receipt is compared with the truth that the caller (its capture
instants, and the arrival of every payload it received) and the agent (which
clip samples each payload it sent carried) know together
(:func:`voxproxy.loadgen.webrtc.webrtc_turn_truths`). Calls run concurrently,
with WHIP and Pipecat signaling, agents that send silence or nothing while idle,
several response delays and barge-in reaction times.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from support.groundtruth import NEVER_WITHHELD
from support.livecall import barge_script, checked_live_calls, live_bounds, sessions_of, turn_errors
from support.waiting import wait_until
from support.webrtckit import open_counts, webrtc_proxy

from voxproxy.clips import clip
from voxproxy.clock import LagMonitor
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
from voxproxy.receipts.model import Receipt
from voxproxy.simcall.webrtc import WebRtcCallLog
from voxproxy.timebase import NS_PER_MS

pytestmark = pytest.mark.slow


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

    async def run() -> list[Outcome]:
        return await asyncio.gather(*(one_call(n, *spec) for n, spec in enumerate(CALLS)))

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

    await checked_live_calls(run, check)
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
