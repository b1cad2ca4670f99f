"""Hostile and broken peers (issue 14), through a live websocket proxy on loopback.

Each test reproduces one failure the adversarial pass found: a request that is not a
websocket handshake reaching the agent, a caller that keeps a call "alive" with
pings or a frame that never ends, a stalled caller with a flooding agent, endless
empty continuation frames, a ``start`` nested too deep or sent twice, unbounded mark
names. Every loop here is bounded and stops by itself; no test asserts a duration.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import pytest
from support.faultkit import (
    assert_healthy,
    call_hash,
    call_sid,
    healthy_call,
    router_agent,
    running_proxy,
    twilio_start,
)
from support.livecall import sessions_of
from support.rawws import accept_handshake
from support.waiting import wait_until
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.twilio import TwilioAgentWire, TwilioCallerWire
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT
from voxproxy.core.receipt import CloseInfo, Receipt
from voxproxy.core.session import (
    CALLER_AHEAD_TOLERANCE_MS,
    MAX_MARK_NAME_CHARS,
    MAX_PENDING_MARKS,
    CallSession,
)
from voxproxy.proxy.websocket import CallContext
from voxproxy.transports import websocket as ws_transport
from voxproxy.transports.websocket import HEALTH_PATH, MAX_FRAGMENTS

KEY = "dGhlIHNhbXBsZSBub25jZQ=="


def _request(path: str = "/echo/x", version: str = "HTTP/1.1", **headers: str) -> bytes:
    lines = [f"GET {path} {version}", "Host: 127.0.0.1"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


UPGRADE = {"Upgrade": "websocket", "Connection": "Upgrade"}
BAD_REQUESTS = {
    "plain GET": (_request("/"), 426),
    "no key": (_request(**UPGRADE, Sec_WebSocket_Version="13"), 400),
    "bad key": (_request(**UPGRADE, Sec_WebSocket_Key="short", Sec_WebSocket_Version="13"), 400),
    "version 8": (_request(**UPGRADE, Sec_WebSocket_Key=KEY, Sec_WebSocket_Version="8"), 400),
    "HTTP/1.0": (
        _request(version="HTTP/1.0", **UPGRADE, Sec_WebSocket_Key=KEY, Sec_WebSocket_Version="13"),
        505,
    ),
}


async def _silent_agent(ws: ServerConnection) -> None:
    await ws.wait_closed()


async def _exchange(port: int, raw: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    try:
        return await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()


# -- 2. the caller's handshake is checked before the agent is dialled ---------------------------


async def test_requests_that_are_not_handshakes_never_reach_the_agent() -> None:
    dialled: list[str] = []

    async def record(ws: ServerConnection) -> None:
        assert ws.request is not None
        dialled.append(ws.request.path)
        await ws.wait_closed()

    async with router_agent(echo=record) as agent:
        async with running_proxy(agent.url) as (port, receipts, proxy):
            answers = {name: await _exchange(port, raw) for name, (raw, _) in BAD_REQUESTS.items()}
            health = [await _exchange(port, _request(HEALTH_PATH)) for _ in range(20)]
            # A load balancer's check over HTTP/1.0 (HAProxy's default): answered as well.
            health += [await _exchange(port, _request(HEALTH_PATH, version="HTTP/1.0"))]
            await wait_until(lambda: not proxy.server.relays)
            assert proxy.calls == 0 and proxy.active == 0  # nothing counted in calls_total
    # Checked again once the proxy has stopped: a late agent connection or receipt shows now.
    assert proxy.calls == 0
    for name, (_, status) in BAD_REQUESTS.items():
        assert answers[name].startswith(f"HTTP/1.1 {status} ".encode()), (name, answers[name])
    for h in health:
        assert h.startswith(b"HTTP/1.1 200 OK\r\n") and h.endswith(b"\r\n\r\nok\n")
    assert dialled == []
    assert receipts == []


async def test_a_valid_handshake_still_passes_and_the_health_path_upgrades_when_asked() -> None:
    async with router_agent(healthz=_silent_agent) as agent:
        async with running_proxy(agent.url) as (port, receipts, _):
            sid = call_sid("healthz")
            # A websocket to the health path is an ordinary call (its path passes through).
            async with connect(f"ws://127.0.0.1:{port}{HEALTH_PATH}") as ws:
                await ws.send(twilio_start(sid))
            await wait_until(lambda: len(receipts) == 1)
    assert receipts[0].call == call_hash(sid)


# -- 7. idle means no media --------------------------------------------------------------------


@asynccontextmanager
async def _idle_call(name: str) -> AsyncIterator[tuple[ClientConnection, list[Receipt]]]:
    """A call through a proxy with a 0.5 s idle timeout to an agent that says nothing,
    once it has started and sent one frame of media; the block then keeps it idle.
    Waits for its receipt after the block."""
    async with router_agent(silent=_silent_agent) as agent:
        async with running_proxy(agent.url, idle_timeout_s=0.5) as (port, receipts, _):
            sid = call_sid(name)
            async with connect(f"ws://127.0.0.1:{port}/silent/{name}", ping_interval=None) as ws:
                await ws.send(twilio_start(sid))
                await ws.send(TwilioCallerWire("MZ" + sid[2:], sid).media(b"\xff" * 160))
                yield ws, receipts
            await wait_until(lambda: len(receipts) == 1)


async def test_a_caller_that_only_pings_is_closed_as_idle() -> None:
    async with _idle_call("pinger") as (ws, receipts):
        for _ in range(100):  # up to 10 s of pings, one every 100 ms
            with suppress(ConnectionClosed):
                await ws.ping()
            if ws.close_code is not None:
                break
            await asyncio.sleep(0.1)
    assert ws.close_code == 1001 and ws.close_reason == "idle timeout"
    assert receipts[0].terminal == "idle_timeout"


async def test_a_caller_that_sends_only_marks_after_media_is_closed_as_idle() -> None:
    """Whole messages without audio, once the wire has carried some, keep nothing alive,
    though the proxy measures them after forwarding them (proxy/measuring.py, grouped)."""
    async with _idle_call("marker") as (ws, receipts):
        wire = TwilioCallerWire("MZ" + call_sid("marker")[2:], call_sid("marker"))
        for k in range(100):  # up to 10 s of marks, one every 100 ms
            with suppress(ConnectionClosed):
                await ws.send(wire.mark(f"m{k}"))
            if ws.close_code is not None:
                break
            await asyncio.sleep(0.1)
    assert ws.close_code == 1001 and ws.close_reason == "idle timeout"
    assert receipts[0].terminal == "idle_timeout"


@pytest.mark.slow
async def test_a_caller_that_dribbles_a_frame_is_closed_as_idle() -> None:
    async with _idle_call("dribbler") as (ws, receipts):
        # A 100-byte masked text frame, one byte at a time, never finished.
        raw = b"\x81\xe4" + b"\x00\x00\x00\x00" + b"x" * 100
        dribbled = 0
        while dribbled < 100 and ws.protocol.state is State.OPEN:  # up to 10 s
            ws.transport.write(raw[dribbled : dribbled + 1])
            dribbled += 1
            await asyncio.sleep(0.1)
        with suppress(ConnectionClosed, TimeoutError):
            await asyncio.wait_for(ws.recv(), 5)
    assert dribbled < 100, "the proxy never closed the call while the frame dribbled in"
    assert ws.close_code == 1001 and ws.close_reason == "idle timeout"
    assert receipts[0].terminal == "idle_timeout"


async def test_media_keeps_a_call_alive_past_the_idle_timeout() -> None:
    async with router_agent() as agent:
        async with running_proxy(agent.url, idle_timeout_s=0.3) as (port, receipts, _):
            sid = call_sid("talker")
            wire = TwilioCallerWire("MZ" + sid[2:], sid)
            async with connect(f"ws://127.0.0.1:{port}/echo/t") as ws:
                await ws.send(wire.start())
                for _ in range(40):  # 0.8 s of media: well past the idle timeout
                    await ws.send(wire.media(b"\xff" * 160))
                    await ws.recv()
                    await asyncio.sleep(0.02)
                await ws.send(wire.stop())
            await wait_until(lambda: len(receipts) == 1)
    assert receipts[0].terminal == "completed"


# -- 3. caller audio far ahead of real time ---------------------------------------------------

MS = 1_000_000
BIG_ULAW = 780_000  # 97.5 s of 8 kHz mu-law: a Twilio media message just under 1 MiB


def _analysed_samples(session: CallSession) -> int:
    """Samples the session's speech detectors were handed to analyse."""
    return sum(d.samples_in for d in session._detectors if d is not None)


def _twilio_session() -> tuple[CallSession, TwilioCallerWire, TwilioAgentWire]:
    """A session on the Twilio wire whose stream has started, with both sides' wires."""
    stream, sid = "MZ" + "a" * 32, "CA" + "b" * 32
    caller, agent = TwilioCallerWire(stream, sid), TwilioAgentWire(stream)
    s = CallSession(make_decoder("twilio"), 0, secret=b"k", link_id="link")
    s.on_message(CALLER_TO_AGENT, caller.start(), 1)
    return s, caller, agent


def test_caller_audio_far_ahead_of_real_time_is_an_anomaly_and_not_analysed() -> None:
    s, wire, _ = _twilio_session()
    big = wire.media(b"\xff" * BIG_ULAW)
    assert len(big) < 1 << 20  # within the proxy's default --max-message-bytes
    for i in range(8):  # 13 minutes of audio within 4 s
        s.on_message(CALLER_TO_AGENT, big, (i + 1) * 500 * MS)
    r = s.close(4_500 * MS, "caller_closed", CloseInfo(initiator="caller"))
    # What the wire carried is reported as it was, and what ran ahead is said so.
    assert r.traffic.caller_audio_ms == 8 * 97_500.0
    assert r.anomalies == {"caller_audio_ahead": 8}
    analysed_ms = r.traffic.caller_audio_ms - r.traffic.caller_audio_unanalysed_ms
    assert analysed_ms <= r.duration_ms + CALLER_AHEAD_TOLERANCE_MS
    # The work is bounded by real time: the detector was handed no more than the call's
    # duration plus the tolerance (8 kHz audio: 8 samples a millisecond).
    assert s._detectors[AGENT_TO_CALLER] is None  # (the agent said nothing)
    assert _analysed_samples(s) <= (4_500 + CALLER_AHEAD_TOLERANCE_MS) * 8


def test_a_caller_catching_up_within_the_tolerance_is_analysed_in_full() -> None:
    s, wire, _ = _twilio_session()
    t = 0
    for _ in range(100):  # 2 s in real time, 20 ms frames
        t += 20 * MS
        s.on_message(CALLER_TO_AGENT, wire.media(b"\xff" * 160), t)
    t += 1_500 * MS  # the network held the caller's audio 1.5 s, then delivers it at once
    for _ in range(75):
        s.on_message(CALLER_TO_AGENT, wire.media(b"\xff" * 160), t)
    s.on_message(CALLER_TO_AGENT, wire.media(b"\xff" * 8_000), t)  # and one 1 s chunk
    r = s.close(t + 20 * MS, "caller_closed", CloseInfo(initiator="caller"))
    assert r.anomalies == {}
    assert r.traffic.caller_audio_unanalysed_ms == 0.0
    assert r.traffic.caller_audio_ms == 4_500.0
    assert _analysed_samples(s) == 4_500 * 8


class _Recorder:
    def __init__(self) -> None:
        self.got: list[str | bytes] = []

    async def __call__(self, ws: ServerConnection) -> None:
        async for m in ws:
            self.got.append(m)


async def test_a_caller_flooding_audio_through_the_proxy_is_forwarded_and_flagged() -> None:
    record = _Recorder()
    async with router_agent(record=record) as agent:
        async with running_proxy(agent.url) as (port, receipts, _):
            sid = call_sid("ahead")
            wire = TwilioCallerWire("MZ" + sid[2:], sid)
            sent = [wire.start()] + [wire.media(b"\xff" * BIG_ULAW) for _ in range(3)]
            sent.append(wire.stop())
            async with connect(f"ws://127.0.0.1:{port}/record/a", max_size=None) as ws:
                for m in sent:
                    await ws.send(m)
                await wait_until(lambda: len(record.got) == len(sent), 30)
            await wait_until(lambda: len(receipts) == 1, 30)
    assert record.got == sent  # forwarding is untouched: every message, unchanged
    r = receipts[0]
    assert r.terminal == "completed"
    assert r.traffic.caller_audio_ms == 3 * 97_500.0
    assert r.anomalies.get("caller_audio_ahead", 0) >= 2
    analysed_ms = r.traffic.caller_audio_ms - r.traffic.caller_audio_unanalysed_ms
    assert analysed_ms <= r.duration_ms + CALLER_AHEAD_TOLERANCE_MS


# -- 4. a stalled caller with a flooding agent --------------------------------------------------


@asynccontextmanager
async def flooding_agent(message: bytes, limit: int) -> AsyncIterator[tuple[int, list[int]]]:
    """An agent that answers the handshake, then writes ``message`` (a server frame) up to
    ``limit`` times as fast as it can, and never reads (so never answers a close)."""
    sent = [0]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accept_handshake(reader, writer)
        with suppress(ConnectionError):
            while sent[0] < limit and not writer.transport.is_closing():
                writer.write(message)
                sent[0] += 1
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], sent
    finally:
        server.close()


def _server_frame(text: str) -> bytes:
    data = text.encode()
    assert len(data) >= 126 and len(data) < 65536
    return b"\x81\x7e" + len(data).to_bytes(2, "big") + data


@pytest.mark.slow
async def test_after_a_stalled_caller_is_dropped_the_agent_s_data_is_not_measured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stalled: list[bool] = []
    measured_after: list[int] = []
    real_stalled = ws_transport.Relay._stalled
    real_on_message = CallContext.on_message

    def spy_stalled(self: Any, leg: Any) -> None:
        stalled.append(True)
        real_stalled(self, leg)

    def spy_on_message(self: Any, direction: Any, payload: Any, t_ns: int) -> Any:
        if stalled and direction is AGENT_TO_CALLER:
            measured_after.append(len(payload))
        return real_on_message(self, direction, payload, t_ns)

    monkeypatch.setattr(ws_transport.Relay, "_stalled", spy_stalled)
    monkeypatch.setattr(CallContext, "on_message", spy_on_message)
    second = TwilioAgentWire("MZ1").media(os.urandom(8000))  # 1 s of audio, ~10.7 kB
    async with flooding_agent(_server_frame(second), limit=200_000) as (agent_port, sent):
        async with running_proxy(
            f"ws://127.0.0.1:{agent_port}", stall_timeout_s=0.3, close_timeout_s=1.0
        ) as (port, receipts, _):
            sid = call_sid("stalled")
            ws = await connect(f"ws://127.0.0.1:{port}/x", max_size=None, max_queue=None)
            await ws.send(twilio_start(sid))
            ws.transport.pause_reading()  # the caller stops reading
            await wait_until(lambda: len(receipts) == 1, 15)
            ws.transport.abort()
    assert stalled, "the caller was never dropped for not reading"
    r = receipts[0]
    assert r.terminal == "caller_vanished" and r.close.initiator == "proxy"
    assert measured_after == []  # nothing read after the drop was measured
    assert r.traffic.agent_to_caller_messages < sent[0]


# -- 5. agent audio far ahead of real time ----------------------------------------------------


def test_a_bursting_agent_s_queued_audio_is_bounded_and_its_timing_kept() -> None:
    s, caller, agent = _twilio_session()
    second = agent.media(bytes(range(256)) * 31 + bytes(64))  # 1 s of 8 kHz mu-law
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(1200):  # 20 minutes of audio, sent within 1.2 s
            s.on_message(AGENT_TO_CALLER, second, 2 * MS + i * MS)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # Unbounded, the queue held 1200 s of 8 kHz samples (19.2 MB); now about a minute's.
    assert held < 3_000_000, held
    # The playout timeline is exact all the same: a mark after the burst is predicted at
    # the end of the 20 minutes, and its echo then checks out.
    s.on_message(AGENT_TO_CALLER, agent.mark("end"), 1_300 * MS)
    for t_s in range(2, 1_202):  # the call goes on in real time (a pump per second)
        s.on_message(CALLER_TO_AGENT, caller.media(b"\xff" * 160), t_s * 1_000 * MS)
    s.on_message(CALLER_TO_AGENT, caller.mark("end"), 1_200_002 * MS)
    r = s.close(1_200_010 * MS, "caller_closed", CloseInfo(initiator="caller"))
    assert r.marks.checked == 1 and r.marks.max_abs_error_ms == 0.0
    assert r.traffic.agent_audio_ms == 1_200_000.0
    assert r.anomalies["agent_audio_ahead"] >= 1_100
    assert 1_100_000.0 <= r.traffic.agent_audio_unanalysed_ms < 1_200_000.0


@pytest.mark.slow
async def test_a_finished_call_is_freed_without_the_cycle_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with sessions_of(monkeypatch, CallContext) as sessions:
        async with router_agent() as agent:
            async with running_proxy(agent.url) as (port, receipts, proxy):
                h = await healthy_call(port, "freed", frames=10)
                await wait_until(lambda: len(receipts) == 1 and not proxy.server.relays)
                # Only reference counting ran: the session is gone with its call.
                assert [ref() for ref in sessions] == [None]
    assert_healthy(h, receipts)


# -- 12. endless empty continuation frames ------------------------------------------------------


async def test_a_message_in_too_many_fragments_closes_the_call_with_1009() -> None:
    got: list[int] = []

    async def count(ws: ServerConnection) -> None:
        async for m in ws:
            got.append(len(m))

    async with router_agent(count=count) as agent:
        async with running_proxy(agent.url, close_timeout_s=0.5) as (port, receipts, _):
            sid = call_sid("fragments")
            async with connect(f"ws://127.0.0.1:{port}/count/f", max_size=None) as ws:
                await ws.send(twilio_start(sid))
                mask = b"\x00\x00\x00\x00"
                ws.transport.write(b"\x01\x81" + mask + b"{")  # a text frame, not final
                empty = b"\x00\x80" + mask  # an empty continuation frame, not final
                for _ in range(MAX_FRAGMENTS // 512 + 1):
                    if ws.transport.is_closing():
                        break
                    ws.transport.write(empty * 512)
                    await asyncio.sleep(0)
                if not ws.transport.is_closing():
                    ws.transport.write(b"\x80\x81" + mask + b"}")  # the final frame
                with pytest.raises(ConnectionClosed):
                    await asyncio.wait_for(ws.recv(), 5)
            await wait_until(lambda: len(receipts) == 1)
    assert ws.close_code == 1009
    r = receipts[0]
    assert r.terminal == "message_too_big" and r.anomalies.get("oversized") == 1
    assert got == [len(twilio_start(sid))]  # the fragmented message never reached the agent


# -- 10, 11. a start nested too deep, a second start -------------------------------------------


def _nested_start(sid: str, depth: int) -> str:
    """A Twilio start whose customParameters are ``depth`` nested arrays."""
    msg = json.loads(twilio_start(sid))
    msg["start"]["customParameters"] = "__deep__"
    return json.dumps(msg).replace('"__deep__"', "[" * depth + "]" * depth)


@pytest.mark.parametrize("depth", [990, 5000])
async def test_a_deeply_nested_start_still_registers_the_call(
    depth: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    found: dict[str, bool] = {}
    async with router_agent() as agent:
        async with running_proxy(agent.url) as (port, receipts, proxy):
            sid = call_sid(f"deep{depth}")
            wire = TwilioCallerWire("MZ" + sid[2:], sid)
            async with connect(f"ws://127.0.0.1:{port}/echo/deep", max_size=None) as ws:
                await ws.send(_nested_start(sid, depth))
                await ws.send(wire.media(b"\xff" * 160))
                await ws.recv()
                found = {i: proxy.live.find(i) is not None for i in (sid, wire.stream_sid)}
                await ws.send(wire.stop())
            await wait_until(lambda: len(receipts) == 1)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
    r = receipts[0]
    if depth < 1000:  # within what the dialect parses: the call is known by its ids
        assert found == {sid: True, wire.stream_sid: True}
        assert r.call == call_hash(sid) and r.anomalies == {}
    else:  # too deep to parse: counted, and the call goes on under the proxy's own id
        assert r.anomalies.get("malformed") == 1 and r.call_id_source == "proxy"
    assert r.anomalies.get("measurement_error", 0) == 0


async def test_a_second_start_does_not_split_the_call() -> None:
    async with router_agent() as agent:
        async with running_proxy(agent.url) as (port, receipts, proxy):
            first, second = call_sid("first"), call_sid("second")
            async with connect(f"ws://127.0.0.1:{port}/echo/twice") as ws:
                await ws.send(twilio_start(first))
                await ws.send(twilio_start(second))
                wire = TwilioCallerWire("MZ" + first[2:], first)
                await ws.send(wire.media(b"\xff" * 160))
                await ws.recv()
                by_first = proxy.live.find(first)
                by_second = proxy.live.find(second)
                await ws.send(wire.stop())
            await wait_until(lambda: len(receipts) == 1)
    assert by_first is not None and by_second is None
    r = receipts[0]
    assert r.call == call_hash(first)
    assert r.anomalies == {"repeated_start": 1}


# -- 6. mark names ------------------------------------------------------------------------------


@pytest.mark.slow
def test_mark_names_are_bounded_in_count_and_length() -> None:
    stream, sid = "MZ" + "a" * 32, "CA" + "b" * 32
    agent = TwilioAgentWire(stream)
    s = CallSession(make_decoder("twilio"), 0, secret=b"k", link_id="link")
    s.on_message(CALLER_TO_AGENT, TwilioCallerWire(stream, sid).start(), 1)
    big = "n" * 100_000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(MAX_PENDING_MARKS + 500):
            name = f"{i}-{big}" if i < 2000 else f"m{i}"
            s.on_message(AGENT_TO_CALLER, agent.mark(name), 2 + i)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # 2000 names of 100 kB were sent (200 MB): what is kept is a few hundred kB.
    assert held < 5_000_000, held
    # Still matched: the echo of the last long name and of a short one are checked.
    caller = TwilioCallerWire(stream, sid)
    s.on_message(CALLER_TO_AGENT, caller.mark(f"1999-{big}"), 10_000_000)
    s.on_message(CALLER_TO_AGENT, caller.mark(f"m{MAX_PENDING_MARKS + 499}"), 10_000_001)
    r = s.close(20_000_000, "caller_closed", CloseInfo(initiator="caller"))
    assert r.marks.checked == 2
    assert r.anomalies["mark_name_too_long"] == 2000
    assert r.anomalies["marks_over_limit"] == 500
    assert len(big) > MAX_MARK_NAME_CHARS


def test_a_long_base64_does_not_count_as_a_mark() -> None:
    """(A guard for the test above: media is not a mark.)"""
    s = CallSession(make_decoder("twilio"), 0, secret=b"k", link_id="link")
    payload = base64.b64encode(b"\xff" * 160).decode()
    s.on_message(AGENT_TO_CALLER, json.dumps({"event": "media", "media": {"payload": payload}}), 1)
    r = s.close(2, "caller_closed", CloseInfo(initiator="caller"))
    assert r.anomalies == {} and r.marks.checked == 0
