"""Helpers for the WebRTC tests: loopback-only ICE, a proxy with a receipt list, counts."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from aiortc import RTCPeerConnection

from voxproxy.core.receipt import Receipt
from voxproxy.proxy.webrtc import WebRtcProxy, WebRtcProxyConfig
from voxproxy.transports.webrtc import (
    AudioPeer,
    WebRtcRelayConfig,
    open_peer_connections,
    use_host_addresses,
)

# Every WebRTC test gathers ICE candidates on 127.0.0.1 only: nothing leaves loopback.
use_host_addresses(["127.0.0.1"])


def unclosed_peer_connections() -> int:
    """Every RTCPeerConnection object alive in the process that is not closed (gc census)."""
    gc.collect()
    return sum(
        1
        for o in gc.get_objects()
        if isinstance(o, RTCPeerConnection) and o.connectionState != "closed"
    )


def open_counts() -> tuple[int, int]:
    return open_peer_connections(), unclosed_peer_connections()


async def connected_pair(
    a: AudioPeer | None = None, b: AudioPeer | None = None
) -> tuple[AudioPeer, AudioPeer]:
    """Two peers (``a`` offers), connected over loopback."""
    from support.waiting import wait_until

    a = a or AudioPeer(name="a")
    b = b or AudioPeer(name="b")
    await a.accept_answer(await b.answer(await a.create_offer()))
    await wait_until(lambda: a.state == b.state == "connected", 10.0, "both peers connected")
    return a, b


@asynccontextmanager
async def webrtc_proxy(
    upstream: str,
    receipts: list[Receipt],
    max_uncertainty_ms: float | None = None,
    **relay: Any,
) -> AsyncIterator[WebRtcProxy]:
    config = WebRtcProxyConfig(replace(WebRtcRelayConfig(upstream), **relay), secret=b"webrtc-test")
    if max_uncertainty_ms is not None:
        config = replace(
            config, session=replace(config.session, max_uncertainty_ms=max_uncertainty_ms)
        )
    proxy = WebRtcProxy(config, sinks=[receipts.append])
    await proxy.start("127.0.0.1", 0)
    try:
        yield proxy
    finally:
        await proxy.stop()
