"""`voxproxy load --transport webrtc` against the WebRTC mock agent behind voxproxy."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import support.webrtckit as webrtckit  # noqa: F401  (ICE on 127.0.0.1 only)

from voxproxy.cli import main
from voxproxy.core.receipt import Receipt
from voxproxy.mockagent import MockAgentConfig
from voxproxy.mockagent.webrtc import WebRtcMockAgent
from voxproxy.proxy.webrtc import WebRtcProxy, WebRtcProxyConfig
from voxproxy.transports.webrtc import WebRtcRelayConfig

pytestmark = pytest.mark.slow


@contextmanager
def agent_behind_proxy(receipts: list[Receipt]) -> Iterator[str]:
    """A WebRTC mock agent and a voxproxy in front of it, on a loop in another thread."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop = asyncio.Event()
    url: list[str] = []

    async def serve() -> None:
        async with WebRtcMockAgent(MockAgentConfig(delay_ms=500, reaction_ms=150)) as agent:
            proxy = WebRtcProxy(
                WebRtcProxyConfig(WebRtcRelayConfig(agent.url()), secret=b"load"),
                sinks=[receipts.append],
            )
            await proxy.start("127.0.0.1", 0)
            url.append(proxy.url())
            ready.set()
            await stop.wait()
            await proxy.stop()

    thread = threading.Thread(target=lambda: loop.run_until_complete(serve()), daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield url[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(20)
        loop.close()


def test_load_command_runs_webrtc_calls(tmp_path: Path) -> None:
    receipts: list[Receipt] = []
    with agent_behind_proxy(receipts) as url:
        status = main(
            [
                "load",
                "normal_question",
                "interruption",
                "--transport",
                "webrtc",
                "--target",
                url,
                "--calls",
                "2",
                "--concurrency",
                "2",
                "--out",
                str(tmp_path),
            ]
        )
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["run"]["calls"] == 2
    calls = results["calls"]
    assert [c["error"] for c in calls] == [None, None]
    assert all(t["truth"]["ttfs_ms"] is not None for c in calls for t in c["turns"])
    assert status == 0, [c["failures"] for c in calls]
    assert len(receipts) == 2 and {r.transport for r in receipts} == {"webrtc"}


def test_load_command_refuses_a_websocket_target_for_webrtc() -> None:
    assert main(["load", "normal_question", "--transport", "webrtc", "--target", "ws://x"]) == 2
