"""The load side of benchmarks/capacity.py: Twilio-format callers and an echoing agent on
one event loop, without a task per call (capacity.py runs it as a subprocess mode).

Each caller opens a websocket through the relay under test, sends a 20 ms media frame
on its slot of a 1 ms tick, and the agent echoes every frame back with the time it was
sent: the one-way latency through the relay, per message. ``run_load`` prints the
window's figures as one JSON line.
"""

from __future__ import annotations

import array
import asyncio
import base64
import json
import os
import random
import time
from typing import Any

import numpy as np
import overhead  # benchmarks/overhead.py: CPU from /proc (a sibling: the caller put it on the path)
import overhead_load  # its speech frames and Twilio start
from websockets.client import ClientProtocol
from websockets.frames import Frame
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.server import ServerProtocol
from websockets.uri import parse_uri

FRAME_MS = overhead_load.FRAME_MS


class Load:
    """Callers and agent of one run, on one event loop, without a task per call."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.recording = False
        self.lat = array.array("q")
        self.arrived = array.array("q")
        self.callers: list[_Caller] = []
        self.agents: list[_Agent] = []
        self.slots: list[list[Any]] = [[] for _ in range(FRAME_MS)]
        self.opened = 0
        self.refused = 0  # HTTP 503 at the handshake: refused by admission control
        self.errors = 0
        self.lags = array.array("q")
        caller = [base64.b64encode(f) for f in overhead_load._frames("caller_where_is_order", 400)]
        agent = [base64.b64encode(f) for f in overhead_load._frames("agent_long_answer", 400)]
        self.caller_frames = caller
        self.agent_frames = agent

    def note(self, data: bytes) -> None:
        if self.recording:
            i = data.rfind(b'"t":')
            if i > 0:
                now = time.monotonic_ns()
                self.lat.append(now - int(data[i + 4 : -1]))
                self.arrived.append(now)

    def place(self, conn: Any) -> None:
        """An open connection: it sends at its own phase of the 20 ms frame from now on."""
        group = self.callers if isinstance(conn, _Caller) else self.agents
        self.slots[len(group) % FRAME_MS].append(conn)
        group.append(conn)


class _Conn(asyncio.Protocol):
    proto: Any

    def __init__(self, load: Load) -> None:
        self.load = load
        self.transport: asyncio.Transport | None = None
        self.open = False
        self.k = 0
        # Each call starts at its own place in the looped speech: real calls are not in
        # lockstep (otherwise every call's VAD meets the same onsets at the same moment).
        self.offset = random.randrange(400)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def flush(self) -> None:
        t = self.transport
        if t is None:
            return
        for chunk in self.proto.data_to_send():
            if chunk:
                t.write(chunk)
            elif not t.is_closing():
                t.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.open and self.load.recording:
            self.load.errors += 1
        self.open = False


class _Agent(_Conn):
    def __init__(self, load: Load) -> None:
        super().__init__(load)
        self.proto = ServerProtocol(max_size=None)

    def data_received(self, data: bytes) -> None:
        p = self.proto
        p.receive_data(data)
        for ev in p.events_received():
            if isinstance(ev, Frame):
                if ev.data[:17] == b'{"event":"media",':
                    self.load.note(ev.data)
            elif isinstance(ev, Request):
                p.send_response(p.accept(ev))
                self.open = True
                self.load.place(self)
        self.flush()

    def send_media(self, now: int) -> None:
        self.k += 1
        frames = self.load.agent_frames
        self.proto.send_text(
            b'{"event":"media","streamSid":"MZbench","media":{"payload":"%s"},"t":%d}'
            % (frames[(self.k + self.offset) % len(frames)], now)
        )
        self.flush()


class _Caller(_Conn):
    def __init__(self, load: Load, url: str, n: int) -> None:
        super().__init__(load)
        self.proto = ClientProtocol(parse_uri(url), max_size=None)
        self.sid = b"MZ%032d" % n
        self.n = n

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.proto.send_request(self.proto.connect())
        self.flush()

    def data_received(self, data: bytes) -> None:
        p = self.proto
        p.receive_data(data)
        for ev in p.events_received():
            if isinstance(ev, Frame):
                self.load.note(ev.data)
            elif isinstance(ev, Response):
                if ev.status_code == 503:
                    self.load.refused += 1
                    continue
                if ev.status_code != 101:
                    self.load.errors += 1
                    continue
                self.open = True
                self.load.opened += 1
                p.send_text(b'{"event":"connected","protocol":"Call","version":"1.0.0"}')
                p.send_text(overhead_load.twilio_start(self.n, self.sid.decode()).encode())
                self.load.place(self)
        self.flush()

    def send_media(self, now: int) -> None:
        self.k += 1
        k = self.k
        frames = self.load.caller_frames
        self.proto.send_text(
            b'{"event":"media","sequenceNumber":"%d","media":{"track":"inbound","chunk":"%d",'
            b'"timestamp":"%d","payload":"%s"},"streamSid":"%s","t":%d}'
            % (k + 1, k, k * FRAME_MS, frames[(k + self.offset) % len(frames)], self.sid, now)
        )
        self.flush()


async def run_load(target_port: int, agent_port: int, calls: int, warmup: float, window: float):  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    load = Load(calls)
    server = await loop.create_server(
        lambda: _Agent(load), "127.0.0.1", agent_port, backlog=4096, reuse_address=True
    )
    url = f"ws://127.0.0.1:{target_port}/"
    t0 = loop.time()
    t0_ns = time.monotonic_ns()
    tick = [0]

    def on_tick() -> None:
        k = tick[0]
        now = time.monotonic_ns()
        if load.recording:
            load.lags.append(now - t0_ns - k * 1_000_000)
        for conn in load.slots[k % FRAME_MS]:
            if conn.open and conn.proto.state is State.OPEN:
                conn.send_media(now)
        tick[0] = k + 1
        loop.call_at(t0 + (k + 1) / 1000, on_tick)

    loop.call_at(t0, on_tick)
    pending = []
    for n in range(calls):
        pending.append(
            asyncio.ensure_future(
                loop.create_connection(lambda n=n: _Caller(load, url, n), "127.0.0.1", target_port)
            )
        )
        if n % 10 == 9:
            await asyncio.sleep(0.01)
    results = await asyncio.gather(*pending, return_exceptions=True)
    load.errors += sum(1 for r in results if isinstance(r, BaseException))
    deadline = loop.time() + 15
    while load.opened + load.errors + load.refused < calls and loop.time() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(warmup)
    print("window-start", flush=True)
    load.recording = True
    await asyncio.sleep(window)
    load.recording = False
    print("window-end", flush=True)
    lat = sorted(load.lat)
    lags = sorted(load.lags)
    dump = os.environ.get("CAPACITY_DUMP")
    if dump:  # (diagnosis: every latency with its arrival time)
        np.save(dump, np.array([load.arrived, load.lat], dtype=np.int64))

    def q(xs: list[int], p: float) -> float:
        return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] / 1e6 if xs else float("nan")

    out = {
        "calls": calls,
        "opened": load.opened,
        "refused": load.refused,
        "errors": load.errors + (calls - load.opened - load.refused),
        "messages": len(lat),
        "p50_ms": q(lat, 50),
        "p99_ms": q(lat, 99),
        "max_ms": q(lat, 100),
        "lag_p99_ms": q(lags, 99),
        "cpu_s": overhead._cpu_seconds(os.getpid()),
    }
    for c in load.callers:
        if c.transport is not None:
            c.transport.abort()
    server.close()
    print(json.dumps(out), flush=True)
