"""The load side of benchmarks/capacity.py: Twilio-format callers and an echoing agent on
one event loop, without a task per call (capacity.py runs it as a subprocess mode).

Each caller opens a websocket through the relay under test, sends a 20 ms media frame
on its slot of a 1 ms tick, and the agent echoes every frame back with the time it was
sent: the one-way latency through the relay, per message. ``run_load`` prints the
window's figures as one JSON line.

It must not be the limit of what it measures: a relay's count is the relay's only while
the load has CPU to spare (capacity.py checks it carries twice voxproxy's count on the
direct path). So it speaks the wire itself, as plainly as RFC 6455 allows: the opening
handshake written and read by hand, then each message one frame (header, the caller's
masking key, the payload), and each read cut into frames with a few slices; no
websockets protocol object, no Frame or event object a message, no generator. A
caller masks with one key of its own for the call (any key is valid on the wire: the
relay under test unmasks and forwards the same way whatever it is).
"""

from __future__ import annotations

import array
import asyncio
import base64
import contextlib
import json
import os
import random
import struct
import time
from typing import Any

import numpy as np
import overhead  # benchmarks/overhead.py: CPU from /proc (a sibling: the caller put it on the path)
import overhead_load  # its speech frames and Twilio start
from websockets.utils import accept_key

try:  # websockets' C masking (else its pure-Python one)
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover
    from websockets.utils import apply_mask

FRAME_MS = overhead_load.FRAME_MS
TEXT, CLOSE, PING, PONG = 0x1, 0x8, 0x9, 0xA
_HEAD16 = struct.Struct("!BBH").pack
_HEAD64 = struct.Struct("!BBQ").pack


def frame(opcode: int, payload: bytes, key: bytes | None = None) -> bytes:
    """One final frame: a server's (``key`` None) or a client's, masked with ``key``."""
    b0 = 0x80 | opcode
    n = len(payload)
    mask = 0x80 if key is not None else 0
    if n < 126:
        head = bytes((b0, mask | n))
    elif n < 1 << 16:
        head = _HEAD16(b0, mask | 126, n)
    else:
        head = _HEAD64(b0, mask | 127, n)
    if key is None:
        return head + payload
    return head + key + apply_mask(payload, key)


def cut_frames(data: bytes) -> tuple[list[tuple[int, bytes]], bytes]:
    """The whole frames at the start of ``data`` (opcode, unmasked payload), and the
    bytes of a frame not yet whole."""
    out: list[tuple[int, bytes]] = []
    n = len(data)
    pos = 0
    while n - pos >= 2:
        b1 = data[pos + 1]
        size = b1 & 0x7F
        start = pos + 2
        if size == 126:
            if n - pos < 4:
                break
            size = int.from_bytes(data[start : start + 2], "big")
            start += 2
        elif size == 127:
            if n - pos < 10:
                break
            size = int.from_bytes(data[start : start + 8], "big")
            start += 8
        key = None
        if b1 & 0x80:
            key = data[start : start + 4]
            start += 4
        end = start + size
        if end > n:
            break
        payload = data[start:end]
        out.append((data[pos] & 0x0F, apply_mask(payload, key) if key is not None else payload))
        pos = end
    return out, data[pos:]


def header(head: bytes, name: bytes) -> str | None:
    """The value of header ``name`` (lower case) in a handshake's head."""
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip().decode()
    return None


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
    key: bytes | None = None  # a client masks its frames

    def __init__(self, load: Load) -> None:
        self.load = load
        self.transport: asyncio.Transport | None = None
        self.open = False
        self.head: bytes | None = b""  # the handshake, until its blank line
        self.pending = b""  # a frame not yet whole
        self.k = 0
        # Each call starts at its own place in the looped speech: real calls are not in
        # lockstep (otherwise every call's VAD meets the same onsets at the same moment).
        self.offset = random.randrange(400)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.head is None:  # refused, failed or closed: nothing more is read
            return
        if not self.open:
            head = self.head + data
            at = head.find(b"\r\n\r\n")
            if at < 0:
                self.head = head
                return
            data = head[at + 4 :]
            if not self.handshake(head[: at + 4]):
                self.head = None
                return
            self.head = b""
            if not data:
                return
        if self.pending:
            data = self.pending + data
        frames, self.pending = cut_frames(data)
        for opcode, payload in frames:
            if opcode == TEXT:
                self.message(payload)
            elif opcode == PING:
                self.send(PONG, payload)
            elif opcode == CLOSE:
                self.open = False
                self.head = None
                self.send(CLOSE, payload[:2])
                if self.transport is not None:
                    self.transport.close()

    def handshake(self, head: bytes) -> bool:
        raise NotImplementedError

    def message(self, payload: bytes) -> None:
        raise NotImplementedError

    def send(self, opcode: int, payload: bytes) -> None:
        t = self.transport
        if t is not None and not t.is_closing():
            t.write(frame(opcode, payload, self.key))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.open and self.load.recording:
            self.load.errors += 1
        self.open = False


class _Agent(_Conn):
    def handshake(self, head: bytes) -> bool:
        key = header(head, b"sec-websocket-key") or ""
        assert self.transport is not None
        self.transport.write(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: " + accept_key(key).encode() + b"\r\n\r\n"
        )
        self.open = True
        self.load.place(self)
        return True

    def message(self, payload: bytes) -> None:
        if payload[:17] == b'{"event":"media",':
            self.load.note(payload)

    def send_media(self, now: int) -> None:
        self.k += 1
        frames = self.load.agent_frames
        self.send(
            TEXT,
            b'{"event":"media","streamSid":"MZbench","media":{"payload":"%s"},"t":%d}'
            % (frames[(self.k + self.offset) % len(frames)], now),
        )


class _Caller(_Conn):
    def __init__(self, load: Load, port: int, n: int) -> None:
        super().__init__(load)
        self.port = port
        self.sid = b"MZ%032d" % n
        self.n = n
        self.key = os.urandom(4)
        self.nonce = base64.b64encode(os.urandom(16)).decode()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.transport.write(  # type: ignore[union-attr]
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
            % (self.port, self.nonce.encode())
        )

    def handshake(self, head: bytes) -> bool:
        status = head[9:12]
        if status == b"503":
            self.load.refused += 1
            return False
        if status != b"101" or header(head, b"sec-websocket-accept") != accept_key(self.nonce):
            self.load.errors += 1
            return False
        self.open = True
        self.load.opened += 1
        self.send(TEXT, b'{"event":"connected","protocol":"Call","version":"1.0.0"}')
        self.send(TEXT, overhead_load.twilio_start(self.n, self.sid.decode()).encode())
        self.load.place(self)
        return True

    def message(self, payload: bytes) -> None:
        self.load.note(payload)

    def send_media(self, now: int) -> None:
        self.k += 1
        k = self.k
        frames = self.load.caller_frames
        self.send(
            TEXT,
            b'{"event":"media","sequenceNumber":"%d","media":{"track":"inbound","chunk":"%d",'
            b'"timestamp":"%d","payload":"%s"},"streamSid":"%s","t":%d}'
            % (k + 1, k, k * FRAME_MS, frames[(k + self.offset) % len(frames)], self.sid, now),
        )


async def run_load(target_port: int, agent_port: int, calls: int, warmup: float, window: float):  # type: ignore[no-untyped-def]
    # Not to be the limit on a shared machine either: the highest priority it may take
    # (root), so that other processes on its core do not hold up its 1 ms tick.
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, -20)
    loop = asyncio.get_running_loop()
    load = Load(calls)
    server = await loop.create_server(
        lambda: _Agent(load), "127.0.0.1", agent_port, backlog=4096, reuse_address=True
    )
    t0 = loop.time()
    t0_ns = time.monotonic_ns()
    tick = [0]

    def on_tick() -> None:
        k = tick[0]
        now = time.monotonic_ns()
        if load.recording:
            load.lags.append(now - t0_ns - k * 1_000_000)
        for conn in load.slots[k % FRAME_MS]:
            if conn.open:
                conn.send_media(now)
        tick[0] = k + 1
        loop.call_at(t0 + (k + 1) / 1000, on_tick)

    loop.call_at(t0, on_tick)
    pending = []
    for n in range(calls):
        pending.append(
            asyncio.ensure_future(
                loop.create_connection(
                    lambda n=n: _Caller(load, target_port, n), "127.0.0.1", target_port
                )
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
