"""voxproxy.proxy.server: one ProxyServer owns the receipts file, its journal, the store, the
verdict, the event API and the drain; the CLI's ``voxproxy proxy`` is a ServeConfig."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from support.faultkit import ULAW_SILENCE, call_hash, call_sid, router_agent
from support.waiting import wait_until
from websockets.asyncio.client import connect

from voxproxy.cli import build_parser
from voxproxy.commands.proxy import serve_config
from voxproxy.core.dialects.twilio import TwilioCallerWire
from voxproxy.core.errors import ConfigError
from voxproxy.proxy.server import EventsConfig, ProxyServer, ServeConfig
from voxproxy.proxy.websocket import ProxyConfig
from voxproxy.receipts.journal import journal_path
from voxproxy.receipts.store import query_receipts
from voxproxy.receipts.writer import read_receipts
from voxproxy.telemetry import TelemetryConfig
from voxproxy.transports.websocket import RelayConfig

TOKEN = "server-test-token-0123456789"
SECRET = b"fault-secret"


async def test_a_served_call_reaches_the_file_the_store_and_takes_posted_events(
    tmp_path: Path,
) -> None:
    receipts, store = tmp_path / "r.jsonl", tmp_path / "r.db"
    async with router_agent() as agent:
        server = ProxyServer(
            ServeConfig(
                ProxyConfig(RelayConfig(agent.url), dialect="twilio", secret=SECRET),
                listen=("127.0.0.1", 0),
                receipts=receipts,
                store=store,
                events=EventsConfig(TOKEN, ("127.0.0.1", 0)),
                drain_timeout_s=2.0,
            )
        )
        await server.start()
        try:
            assert server.url == f"ws://127.0.0.1:{server.port}"
            sid = call_sid("served")
            wire = TwilioCallerWire("MZ" + sid[2:], sid)
            async with connect(f"{server.url}/echo/served", compression=None) as ws:
                await ws.send(wire.connected())
                await ws.send(wire.start())
                await ws.send(wire.media(ULAW_SILENCE))
                assert await asyncio.wait_for(ws.recv(), 10)  # echoed: the call is live
                async with aiohttp.ClientSession() as http:
                    assert server.events_api is not None
                    url = f"http://127.0.0.1:{server.events_api.port}/v1/calls/{sid}/events"
                    body = {"type": "tool.started", "operation_id": "op-1", "tool": "book"}
                    headers = {"Authorization": f"Bearer {TOKEN}"}
                    async with http.post(url, json=body, headers=headers) as answer:
                        assert answer.status == 202, await answer.text()
                assert journal_path(receipts).exists()  # the call is journalled while open
                await ws.send(wire.stop())
            await wait_until(lambda: server.writer is not None and server.writer.written == 1)
        finally:
            await server.stop()
    written = list(read_receipts(receipts))
    assert [r.call for r in written] == [call_hash(sid)]
    assert written[0].terminal == "completed"
    assert written[0].verdict is not None  # judged under the default policy
    assert [e.kind for e in written[0].events] == ["tool.started"]
    assert [r.call for r in query_receipts(store)] == [call_hash(sid)]
    assert not journal_path(receipts).exists()  # closed with no call left open


async def test_every_listener_s_readiness_says_whether_a_caller_would_be_admitted(
    tmp_path: Path,
) -> None:
    """Issue 35 item 1: the health paths of /metrics' port and the event API's answer
    as the proxy port's: 503 and why while a caller would be refused, liveness 200."""
    async with router_agent() as agent:
        server = ProxyServer(
            ServeConfig(
                ProxyConfig(
                    RelayConfig(agent.url, max_calls=1),
                    dialect="twilio",
                    secret=SECRET,
                    max_loop_lag_ms=None,  # the test's own loop: no refusal on its lag
                ),
                listen=("127.0.0.1", 0),
                receipts=tmp_path / "r.jsonl",
                telemetry=TelemetryConfig(metrics_listen=("127.0.0.1", 0)),
                events=EventsConfig(TOKEN, ("127.0.0.1", 0)),
                drain_timeout_s=2.0,
            )
        )
        await server.start()
        assert server.events_api is not None and server.telemetry.metrics_port is not None
        ports = {
            "proxy": server.port,
            "metrics": server.telemetry.metrics_port,
            "events": server.events_api.port,
        }

        async def health(path: str) -> dict[str, tuple[int, str]]:
            got = {}
            async with aiohttp.ClientSession() as http:
                for name, port in ports.items():
                    async with http.get(f"http://127.0.0.1:{port}{path}") as answer:
                        got[name] = (answer.status, await answer.text())
            return got

        try:
            idle = await health("/readyz")
            sid = call_sid("held")
            wire = TwilioCallerWire("MZ" + sid[2:], sid)
            async with connect(f"{server.url}/echo/held", compression=None) as ws:
                await ws.send(wire.start())
                await ws.send(wire.media(ULAW_SILENCE))
                await asyncio.wait_for(ws.recv(), 10)
                full, live = await health("/healthz"), await health("/livez")
        finally:
            await server.stop()
    ok = (200, "ok\n")
    assert idle == dict.fromkeys(ports, ok)
    assert full == dict.fromkeys(
        ports, (503, "refusing callers: at capacity (1 calls in progress)\n")
    )
    assert live == dict.fromkeys(ports, ok)
    assert server.refusal() == "shutting down"


async def test_a_proxy_that_cannot_listen_leaves_the_receipts_and_journal_alone(
    tmp_path: Path,
) -> None:
    """A second proxy started by mistake on a served port and the same receipts file
    must not take the running proxy's calls in progress for crashed ones."""
    import socket

    from voxproxy.proxy.listenclaim import AddressInUse

    receipts = tmp_path / "r.jsonl"
    journal = journal_path(receipts)
    running = (
        '{"open":"k1","started_at":"2026-01-01T00:00:00.000Z","start_wall_ns":1,"call":"c_1"}\n'
    )
    journal.write_text(running)
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        server = ProxyServer(
            ServeConfig(
                ProxyConfig(RelayConfig("ws://127.0.0.1:1"), secret=SECRET),
                listen=("127.0.0.1", listener.getsockname()[1]),
                receipts=receipts,
            )
        )
        with pytest.raises(AddressInUse, match="already served by another process"):
            await server.start()
    assert not receipts.exists()
    assert journal.read_text() == running


def test_the_cli_parses_into_a_serve_config(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        [
            "proxy",
            "--upstream",
            "ws://127.0.0.1:1",
            "--listen",
            "0.0.0.0:9000",
            "--receipts",
            str(tmp_path / "r.jsonl"),
            "--drain-timeout",
            "3",
            "--events-token",
            TOKEN,
        ]
    )
    config = serve_config(args)
    assert isinstance(config, ServeConfig) and config.transport == "websocket"
    assert config.listen == ("0.0.0.0", 9000)
    assert (config.receipts, config.drain_timeout_s) == (str(tmp_path / "r.jsonl"), 3.0)
    assert config.events is not None and config.events.token == TOKEN
    webrtc = serve_config(
        build_parser().parse_args(["proxy", "--transport", "webrtc", "--upstream", "http://a"])
    )
    assert webrtc.transport == "webrtc"
    with pytest.raises(ConfigError, match="at least"):
        EventsConfig("short", ("127.0.0.1", 1))


def test_every_subcommand_reads_its_flags_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VOXPROXY_MOCK_AGENT_DELAY_MS", "250")
    monkeypatch.setenv("VOXPROXY_RECEIPTS_JSON", "true")
    args = build_parser().parse_args(["mock-agent"])
    assert args.delay_ms == 250.0
    assert build_parser().parse_args(["receipts"]).json is True
    assert build_parser().parse_args(["mock-agent", "--delay-ms", "10"]).delay_ms == 10.0
    # A variable that does not parse fails only the subcommands that have the flag.
    monkeypatch.setenv("VOXPROXY_MOCK_AGENT_DELAY_MS", "soon")
    assert build_parser().parse_args(["proxy", "--upstream", "ws://a"]).upstream == "ws://a"
    with pytest.raises(ConfigError, match="VOXPROXY_MOCK_AGENT_DELAY_MS='soon'"):
        build_parser().parse_args(["mock-agent"])
    monkeypatch.setenv("VOXPROXY_PROXY_DIALECT", "morse")
    with pytest.raises(ConfigError, match="not one of"):
        build_parser().parse_args(["proxy", "--upstream", "ws://a"])
    monkeypatch.delenv("VOXPROXY_PROXY_DIALECT")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["load", "--help"])
    assert "VOXPROXY_LOAD_<OPTION>" in capsys.readouterr().out
