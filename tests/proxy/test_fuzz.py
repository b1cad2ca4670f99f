"""Property-based: the proxy's relay, over random frames both ways through a live proxy on
loopback, delivers bytes and frame types unchanged and in order. Bounded
(``support.fuzzing.bounded``); ``VOXPROXY_FUZZ_SCALE=20`` searches deeper."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from support.fuzzing import DIALECTS, bounded
from support.waiting import wait_until
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve

from voxproxy.core.receipt import Receipt

_FRAME = st.one_of(
    st.binary(max_size=70_000),
    st.text(max_size=3_000),
    st.lists(st.binary(max_size=2_000), min_size=1, max_size=4),  # fragmented binary
    st.lists(st.text(max_size=500), min_size=1, max_size=4),  # fragmented text
)


def _whole(frame: bytes | str | list[bytes] | list[str]) -> bytes | str:
    if isinstance(frame, list):
        return b"".join(frame) if isinstance(frame[0], bytes) else "".join(frame)  # type: ignore[arg-type]
    return frame


async def _through_proxy(
    dialect: str, to_agent: list[Any], to_caller: list[Any]
) -> tuple[list[bytes | str], list[bytes | str], Receipt]:
    from voxproxy.proxy.websocket import Proxy, ProxyConfig
    from voxproxy.transports.websocket import RelayConfig

    got_by_agent: list[bytes | str] = []
    done = asyncio.Event()

    async def agent(ws: ServerConnection) -> None:
        for frame in to_caller:
            await ws.send(frame)
        async for m in ws:
            got_by_agent.append(m)
            if len(got_by_agent) == len(to_agent):
                done.set()

    receipts: list[Receipt] = []
    async with serve(agent, "127.0.0.1", 0, compression=None, max_size=None) as server:
        agent_port = next(iter(server.sockets)).getsockname()[1]
        proxy = Proxy(
            ProxyConfig(RelayConfig(f"ws://127.0.0.1:{agent_port}"), dialect=dialect, secret=b"f"),
            sinks=[receipts.append],
        )
        port = await proxy.start("127.0.0.1", 0)
        try:
            async with connect(f"ws://127.0.0.1:{port}", compression=None, max_size=None) as ws:
                got_by_caller = [await ws.recv() for _ in to_caller]
                for frame in to_agent:
                    await ws.send(frame)
                if to_agent:
                    await asyncio.wait_for(done.wait(), 10)
            await wait_until(lambda: receipts, what="the receipt")
        finally:
            await proxy.stop()
    return got_by_agent, got_by_caller, receipts[0]


@bounded(25)
@given(
    dialect=st.sampled_from(DIALECTS),
    to_agent=st.lists(_FRAME, max_size=8),
    to_caller=st.lists(_FRAME, max_size=8),
)
def test_the_relay_forwards_random_frames_unchanged(
    dialect: str, to_agent: list[Any], to_caller: list[Any]
) -> None:
    got_by_agent, got_by_caller, receipt = asyncio.run(_through_proxy(dialect, to_agent, to_caller))
    assert got_by_agent == [_whole(f) for f in to_agent]
    assert got_by_caller == [_whole(f) for f in to_caller]
    assert receipt.traffic.caller_to_agent_messages == len(to_agent)
    assert receipt.traffic.agent_to_caller_messages == len(to_caller)
    assert receipt.anomalies.get("measurement_error", 0) == 0
