"""Each message the relay hands to measurement carries its arrival at the host
(MEASUREMENT.md 2): a frame whose bytes arrived while the event loop was blocked is
stamped when they arrived, not when the loop read them, in both directions, on asyncio
and uvloop. A leg without kernel stamps (TLS) is stamped at the read, and the call's
arrival log says so. Raw peers (tests/support/rawpeers.py) on loopback."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvloop
from support.observers import EndsKept
from support.rawpeers import BINARY, raw_agents, raw_caller
from support.tlskit import tls_contexts
from support.waiting import wait_until
from websockets.asyncio.server import ServerConnection, serve

from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Direction
from voxproxy.transports.stamped import SUPPORTED
from voxproxy.transports.websocket import RelayConfig, RelayServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not SUPPORTED, reason="kernel receive stamps are Linux's"),
]

BLOCK_S = 0.2  # the loop is blocked this long right after the bytes were sent
SLEW_NS = 2_000_000  # the wall clock's slew between arrival and read (the stamp's clock)
ARRIVAL_NS = 5_000_000  # loopback: the bytes reach the host as they are written
PCM = b"\x01\x00" * 160

LOOPS: dict[str, Callable[[Coroutine[Any, Any, Any]], Any]] = {
    "asyncio": asyncio.run,
    "uvloop": uvloop.run,
}


@dataclass
class Stamps(EndsKept):
    """A call's observer that keeps each message's stamp."""

    seen: list[tuple[Direction, int]] = field(default_factory=list)

    def on_message(self, direction: Direction, payload: bytes | str, t_ns: int) -> bool | None:
        del payload
        self.seen.append((direction, t_ns))
        return True


async def _late_frames(kernel_stamps: bool) -> tuple[Stamps, list[tuple[int, int]]]:
    """A frame each way, each written just before the loop blocks for BLOCK_S: the
    observer, and each frame's (written, unblocked) times."""
    observers: list[Stamps] = []

    def factory(t_ns: int) -> Stamps:
        del t_ns
        observers.append(Stamps())
        return observers[-1]

    times: list[tuple[int, int]] = []
    async with raw_agents() as agents:
        config = RelayConfig(agents.url, close_timeout_s=0.3, kernel_stamps=kernel_stamps)
        relay = RelayServer(config, factory)
        port = await relay.start("127.0.0.1", 0)
        try:
            caller = await raw_caller(port)
            agent = await asyncio.wait_for(agents.connections.get(), 10)
            await asyncio.sleep(0.05)
            for peer, n in ((caller, 1), (agent, 2)):
                written = time.monotonic_ns()
                peer.send(BINARY, PCM)  # (asyncio writes it to the socket at once)
                time.sleep(BLOCK_S)  # a callback that runs long: nothing is read meanwhile
                times.append((written, time.monotonic_ns()))
                await wait_until(lambda n=n: len(observers[0].seen) >= n, 10, "the frame")
            await caller.hang_up()
            await wait_until(lambda: observers[0].ends, 10, "the end")
        finally:
            await relay.stop()
    return observers[0], times


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_frame_read_late_is_stamped_with_its_arrival(loop: str) -> None:
    obs, times = LOOPS[loop](_late_frames(kernel_stamps=True))
    for (direction, t_ns), (written, unblocked), want in zip(
        obs.seen, times, (CALLER_TO_AGENT, AGENT_TO_CALLER), strict=True
    ):
        assert direction is want
        assert written - SLEW_NS <= t_ns <= written + ARRIVAL_NS < unblocked
    arrivals = obs.ends[0].arrivals
    assert arrivals is not None and not arrivals.read_times
    assert arrivals.kernel[CALLER_TO_AGENT] and arrivals.kernel[AGENT_TO_CALLER]


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_without_kernel_stamps_the_same_frames_are_stamped_at_the_read(loop: str) -> None:
    """The case the kernel's stamps are for: stamped by the loop, a frame is as late as
    the loop was blocked (as every frame was before them)."""
    obs, times = LOOPS[loop](_late_frames(kernel_stamps=False))
    for (_direction, t_ns), (_written, unblocked) in zip(obs.seen, times, strict=True):
        assert t_ns >= unblocked
    arrivals = obs.ends[0].arrivals
    assert arrivals is not None and arrivals.read_times


async def _tls_agent(tmp: Path) -> Stamps:
    """A caller in plain TCP, an agent over TLS that echoes: the caller's leg is
    kernel-stamped, the agent's (read by the TLS layer) stamped at the read."""
    server_ctx, client_ctx = tls_contexts(tmp)
    observers: list[Stamps] = []

    def factory(t_ns: int) -> Stamps:
        del t_ns
        observers.append(Stamps())
        return observers[-1]

    async def echo(ws: ServerConnection) -> None:
        async for m in ws:
            await ws.send(m)

    async with serve(echo, "127.0.0.1", 0, ssl=server_ctx, compression=None) as server:
        agent_port = next(iter(server.sockets)).getsockname()[1]
        config = RelayConfig(
            f"wss://127.0.0.1:{agent_port}", close_timeout_s=0.3, upstream_ssl=client_ctx
        )
        relay = RelayServer(config, factory)
        port = await relay.start("127.0.0.1", 0)
        try:
            caller = await raw_caller(port)
            for _ in range(3):
                caller.send(BINARY, PCM)
                await caller.read_frame()
            await caller.hang_up()
            await wait_until(lambda: observers[0].ends, 10, "the end")
        finally:
            await relay.stop()
    return observers[0]


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_tls_leg_is_stamped_at_the_read_and_says_so(loop: str, tmp_path: Path) -> None:
    obs = LOOPS[loop](_tls_agent(tmp_path))
    arrivals = obs.ends[0].arrivals
    assert arrivals is not None
    assert arrivals.kernel[CALLER_TO_AGENT]
    assert arrivals.read_time[AGENT_TO_CALLER] and not arrivals.kernel[AGENT_TO_CALLER]
    assert arrivals.read_times  # (the figures near them carry the loop's lag)
