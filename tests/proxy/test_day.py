"""A day of calls, not one call: callers one after another with idle gaps between them
are all served, as a fresh proxy would serve them (issue: the sticky 503 of 8235969,
where the first call's measurement left the queue "behind" for good)."""

from __future__ import annotations

import asyncio

import pytest
from support.faultkit import healthy_call, router_agent

from voxproxy.clock import LagMonitor
from voxproxy.proxy.websocket import Proxy, ProxyConfig
from voxproxy.transports.websocket import RelayConfig


class StillClock:
    """A clock that stands still: the lag monitor records no reading of the test's own
    loop (its garbage collector, its callers), so admission judges only measurement."""

    def now_ns(self) -> int:
        return 10**12


@pytest.mark.slow
@pytest.mark.parametrize("gaps_s", [(0.0, 0.6, 1.2)])
async def test_every_caller_after_an_idle_gap_is_served(gaps_s: tuple[float, ...]) -> None:
    async with router_agent() as agent:
        # Admission as the command line sets it (refuse past 100 ms of loop lag, or
        # measurement shedding or 300 ms behind), measurement grouped (the default).
        proxy = Proxy(
            ProxyConfig(
                RelayConfig(agent.url), dialect="twilio", secret=b"day", max_loop_lag_ms=100.0
            )
        )
        proxy.clock_lag = LagMonitor(period_s=3600.0, clock=StillClock().now_ns)
        port = await proxy.start("127.0.0.1", 0)
        try:
            codes = [(await healthy_call(port, "first", frames=25)).close_code]
            for k, gap in enumerate(gaps_s):
                await asyncio.sleep(gap)  # idle: no call, nothing queued
                if gap > 0.1:  # (longer than a group's wait: everything was measured)
                    assert proxy.measuring.behind_ns == 0 and not proxy.measuring.shedding
                codes.append((await healthy_call(port, f"next{k}", frames=5)).close_code)
            assert codes == [1000] * (1 + len(gaps_s))
            assert proxy.server.admission.refused == 0
        finally:
            await proxy.stop()
