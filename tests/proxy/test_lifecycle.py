"""A call's capture as the proxy writes it (``proxy --capture``): what was forwarded
both ways, as the session was handed it, in a file named by the receipt's call id; a
capture that fails costs the call nothing. And a websocket call's figures carry the
loop's lag only where its stamps came from the loop (MEASUREMENT.md 2):
``MeasuredCall.stamps``, the session's clock_lag."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import pytest
from support.capturekit import read_all
from support.waiting import wait_until
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve

from voxproxy.captures.format import AGENT, TEXT, Kind
from voxproxy.captures.writer import CaptureSettings, CaptureWriter
from voxproxy.clock import LagMonitor
from voxproxy.core.dialects.raw import RawWire
from voxproxy.core.receipt import Receipt
from voxproxy.core.timebase import NS_PER_MS
from voxproxy.proxy import lifecycle
from voxproxy.proxy.websocket import CallContext, Proxy, ProxyConfig
from voxproxy.transports.websocket import RelayConfig
from voxproxy.transports.websocket.arrivals import ArrivalLog

SECRET = b"lifecycle-capture"


def _messages() -> list[bytes | str]:
    """A raw call's start and 40 frames of 20 ms at 16 kHz, each different."""
    rng = np.random.default_rng(3)
    frames = [rng.integers(-3000, 3000, 320, dtype=np.int16).tobytes() for _ in range(40)]
    return [RawWire.start(16000, "call-7"), *frames]


async def _echo(ws: ServerConnection) -> None:
    async for message in ws:
        await ws.send(message)


@asynccontextmanager
async def _proxy(captures: CaptureWriter | None) -> AsyncIterator[tuple[str, list[Receipt]]]:
    receipts: list[Receipt] = []
    async with serve(_echo, "127.0.0.1", 0, compression=None) as agent:
        port = next(iter(agent.sockets)).getsockname()[1]
        proxy = Proxy(
            ProxyConfig(RelayConfig(f"ws://127.0.0.1:{port}"), dialect="raw", secret=SECRET),
            sinks=[receipts.append],
        )
        proxy.captures = captures
        bound = await proxy.start("127.0.0.1", 0)
        try:
            yield f"ws://127.0.0.1:{bound}", receipts
        finally:
            await proxy.stop()
            if captures is not None:
                captures.close()


async def _call(url: str, sent: list[bytes | str]) -> list[bytes | str]:
    got: list[bytes | str] = []
    async with connect(url, compression=None) as ws:
        for message in sent:
            await ws.send(message)
            got.append(await ws.recv())
    return got


async def test_a_call_s_capture_holds_what_was_forwarded_both_ways(tmp_path: Path) -> None:
    writer = CaptureWriter(CaptureSettings(tmp_path / "caps", chunk_bytes=8192))
    sent = _messages()
    async with _proxy(writer) as (url, receipts):
        got = await _call(url, sent)
        await wait_until(lambda: receipts, what="the receipt")
    assert got == sent
    (receipt,) = receipts
    assert writer.written == 1 and writer.failed == 0
    head, records = read_all(tmp_path / "caps" / f"{receipt.call}.vxcap")
    assert head.dialect == "raw" and head.transport == "websocket"
    assert head.session_config() == ProxyConfig(RelayConfig("ws://x")).session
    kinds = [r.kind for r in records]
    assert kinds[0] == Kind.UPSTREAM and Kind.CLOSE in kinds and kinds[-1] == Kind.END
    assert head.questions == ("clock_lag",)
    messages = [r for r in records if r.kind == Kind.MESSAGE]
    caller = [
        r.payload.decode() if r.flags & TEXT else r.payload for r in messages if not r.flags & AGENT
    ]
    agent = [
        r.payload.decode() if r.flags & TEXT else r.payload for r in messages if r.flags & AGENT
    ]
    assert caller == sent and agent == sent
    times = [r.t_ns for r in messages]
    assert times == sorted(times) and head.start_ns < times[0]
    assert receipt.traffic.caller_to_agent_messages == len(caller)
    assert receipt.traffic.agent_to_caller_messages == len(agent)


async def test_a_capture_that_cannot_be_written_costs_the_call_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "caps"
    writer = CaptureWriter(CaptureSettings(directory, chunk_bytes=4096))
    shutil.rmtree(directory)  # (gone before the call's first chunk is written)
    sent = _messages()
    async with _proxy(writer) as (url, receipts):
        assert await _call(url, sent) == sent
        await wait_until(lambda: receipts, what="the receipt")
    (receipt,) = receipts
    assert writer.failed == 1 and writer.written == 0
    assert not receipt.measurement_disabled and receipt.anomalies == {}
    assert receipt.traffic.caller_to_agent_messages == len(sent)


async def test_a_capture_that_cannot_start_leaves_the_call_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object) -> None:
        raise RuntimeError("no header")

    monkeypatch.setattr(lifecycle, "capture_header", broken)
    writer = CaptureWriter(CaptureSettings(tmp_path))
    sent = _messages()
    async with _proxy(writer) as (url, receipts):
        assert await _call(url, sent) == sent
        await wait_until(lambda: receipts, what="the receipt")
    (receipt,) = receipts
    assert writer.failed == 1 and list(tmp_path.iterdir()) == []
    assert not receipt.measurement_disabled and receipt.dialect == "raw"


# -- arrival stamps ----------------------------------------------------------------------

S = 1_000_000_000


def _stamped_call() -> CallContext:
    proxy = Proxy(ProxyConfig(RelayConfig("ws://127.0.0.1:9"), secret=b"k"))
    proxy.clock_lag = LagMonitor(period_s=3600.0, clock=lambda: 10 * S)
    proxy.clock_lag.record(2 * S, 90 * NS_PER_MS)  # the loop blocked 90 ms up to 2 s
    return CallContext(proxy, S)


def test_before_the_transport_says_every_stamp_may_be_as_late_as_the_loop() -> None:
    call = _stamped_call()
    assert call.stamps(2 * S - 100 * NS_PER_MS, 2 * S + 350 * NS_PER_MS) == 90 * NS_PER_MS


def test_kernel_stamps_do_not_carry_the_loops_lag() -> None:
    call = _stamped_call()
    call.stamps.arrivals = ArrivalLog()  # (every read stamped by the kernel, each message exact)
    assert call.stamps(2 * S - 100 * NS_PER_MS, 2 * S + 350 * NS_PER_MS) == 0


def test_reads_stamped_by_the_loop_carry_its_lag() -> None:
    call = _stamped_call()
    call.stamps.arrivals = ArrivalLog()
    call.stamps.arrivals.note_read_time(2 * S - 30 * NS_PER_MS)
    assert call.stamps(2 * S - 100 * NS_PER_MS, 2 * S + 350 * NS_PER_MS) == 90 * NS_PER_MS
