"""A day of calls, not one call: callers one after another with idle gaps between them
are all served, as a fresh proxy would serve them (issue: the sticky 503 of 8235969,
where the first call's measurement left the queue "behind" for good)."""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

import pytest
from support.child import logged_child, proxy_command, terminated
from support.faultkit import call_hash, call_sid, healthy_call, router_agent
from support.waiting import wait_until

from voxproxy.clock import LagMonitor
from voxproxy.proxy.websocket import Proxy, ProxyConfig
from voxproxy.receipts.writer import read_receipts
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


def _start_cli_proxy(
    log: Path, upstream: str, receipts: Path, workers: int
) -> subprocess.Popen[bytes]:
    """``voxproxy proxy`` as a user starts it: the command line's defaults (admission on
    loop lag and measurement included), ``--workers N``."""
    cmd = proxy_command("--upstream", upstream, "--dialect", "twilio", workers=workers)
    cmd += ["--secret", "fault-secret", "--receipts", str(receipts), "--drain-timeout", "5"]
    return logged_child(cmd, log)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
async def test_callers_one_after_another_are_all_served_by_the_command(
    tmp_path: Path, workers: int
) -> None:
    # 8235969: `--workers 1`, one call then callers at 1, 5, 20, 40 s: 101 503 503 503 503;
    # `--workers 2`, twelve callers in a row: two 101s, then ten 503s.
    receipts, log = tmp_path / "receipts.jsonl", tmp_path / "proxy.log"
    gaps_s = [0.0, 0.7, 0.7, 1.2, 0.0, 0.7, 0.2, 0.7]
    async with router_agent() as agent:
        proc = _start_cli_proxy(log, agent.url, receipts, workers)
        try:
            await wait_until(lambda: "listening on ws://" in log.read_text(), 60)
            found = re.search(r"listening on ws://127\.0\.0\.1:(\d+)", log.read_text())
            assert found is not None, log.read_text()
            port = int(found[1])
            codes = []
            for k, gap in enumerate(gaps_s):
                await asyncio.sleep(gap)
                codes.append((await healthy_call(port, f"day{k}", frames=10)).close_code)
            assert codes == [1000] * len(gaps_s), log.read_text()
            await wait_until(lambda: len(list(read_receipts(receipts))) >= len(gaps_s), 30)
        finally:
            code = terminated(proc)
    assert code == 0, log.read_text()
    assert "overloaded" not in log.read_text() and "at capacity" not in log.read_text()
    written = sorted(r.call for r in read_receipts(receipts))
    assert written == sorted(call_hash(call_sid(f"day{k}")) for k in range(len(gaps_s)))
