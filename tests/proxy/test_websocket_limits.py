"""Limits and security: concurrent calls, handshake and idle timeouts, TLS both ways,
the event API's token and loopback default, and logs that never carry secrets or audio.

``--max-calls``: a caller over the limit is refused at the handshake with HTTP 503,
``Retry-After: 1`` and a reason, before any agent connection or measurement (so no
receipt), and counted (``Proxy.refused_calls``; logged). Refusing at the handshake
rather than accepting and closing with 1013 costs an overloaded proxy nothing and
every client library reports an HTTP status plainly.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import ipaddress
import logging
import os
import re
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from support.faultkit import (
    ULAW_SILENCE,
    assert_healthy,
    call_sid,
    healthy_call,
    refused,
    router_agent,
    running_proxy,
)
from support.tlskit import ca_signed_files
from support.waiting import wait_until
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from voxproxy.cli import build_parser
from voxproxy.commands.proxy import serve_config
from voxproxy.core.dialects.twilio import TwilioCallerWire
from voxproxy.core.receipt import Receipt
from voxproxy.harness.ports import free_port
from voxproxy.proxy.server import redact_url
from voxproxy.proxy.websocket import Proxy
from voxproxy.transports.websocket import RelayConfig

# -- concurrent calls ---------------------------------------------------------------------------


async def test_calls_over_max_calls_are_refused_with_503_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with router_agent() as agent:
        async with running_proxy(agent.url, max_calls=2) as (port, receipts, proxy):
            first = [asyncio.create_task(healthy_call(port, f"in{i}", frames=30)) for i in range(2)]
            await wait_until(lambda: proxy.server.admission.active == 2)
            refusals = []
            for _ in range(3):
                refusals.append(await refused(f"ws://127.0.0.1:{port}/echo/over"))
            assert proxy.refused_calls == 3
            healthy = await asyncio.gather(*first)
            await wait_until(lambda: proxy.server.admission.active == 0)
            # Room again: the next caller is let in.
            again = await healthy_call(port, "later", frames=5)
            await wait_until(lambda: len(receipts) == 3)
    # Checked once the proxy has stopped: a late receipt would have been written by then.
    for r in refusals:
        assert r.status_code == 503
        assert r.headers["Retry-After"] == "1"
        assert b"at capacity (2 calls in progress)" in r.body
    for h in [*healthy, again]:
        assert_healthy(h, receipts)
    assert len(receipts) == 3  # the refused callers never started a call: no receipt
    assert proxy.server.admission.active == 0
    logged = [r.getMessage() for r in caplog.records if "at capacity" in r.getMessage()]
    assert len(logged) == 2  # the 1st, 2nd, 4th, 8th ... refusal: never a flood


async def _health(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}{path}") as answer:
            return answer.status, await answer.text()


async def test_readiness_says_503_and_why_while_callers_would_be_refused() -> None:
    """Issue 35 item 1: /healthz answered 200 while every caller was refused with 503, so a
    load balancer or a Kubernetes readiness probe kept the proxy in service."""
    ok = (200, "ok\n")
    async with router_agent() as agent:
        async with running_proxy(agent.url, max_calls=1) as (port, receipts, proxy):
            idle = {p: await _health(port, p) for p in ("/healthz", "/readyz", "/livez")}
            async with connect(f"ws://127.0.0.1:{port}/echo/held", compression=None) as ws:
                sid = call_sid("held")
                wire = TwilioCallerWire("MZ" + sid[2:], sid)
                await ws.send(wire.start())
                await ws.send(wire.media(ULAW_SILENCE))
                await asyncio.wait_for(ws.recv(), 10)  # the call is up: the one slot is taken
                full = {p: await _health(port, p) for p in ("/healthz", "/readyz", "/livez")}
                refused_meanwhile = proxy.refused_calls
            await wait_until(lambda: proxy.server.admission.active == 0)
            again = await _health(port, "/healthz")
            proxy.server.admission.overloaded = lambda: "measurement is shedding"
            overloaded = {p: await _health(port, p) for p in ("/healthz", "/livez")}
            await wait_until(lambda: len(receipts) == 1)
    assert idle == dict.fromkeys(("/healthz", "/readyz", "/livez"), ok)
    at_capacity = (503, "refusing callers: at capacity (1 calls in progress)\n")
    assert full == {"/healthz": at_capacity, "/readyz": at_capacity, "/livez": ok}
    assert again == ok
    shedding = (503, "refusing callers: overloaded (measurement is shedding)\n")
    assert overloaded == {"/healthz": shedding, "/livez": ok}
    # Asking is not a call: nothing refused, counted or written.
    assert refused_meanwhile == 0 and proxy.refused_calls == 0
    assert len(receipts) == 1


def _relay(args: argparse.Namespace) -> RelayConfig:
    relay: RelayConfig = serve_config(args).proxy.relay
    return relay


def test_limit_flags_and_their_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    base = ["proxy", "--upstream", "ws://127.0.0.1:1"]
    cfg = _relay(build_parser().parse_args(base))
    # Safe defaults: a cap on calls, and idle calls are not held forever.
    assert (cfg.max_calls, cfg.stall_timeout_s, cfg.idle_timeout_s) == (200, 30.0, 120.0)
    off = [*base, "--max-calls", "0", "--idle-timeout", "0"]
    cfg = _relay(build_parser().parse_args(off))
    assert (cfg.max_calls, cfg.idle_timeout_s) == (None, None)
    assert cfg.max_message_bytes == 1 << 20
    args = [*base, "--max-calls", "300", "--stall-timeout", "0", "--idle-timeout", "20"]
    cfg = _relay(build_parser().parse_args([*args, "--max-message-bytes", "4096"]))
    assert (cfg.max_calls, cfg.stall_timeout_s, cfg.idle_timeout_s) == (300, None, 20.0)
    assert cfg.max_message_bytes == 4096
    monkeypatch.setenv("VOXPROXY_PROXY_MAX_CALLS", "250")
    monkeypatch.setenv("VOXPROXY_PROXY_STALL_TIMEOUT", "12.5")
    cfg = _relay(build_parser().parse_args(base))
    assert (cfg.max_calls, cfg.stall_timeout_s) == (250, 12.5)
    with pytest.raises(SystemExit):
        build_parser().parse_args([*base, "--max-calls", "-1"])


# -- timeouts -----------------------------------------------------------------------------------


async def test_a_caller_that_never_sends_its_handshake_is_dropped() -> None:
    async with router_agent() as agent:
        async with running_proxy(agent.url, handshake_timeout_s=0.3) as (port, receipts, proxy):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTTP/1.1\r\n")  # ... and nothing more
            t0 = time.monotonic()
            assert await asyncio.wait_for(reader.read(), 5) == b""  # dropped
            took = time.monotonic() - t0
            await wait_until(lambda: not proxy.server.relays)
            writer.close()
    assert 0.2 < took < 3.0
    assert receipts == []


async def test_an_idle_call_is_closed_with_1001_and_a_receipt() -> None:
    async def silent(ws: ServerConnection) -> None:
        await ws.wait_closed()

    async with router_agent(silent=silent) as agent:
        async with running_proxy(agent.url, idle_timeout_s=0.4) as (port, receipts, _):
            sid = call_sid("idle")
            async with connect(f"ws://127.0.0.1:{port}/silent/x") as ws:
                await ws.send(TwilioCallerWire("MZ" + sid[2:], sid).start())
                t0 = time.monotonic()
                with pytest.raises(ConnectionClosed):
                    await ws.recv()
                took = time.monotonic() - t0
            await wait_until(lambda: len(receipts) == 1)
    assert ws.close_code == 1001 and ws.close_reason == "idle timeout"
    assert 0.3 < took < 3.0
    assert receipts[0].terminal == "idle_timeout" and receipts[0].close.initiator == "proxy"
    assert agent.close_codes["/silent/x"] == 1001


@pytest.mark.slow
async def test_shutdown_during_the_agent_handshake_answers_503() -> None:
    async with router_agent(slow=lambda ws: ws.wait_closed()) as agent:
        agent.delay_handshake_s["slow"] = 1.0
        async with running_proxy(agent.url) as (port, receipts, proxy):

            async def caller() -> int:
                return (await refused(f"ws://127.0.0.1:{port}/slow/x")).status_code

            task = asyncio.create_task(caller())
            await wait_until(lambda: proxy.active == 1)
            await proxy.stop(drain_s=0.0)
            status = await asyncio.wait_for(task, 5)
            await wait_until(lambda: len(receipts) == 1)
    assert status == 503
    assert receipts[0].terminal == "proxy_shutdown"


# -- TLS ----------------------------------------------------------------------------------------


async def test_wss_caller_to_proxy_to_wss_agent(tmp_path: Path) -> None:
    """TLS on both legs, configured by the CLI's own flags; an agent whose certificate the
    proxy cannot verify is a 502, never a plain-text fallback."""
    ca, cert, key = ca_signed_files(tmp_path)
    agent_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    agent_ctx.load_cert_chain(cert, key)
    caller_ctx = ssl.create_default_context(cafile=str(ca))
    seen_tls: list[bool] = []

    async def echo(ws: ServerConnection) -> None:
        seen_tls.append(ws.transport.get_extra_info("ssl_object") is not None)
        async for m in ws:
            if isinstance(m, str) and '"media"' in m:
                await ws.send(m)

    async with serve(echo, "127.0.0.1", 0, ssl=agent_ctx, compression=None) as server:
        agent_port = next(iter(server.sockets)).getsockname()[1]
        results: dict[str, Any] = {}
        for trusted in (True, False):
            flags = ["proxy", "--upstream", f"wss://127.0.0.1:{agent_port}", "--dialect", "twilio"]
            flags += ["--tls-cert", str(cert), "--tls-key", str(key), "--secret", "fault-secret"]
            if trusted:
                flags += ["--upstream-ca", str(ca)]
            args = build_parser().parse_args(flags)
            receipts: list[Receipt] = []
            served = serve_config(args)
            proxy = Proxy(served.proxy, sinks=[receipts.append])
            port = await proxy.start("127.0.0.1", 0, served.tls)
            try:
                if trusted:
                    results["call"] = await healthy_call(
                        port, "tls", frames=10, scheme="wss", ssl=caller_ctx
                    )
                    with pytest.raises((ConnectionClosed, OSError, InvalidHandshake)):
                        # A plain-text caller gets nowhere on the TLS port.
                        async with connect(f"ws://127.0.0.1:{port}/echo/x", open_timeout=3):
                            pass
                    # ... and leaves nothing behind (a failed TLS handshake never reaches
                    # connection_made: the relay must not wait for it).
                    await wait_until(lambda p=proxy: not p.server.relays)  # type: ignore[misc]
                else:
                    results["status"] = (
                        await refused(f"wss://127.0.0.1:{port}/echo/x", ssl=caller_ctx)
                    ).status_code
                await wait_until(lambda r=receipts: len(r) >= 1)  # type: ignore[misc]
                results[f"receipts_{trusted}"] = list(receipts)
            finally:
                await proxy.stop()
    assert_healthy(results["call"], results["receipts_True"])
    assert seen_tls and all(seen_tls)
    assert results["status"] == 502
    assert [r.terminal for r in results["receipts_False"]] == ["upstream_unreachable"]


# -- the event API and logs, on a real process --------------------------------------------------

SECRET = "hmac-secret-2f9c51d0a7"
TOKEN = "events-token-7b1e3c99d4e5f6a7"
BEARER = "caller-bearer-91c2e8f0aa"
COOKIE = "cookie-session-5d6e7f8091"
URL_PASSWORD = "url-password-3c4d5e6f70"
URL_KEY = "url-apikey-8a9b0c1d2e"
AUDIO = bytes(range(256)) * 2  # a distinctive payload: its base64 must not be logged


async def test_event_api_needs_its_token_binds_loopback_and_logs_hold_no_secrets(
    tmp_path: Path,
) -> None:
    """One proxy process at debug level, with a secret, an event API token, credentials in
    the upstream URL, and callers sending Authorization and Cookie headers and audio."""
    async with router_agent() as agent:
        agent.refuse["refuse"] = 401
        port = free_port()
        upstream = f"ws://user:{URL_PASSWORD}@127.0.0.1:{agent.port}/?api_key={URL_KEY}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VOXPROXY_", "OTEL_"))}
        env |= {"VOXPROXY_PROXY_SECRET": SECRET, "VOXPROXY_PROXY_EVENTS_TOKEN": TOKEN}
        cmd = [sys.executable, "-m", "voxproxy.cli", "proxy", "--workers", "1"]
        cmd += ["--listen", f"127.0.0.1:{port}"]
        cmd += ["--upstream", upstream, "--dialect", "twilio", "--log-level", "debug"]
        cmd += ["--receipts", str(tmp_path / "r.jsonl"), "--events-listen", ":0"]
        cmd += ["--metrics-listen", ":0", "--drain-timeout", "0"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            listening = await _wait_listening(proc, port)
            events_port = await _find_event_api(set(listening) - {port})
            headers = {"Authorization": f"Bearer {BEARER}", "Cookie": f"session={COOKIE}"}
            sid = call_sid("audit")
            wire = TwilioCallerWire("MZ" + sid[2:], sid)
            async with connect(f"ws://127.0.0.1:{port}/echo/a", additional_headers=headers) as ws:
                await ws.send(wire.start())
                for _ in range(5):
                    await ws.send(wire.media(AUDIO))
                    await ws.recv()
                statuses = await _post_events(events_port, sid)  # while the call is live
                await ws.send("{broken json " + BEARER)
                await ws.send(wire.stop())
            with pytest.raises(InvalidStatus):
                async with connect(f"ws://127.0.0.1:{port}/refuse/a", additional_headers=headers):
                    pass
            proc.send_signal(signal.SIGTERM)
            out, err = await asyncio.to_thread(proc.communicate, timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=5)
    assert proc.returncode == 0
    assert statuses == {"none": 401, "wrong": 401, "basic": 401, "right": 202}
    # Every listening socket of the process (calls, event API, /metrics) is on loopback
    # when no host is given.
    assert len(listening) == 3 and set(listening.values()) == {"127.0.0.1"}
    log = out.decode(errors="replace") + err.decode(errors="replace")
    assert f"event API on http://127.0.0.1:{events_port}/" in log
    assert "listening on ws://127.0.0.1" in log and "?***" in log
    secrets = [SECRET, TOKEN, BEARER, COOKIE, URL_PASSWORD, URL_KEY]
    audio_b64 = base64.b64encode(AUDIO).decode()
    leaked = [s for s in [*secrets, audio_b64, audio_b64[:40]] if s in log]
    assert not leaked, f"in the proxy's log: {leaked}"


async def _wait_listening(proc: subprocess.Popen[bytes], port: int) -> dict[int, str]:
    """Wait until the proxy listens on ``port``; then every port it listens on -> address."""

    def listening() -> dict[int, str] | None:
        assert proc.poll() is None, "the proxy exited early"
        found = _listening(proc.pid)
        return found if port in found and len(found) >= 3 else None

    return await wait_until(listening, 15.0, "the proxy listening")


def _listening(pid: int) -> dict[int, str]:
    """The TCP ports process ``pid`` listens on, with their IPv4 address (from /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found: dict[int, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in fh.readlines()[1:]:
                f = line.split()
                if f[3] == "0A" and f[9] in inodes:  # LISTEN, one of its sockets
                    addr_hex, port_hex = f[1].rsplit(":", 1)
                    if len(addr_hex) == 8:
                        addr = str(ipaddress.IPv4Address(int(addr_hex, 16).to_bytes(4, "little")))
                    else:
                        addr = "ipv6:" + addr_hex
                    found[int(port_hex, 16)] = addr
    return found


async def _find_event_api(ports: set[int]) -> int:
    async with aiohttp.ClientSession() as http:
        for p in sorted(ports):
            async with http.post(f"http://127.0.0.1:{p}/v1/calls/x/events", json={}) as resp:
                if resp.status == 401:
                    return p
    raise AssertionError(f"no event API among {ports}")


async def _post_events(port: int, sid: str) -> dict[str, int]:
    url = f"http://127.0.0.1:{port}/v1/calls/{sid}/events"
    event = {"type": "outcome.verified", "verified": True}
    out = {}
    async with aiohttp.ClientSession() as http:
        for label, auth in (
            ("none", None),
            ("wrong", "Bearer not-the-token-at-all-0000"),
            ("basic", f"Basic {TOKEN}"),
            ("right", f"Bearer {TOKEN}"),
        ):
            headers = {"Authorization": auth} if auth else {}
            async with http.post(url, json=event, headers=headers) as resp:
                out[label] = resp.status
    return out


async def test_a_measurement_bug_that_quotes_its_input_does_not_reach_the_log(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from voxproxy.core.session import CallSession

    def quoting(self: Any, direction: Any, payload: Any, t_ns: int, **_: Any) -> Any:
        raise ValueError(f"cannot measure {payload!r}")  # a careless bug, past the core's guard

    monkeypatch.setattr(CallSession, "on_message", quoting)
    caplog.set_level(logging.DEBUG)
    logging.getLogger("websockets").setLevel(logging.WARNING)  # as the CLI sets it
    async with router_agent() as agent:
        async with running_proxy(agent.url) as (port, receipts, _):
            sid = call_sid("quote")
            wire = TwilioCallerWire("MZ" + sid[2:], sid)
            async with connect(
                f"ws://127.0.0.1:{port}/echo/q",
                additional_headers={"Authorization": f"Bearer {BEARER}"},
            ) as ws:
                await ws.send(wire.start())
                await ws.send(wire.media(AUDIO))
                await ws.recv()
            await wait_until(lambda: len(receipts) == 1)
    text = "\n".join(
        caplog.handler.format(r) for r in caplog.records if r.name.startswith("voxproxy")
    )
    assert "measurement failed; the call goes on: ValueError (message withheld)" in text
    assert "quoting" in text  # the traceback still says where
    for secret in (BEARER, base64.b64encode(AUDIO).decode()[:40], sid):
        assert secret not in text
    assert receipts[0].traffic.caller_to_agent_messages == 0  # (the session never saw them)


def test_urls_are_logged_without_credentials_or_query() -> None:
    assert redact_url(f"wss://u:{URL_PASSWORD}@a.example:8443/v1?key={URL_KEY}") == (
        "wss://***@a.example:8443/v1?***"
    )
    assert redact_url("ws://127.0.0.1:9000/agent") == "ws://127.0.0.1:9000/agent"
    assert re.fullmatch(r"ws://\[::1\]:1/", redact_url("ws://[::1]:1/"))
