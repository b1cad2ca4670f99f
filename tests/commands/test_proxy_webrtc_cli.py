"""`voxproxy proxy --transport webrtc` as a process: flags, env defaults, a call, receipts."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest
from support.waiting import wait_until

from voxproxy.cli import build_parser, main
from voxproxy.clips import clip
from voxproxy.commands.proxy import serve_config
from voxproxy.harness.ports import free_port
from voxproxy.loadgen.caller import Say, WaitAgentEnd
from voxproxy.loadgen.webrtc import WebRtcCaller, WebRtcCallerConfig
from voxproxy.mockagent import MockAgentConfig
from voxproxy.mockagent.webrtc import WebRtcMockAgent

pytestmark = pytest.mark.slow


def test_transport_flags_and_env_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    args = build_parser().parse_args(["proxy", "--upstream", "ws://a"])
    assert args.transport == "websocket" and args.signaling == "whip"
    monkeypatch.setenv("VOXPROXY_PROXY_TRANSPORT", "webrtc")
    monkeypatch.setenv("VOXPROXY_PROXY_SIGNALING", "pipecat")
    args = build_parser().parse_args(["proxy", "--upstream", "http://a/api/offer"])
    assert args.transport == "webrtc" and args.signaling == "pipecat"


def test_mismatched_upstream_urls_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["proxy", "--transport", "webrtc", "--upstream", "ws://agent"]) == 2
    assert "http(s):// signaling URL" in capsys.readouterr().err
    assert main(["proxy", "--upstream", "http://agent/whip"]) == 2
    assert "ws:// or wss://" in capsys.readouterr().err


async def test_the_webrtc_proxy_process_relays_a_call_and_writes_its_receipt(
    tmp_path: Path,
) -> None:
    receipts = tmp_path / "receipts.jsonl"
    port = free_port()
    async with WebRtcMockAgent(MockAgentConfig(delay_ms=400)) as agent:
        env = dict(os.environ, VOXPROXY_PROXY_TRANSPORT="webrtc")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "voxproxy.cli",
            "proxy",
            "--listen",
            f"127.0.0.1:{port}",
            "--upstream",
            agent.url(),
            "--ice-host",
            "127.0.0.1",
            "--receipts",
            str(receipts),
            "--secret",
            "cli-test",
            env=env,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert proc.stderr is not None
            line = b""
            async with asyncio.timeout(20):
                while b"answering offers" not in line:
                    line = await proc.stderr.readline()
                    assert line, "the proxy exited before listening"
            caller = WebRtcCaller(
                WebRtcCallerConfig(f"http://127.0.0.1:{port}/whip"),
                [Say(clip("caller_yes")), WaitAgentEnd(quiet_ms=300, start_timeout_ms=4000)],
            )
            record = await caller.run_webrtc()
            assert record.error is None, record.error
            await wait_until(lambda: receipts.exists() and receipts.read_text() != "", 10)
        finally:
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(20):
                await proc.wait()
    assert proc.returncode == 0
    (line,) = receipts.read_text().splitlines()
    r = json.loads(line)
    assert r["transport"] == "webrtc"
    assert r["terminal"] == "caller_closed"
    assert r["verdict"] is not None  # judged under the policy, as the websocket proxy does
    assert [t["kind"] for t in r["turns"]] == ["response"]


def test_max_calls_and_idle_timeout_reach_the_webrtc_relay() -> None:
    args = build_parser().parse_args(["proxy", "--transport", "webrtc", "--upstream", "http://a"])
    relay = serve_config(args).proxy.relay
    assert (relay.max_calls, relay.idle_timeout_s) == (200, 120.0)
    args = build_parser().parse_args(
        ["proxy", "--transport", "webrtc", "--upstream", "http://a", "--max-calls", "10"]
    )
    assert serve_config(args).proxy.relay.max_calls == 10


def test_pacing_reaches_the_webrtc_relay_and_is_bounded(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["proxy", "--transport", "webrtc", "--upstream", "http://a"]
    assert serve_config(build_parser().parse_args(base)).proxy.relay.pace_ms == 0.0
    args = build_parser().parse_args([*base, "--pace-ms", "15"])
    assert serve_config(args).proxy.relay.pace_ms == 15.0
    with pytest.raises(SystemExit):
        build_parser().parse_args([*base, "--pace-ms", "500"])
    assert "at most 100" in capsys.readouterr().err
