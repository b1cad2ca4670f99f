"""Fault injection through a live proxy on loopback.

Each test runs one faulty call beside two healthy Twilio calls on the same
proxy and the same agent (the agent picks its behaviour by the request path,
see ``faultkit``). In every case: the healthy calls are untouched (every frame
echoed byte for byte, one clean receipt each), the faulty call is forwarded as
far as its wire allows, and every call that started gets exactly one receipt
with the right terminal state.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from dataclasses import replace
from typing import Any

import pytest
from support.faultkit import (
    ULAW_SILENCE,
    assert_healthy,
    call_hash,
    call_sid,
    healthy_call,
    media,
    receipts_of,
    refused,
    route_of,
    router_agent,
    running_proxy,
    settle,
    twilio_start,
)
from support.waiting import wait_until
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from voxproxy.core.dialects.twilio import TwilioCallerWire
from voxproxy.core.events import Audio
from voxproxy.core.receipt import Receipt


async def with_healthy(port: int, fault: Any) -> tuple[Any, list[Any]]:
    """Run ``fault`` beside two healthy calls; returns its result and theirs."""
    res = await asyncio.gather(fault, healthy_call(port, "ok-a"), healthy_call(port, "ok-b"))
    return res[0], list(res[1:])


# -- the agent misbehaves ----------------------------------------------------------------------


@pytest.mark.slow
async def test_agent_refuses_the_handshake() -> None:
    async with router_agent() as agent:
        agent.refuse["refuse"] = 403
        async with running_proxy(agent.url) as (port, receipts, proxy):
            refusal = refused(f"ws://127.0.0.1:{port}/refuse/x")
            answer, healthy = await with_healthy(port, refusal)
            status = answer.status_code
            await settle(receipts, 3, proxy)
    assert status == 403
    for h in healthy:
        assert_healthy(h, receipts)
    [r] = [r for r in receipts if r.terminal == "upstream_refused"]
    assert r.close.upstream_status == 403 and r.turns == []


@pytest.mark.slow
async def test_agent_accepts_then_closes() -> None:
    async def close_soon(ws: ServerConnection) -> None:
        await ws.recv()  # the caller's start
        for _ in range(3):
            await ws.send(media(base64.b64encode(ULAW_SILENCE).decode()))
        await ws.close(4001, "agent hangs up")

    async with router_agent(close=close_soon) as agent:
        async with running_proxy(agent.url) as (port, receipts, proxy):
            sid = call_sid("closer")

            async def call() -> tuple[int, int | None, str | None]:
                got = 0
                async with connect(f"ws://127.0.0.1:{port}/close/x") as ws:
                    await ws.send(twilio_start(sid))
                    with pytest.raises(ConnectionClosed):
                        while True:
                            await ws.recv()
                            got += 1
                return got, ws.close_code, ws.close_reason

            (got, code, reason), healthy = await with_healthy(port, call())
            await settle(receipts, 3, proxy)
    assert (got, code, reason) == (3, 4001, "agent hangs up")
    for h in healthy:
        assert_healthy(h, receipts)
    [r] = receipts_of(receipts, sid)
    assert r.terminal == "agent_closed"
    assert (r.close.initiator, r.close.agent_code, r.close.caller_code) == ("agent", 4001, 4001)
    assert r.traffic.agent_to_caller_messages == 3


@pytest.mark.slow
async def test_agent_that_stalls_mid_call_is_dropped_after_the_stall_timeout() -> None:
    """The agent stops reading and sending while the caller keeps talking, as fast as it can.

    The proxy's buffer toward the agent fills, it stops reading the caller (back-pressure),
    and after ``stall_timeout_s`` it drops the agent: the caller gets 1014, one receipt says
    ``agent_vanished``. The healthy calls meanwhile go on untouched.
    """
    stalled, release = asyncio.Event(), asyncio.Event()

    async def stall(ws: ServerConnection) -> None:
        n = 0
        async for _m in ws:
            n += 1
            if n == 20:
                ws.transport.pause_reading()
                stalled.set()
                await release.wait()  # never reads, never answers (until the test is over)

    async with router_agent(stall=stall) as agent:
        async with running_proxy(agent.url, stall_timeout_s=1.0, close_timeout_s=0.5) as (
            port,
            receipts,
            proxy,
        ):
            sid = call_sid("staller")

            async def call() -> tuple[int, int | None, float]:
                wire = TwilioCallerWire("MZ" + sid[2:], sid)
                chunk = wire.media(os.urandom(8000))  # a second of audio per message
                sent = 0
                async with connect(
                    f"ws://127.0.0.1:{port}/stall/x", max_queue=None, close_timeout=1
                ) as ws:
                    await ws.send(wire.start())
                    t0 = time.monotonic()
                    with pytest.raises(ConnectionClosed):
                        while True:  # until the proxy gives up on the agent
                            await ws.send(chunk)
                            sent += 1
                    return sent, ws.close_code, time.monotonic() - t0
                raise AssertionError("unreachable")

            (sent, code, took), healthy = await with_healthy(port, call())
            await settle(receipts, 3, proxy)
            release.set()
    assert stalled.is_set() and sent > 20
    assert code == 1014
    assert 0.9 < took < 6.0
    for h in healthy:
        assert_healthy(h, receipts)
    [r] = receipts_of(receipts, sid)
    assert r.terminal == "agent_vanished"
    assert r.close.initiator == "proxy"


@pytest.mark.slow
async def test_agent_sends_garbage() -> None:
    garbage: list[bytes | str] = [
        os.urandom(157),
        "{not json",
        "\x00\ufffd\u202e plain text",
        json.dumps({"event": "media", "media": {"payload": "!!"}}),
        json.dumps({"event": "media", "media": "not an object"}),
        json.dumps({"event": "mark", "mark": {"name": 7}}),
        json.dumps(["an", "array"]),
        "",
        b"",
    ]

    async def spew(ws: ServerConnection) -> None:
        await ws.recv()
        for m in garbage:
            await ws.send(m)
        await ws.wait_closed()

    async with router_agent(garbage=spew) as agent:
        async with running_proxy(agent.url) as (port, receipts, proxy):
            sid = call_sid("garbage")

            async def call() -> list[bytes | str]:
                async with connect(f"ws://127.0.0.1:{port}/garbage/x", max_size=None) as ws:
                    await ws.send(twilio_start(sid))
                    got = [await ws.recv() for _ in garbage]
                    await ws.send(TwilioCallerWire("MZ" + sid[2:], sid).stop())
                return got

            got, healthy = await with_healthy(port, call())
            await settle(receipts, 3, proxy)
    assert got == garbage  # forwarded unchanged, types kept
    for h in healthy:
        assert_healthy(h, receipts)
    [r] = receipts_of(receipts, sid)
    assert r.terminal == "completed"
    assert r.traffic.agent_to_caller_messages == len(garbage)
    assert r.anomalies.get("measurement_error", 0) == 0
    assert sum(r.anomalies.values()) == len(garbage)


@pytest.mark.slow
@pytest.mark.parametrize("limit", [1 << 20, 16 << 20])
async def test_agent_sends_a_10_mb_frame(limit: int) -> None:
    big = os.urandom(10 << 20)

    async def send_big(ws: ServerConnection) -> None:
        await ws.recv()
        await ws.send(big)
        await ws.wait_closed()

    async with router_agent(big=send_big) as agent:
        async with running_proxy(agent.url, max_message_bytes=limit) as (port, receipts, proxy):
            sid = call_sid("big")

            async def call() -> tuple[bytes | str | None, int | None]:
                got = None
                async with connect(f"ws://127.0.0.1:{port}/big/x", max_size=None) as ws:
                    await ws.send(twilio_start(sid))
                    try:
                        got = await ws.recv()
                    except ConnectionClosed:
                        return None, ws.close_code
                return got, ws.close_code

            (got, code), healthy = await with_healthy(port, call())
            await settle(receipts, 3, proxy)
    for h in healthy:
        assert_healthy(h, receipts)
    [r] = receipts_of(receipts, sid)
    if limit < len(big):
        assert got is None and code == 1009
        assert r.terminal == "message_too_big"
        assert r.close.agent_code == 1009 and r.anomalies.get("oversized") == 1
    else:
        assert got == big and code == 1000
        assert r.terminal == "caller_closed"
        assert r.traffic.agent_to_caller_bytes == len(big)
        assert r.anomalies == {"unexpected_binary": 1}


# -- the caller misbehaves ---------------------------------------------------------------------


@pytest.mark.slow
async def test_caller_vanishes_at_every_stage() -> None:
    """Without a close: before its request, inside the agent's handshake, and mid-call."""
    async with router_agent(slow=lambda ws: ws.wait_closed()) as agent:
        agent.delay_handshake_s["slow"] = 0.5
        async with running_proxy(agent.url) as (port, receipts, proxy):
            mid = call_sid("mid")

            async def vanish() -> None:
                # 1. TCP only, then half a request: not a started call, no receipt.
                _, w = await asyncio.open_connection("127.0.0.1", port)
                w.write(b"GET / HTTP/1.1\r\nHost: x\r\n")
                await asyncio.sleep(0.05)
                w.transport.abort()
                # 2. A full request, gone while the agent is still deciding.
                _, w = await asyncio.open_connection("127.0.0.1", port)
                w.write(
                    b"GET /slow/x HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                    b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                    b"Sec-WebSocket-Version: 13\r\n\r\n"
                )
                await wait_until(
                    lambda: any(route_of(p) == "slow" for p in agent.asked),
                    what="the agent deciding",
                )
                w.transport.abort()
                # 3. Mid-call, after the start and some audio.
                ws = await connect(f"ws://127.0.0.1:{port}/echo/mid")
                await ws.send(twilio_start(mid))
                for _ in range(5):
                    await ws.send(TwilioCallerWire("MZ" + mid[2:], mid).media(ULAW_SILENCE))
                    await ws.recv()
                ws.transport.abort()

            _, healthy = await with_healthy(port, vanish())
            await settle(receipts, 4, proxy)
            assert proxy.active == 0 and not proxy.server.relays
    for h in healthy:
        assert_healthy(h, receipts)
    vanished = [r for r in receipts if r.terminal == "caller_vanished"]
    assert len(vanished) == 2
    assert len(receipts_of(receipts, mid)) == 1
    [in_handshake] = [r for r in vanished if r.call != call_hash(mid)]
    assert in_handshake.upstream_connect_ms is None


@pytest.mark.slow
async def test_caller_reconnects_at_once() -> None:
    """A dropped caller that dials straight back with the same call ids: two calls, two receipts."""
    async with router_agent() as agent:
        async with running_proxy(agent.url) as (port, receipts, proxy):
            sid = call_sid("again")
            wire = TwilioCallerWire("MZ" + sid[2:], sid)

            async def reconnect() -> list[bytes | str]:
                first = await connect(f"ws://127.0.0.1:{port}/echo/again")
                await first.send(wire.start())
                await first.send(wire.media(ULAW_SILENCE))
                await first.recv()
                first.transport.abort()
                got = []
                async with connect(f"ws://127.0.0.1:{port}/echo/again") as second:
                    await second.send(wire.start())
                    for _ in range(10):
                        await second.send(wire.media(ULAW_SILENCE))
                        got.append(await second.recv())
                    await second.send(wire.stop())
                return got

            got, healthy = await with_healthy(port, reconnect())
            await settle(receipts, 4, proxy)
            assert len(proxy.live) == 0
    assert len(got) == 10
    for h in healthy:
        assert_healthy(h, receipts)
    mine = receipts_of(receipts, sid)  # the same wire id: the same pseudonymous call id
    assert sorted(r.terminal for r in mine) == ["caller_vanished", "completed"]


@pytest.mark.slow
async def test_caller_floods() -> None:
    """A caller sends a minute of audio as fast as it can: the agent gets all of it, in
    order, the receipt counts all of it, and the calls beside it are untouched."""
    n = 3000
    counted: list[int] = []

    async def count(ws: ServerConnection) -> None:
        async for m in ws:
            assert isinstance(m, str)
            msg = json.loads(m)
            if msg["event"] == "media":
                counted.append(int(msg["media"]["chunk"]))

    async with router_agent(count=count) as agent:
        async with running_proxy(agent.url) as (port, receipts, proxy):
            sid = call_sid("flood")

            async def flood() -> float:
                wire = TwilioCallerWire("MZ" + sid[2:], sid)
                async with connect(f"ws://127.0.0.1:{port}/count/x") as ws:
                    await ws.send(wire.start())
                    t0 = time.monotonic()
                    for _ in range(n):
                        await ws.send(wire.media(ULAW_SILENCE))
                    took = time.monotonic() - t0
                    await wait_until(lambda: len(counted) == n)
                    await ws.send(wire.stop())
                return took

            took, healthy = await with_healthy(port, flood())
            await settle(receipts, 3, proxy)
    assert counted == list(range(1, n + 1))
    assert took < n * 0.02 / 4  # really a flood: far faster than real time
    for h in healthy:
        assert_healthy(h, receipts)
        assert max(h.rtt_s) < 2.0
    [r] = receipts_of(receipts, sid)
    assert r.terminal == "completed"
    assert r.traffic.caller_to_agent_messages == n + 2
    assert r.traffic.caller_audio_ms == n * 20


# -- the measurement plane fails ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("lenient_sessions")  # counts injected failures
async def test_a_decoder_that_raises_on_some_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    from voxproxy.core.dialects import twilio

    real = twilio.TwilioDecoder.decode

    def flaky(self: twilio.TwilioDecoder, direction: Any, payload: Any, t_ns: int) -> Any:
        if isinstance(payload, str) and "POISON" in payload:
            raise RuntimeError("injected decoder failure")
        return real(self, direction, payload, t_ns)

    monkeypatch.setattr(twilio.TwilioDecoder, "decode", flaky)
    async with router_agent() as agent:
        async with running_proxy(agent.url) as (port, receipts, proxy):
            sid = call_sid("poison")
            wire = TwilioCallerWire("MZ" + sid[2:], sid)

            async def call() -> tuple[list[str], list[bytes | str]]:
                sent, got = [], []
                async with connect(f"ws://127.0.0.1:{port}/echo/poison") as ws:
                    await ws.send(wire.start())
                    for i in range(12):
                        m = wire.media(ULAW_SILENCE)
                        if i % 3 == 0:
                            m = m[:-1] + ', "x": "POISON"}'
                        sent.append(m)
                        await ws.send(m)
                        got.append(await ws.recv())
                    await ws.send(wire.stop())
                return sent, got

            (sent, got), healthy = await with_healthy(port, call())
            await settle(receipts, 3, proxy)
    assert got == sent
    for h in healthy:
        assert_healthy(h, receipts)
    [r] = receipts_of(receipts, sid)
    # 4 poisoned frames each way (the agent echoes them), nothing else lost.
    assert r.anomalies == {"measurement_error": 8}
    assert r.terminal == "completed" and not r.measurement_disabled


class _Unusable:
    """Audio samples that are no array: any use of them raises."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"injected failure in session (pcm.{name})")


@pytest.mark.slow
@pytest.mark.usefixtures("lenient_sessions")  # counts injected failures
@pytest.mark.parametrize("where", ["session", "receipt", "setup"])
async def test_a_broken_measurement_component_never_costs_a_receipt(
    monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The session core, the receipt builder or the decoder factory raise: forwarding goes on
    and the call still gets its one receipt (flagged), for every call of the proxy."""
    from voxproxy.core.dialects import twilio
    from voxproxy.core.session import receipt as receipt_module
    from voxproxy.proxy import websocket as proxy_module

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"injected failure in {where}")

    if where == "session":
        # The core itself fails on every frame of audio: the decoder (a dynamic call, also
        # from the compiled core, voxproxy/native.py) hands it audio it cannot take.
        real_decode = twilio.TwilioDecoder.decode

        def unusable_audio(self: twilio.TwilioDecoder, *args: Any) -> list[Any]:
            events = real_decode(self, *args)
            return [replace(ev, pcm=_Unusable()) if type(ev) is Audio else ev for ev in events]

        monkeypatch.setattr(twilio.TwilioDecoder, "decode", unusable_audio)
    elif where == "receipt":
        real = receipt_module.Receipt
        attempts: list[int] = []

        def first_attempt_fails(*args: Any, **kwargs: Any) -> Receipt:
            attempts.append(1)
            if len(attempts) % 2:  # each call's first try (closes never interleave)
                boom()
            return real(*args, **kwargs)

        monkeypatch.setattr(receipt_module, "Receipt", first_attempt_fails)
    else:
        monkeypatch.setattr(proxy_module, "make_decoder", boom)
    async with router_agent() as agent:
        async with running_proxy(agent.url) as (port, receipts, proxy):
            healthy = await asyncio.gather(*(healthy_call(port, f"c{i}") for i in range(3)))
            await settle(receipts, 3, proxy)
    for h in healthy:
        assert h.echoed == h.sent
    for r in receipts:
        # Once measurement is off (or never on) nothing sees the Twilio stop: to the receipt
        # the caller simply closed.
        assert r.terminal == ("completed" if where == "receipt" else "caller_closed")
        assert r.anomalies.get("measurement_error", 0) >= 1
        if where == "session":
            assert r.measurement_disabled  # it gave up after repeated errors
        else:
            assert r.measurement_disabled and r.turns == []
        assert r.traffic.caller_to_agent_messages == 43
