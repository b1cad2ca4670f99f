"""One caller flooding tiny frames beside well-behaved calls (issue 35 item 2), on loopback.

A caller writes 10-byte masked text frames (a 4-byte payload) as fast as TCP takes them
for ``--flood-seconds`` (4), beside ``--calls`` (10) well-behaved Twilio calls sending a
20 ms ``media`` message every 20 ms, each echoed by the agent. Figures, for the relay
under test and, in the same run, for a bare relay on the stock websockets asyncio layer
(``benchmarks/overhead.py``'s), same load:

* the frame delay of the well-behaved calls (send to echo, through the relay both ways)
  for the frames sent while the flood was being sent: worst, p99, median, and how many
  never came back before the end;
* the handshake time of a new caller during the flood (a caller every 0.5 s from 0.5 s
  in, each waiting for the one before; its HTTP status when refused);
* how many frames the flooder got into TCP and how long after its last one the relay
  answered its close (how far behind the flood the relay ran);
* for voxproxy, what the flooding call's receipt says (anomalies, measurement).

The goal (issue 35): the worst frame delay of well-behaved calls beside the flood
<= 250 ms. Processes: the relay pinned to CPU 0, the agent, the flooder and the calls
on CPU 1 (``--no-pin`` leaves them where the kernel puts them). The agent echoes every
frame on ``/echo`` and reads and drops everything on ``/sink`` (the flood's path), so
that it never slows the flood down.

Run:  .venv/bin/python benchmarks/flood.py [--calls 10] [--flood-seconds 4] [--relays voxproxy,bare]
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # support.*: the helpers tests and benchmarks share

import benchkit  # noqa: E402
import record  # noqa: E402
import uvloop  # noqa: E402
from support.child import proxy_command  # noqa: E402
from support.rawws import accept_handshake  # noqa: E402

from voxproxy.core.dialects.twilio import TwilioCallerWire  # noqa: E402
from voxproxy.harness.ports import free_port  # noqa: E402

PY = sys.executable
HERE = Path(__file__).resolve()
OVERHEAD = HERE.parent / "overhead.py"
MASK = b"\x5a\xa5\x0f\xf0"
FLOOD_PAYLOAD = b"ping"
REQUEST = (
    "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


def masked_frame(opcode: int, payload: bytes) -> bytes:
    """A client's frame (RFC 6455 5.2), payload under 126 bytes."""
    body = bytes(b ^ MASK[i % 4] for i, b in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + MASK + body


def _pin(pid: int, cpu: int | None) -> None:
    if cpu is None:
        return
    with contextlib.suppress(OSError):
        os.sched_setaffinity(pid, {cpu % (os.cpu_count() or 1)})


# -- the agent (a subprocess mode) --------------------------------------------------------


async def _read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    b0, b1 = await reader.readexactly(2)
    n = b1 & 0x7F
    if n == 126:
        n = int.from_bytes(await reader.readexactly(2), "big")
    elif n == 127:
        n = int.from_bytes(await reader.readexactly(8), "big")
    key = await reader.readexactly(4) if b1 & 0x80 else b""
    body = await reader.readexactly(n)
    if key:
        body = bytes(b ^ key[i % 4] for i, b in enumerate(body))
    return b0, body


def _server_frame(b0: int, body: bytes) -> bytes:
    n = len(body)
    if n < 126:
        return bytes([b0, n]) + body
    if n < 1 << 16:
        return bytes([b0, 126]) + n.to_bytes(2, "big") + body
    return bytes([b0, 127]) + n.to_bytes(8, "big") + body


async def agent_main(port: int) -> None:
    """Echo every frame on ``/echo``; read and drop everything on ``/sink``."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            peek = await reader.readuntil(b" HTTP/1.1")
            sink = b"/sink" in peek
            rest = await reader.readuntil(b"\r\n\r\n")
            replay = asyncio.StreamReader()
            replay.feed_data(peek + rest)
            replay.feed_eof()
            await accept_handshake(replay, writer)
            if sink:
                while await reader.read(1 << 18):
                    pass
                return
            while True:
                b0, body = await _read_frame(reader)
                writer.write(_server_frame(b0, body))
                if b0 & 0x0F == 8:
                    break
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("listening", flush=True)
    async with server:
        await stop.wait()


# -- the flooder (a subprocess mode) ------------------------------------------------------


def flooder_main(port: int, seconds: float) -> None:
    """Flood for ``seconds``, then close and wait for the relay's answer to the close.
    Prints one JSON line: frames sent, and when the flood and the close's answer ended
    (``time.monotonic()``, the same clock in every process of the machine)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(REQUEST.format(path="/sink/flood").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 101"), head[:80]
    one = masked_frame(0x1, FLOOD_PAYLOAD)
    block = one * 6553  # 64 KiB
    per_block = 6553
    sent = 0
    t0 = time.monotonic()
    print(json.dumps({"start": t0}), flush=True)
    while time.monotonic() - t0 < seconds:
        sock.sendall(block)
        sent += per_block
    t_end = time.monotonic()
    sock.sendall(masked_frame(0x8, (1000).to_bytes(2, "big")))
    sock.settimeout(120)
    answered = None
    with contextlib.suppress(OSError):
        while True:
            data = sock.recv(1 << 16)
            if answered is None and b"\x88" in data:
                answered = time.monotonic()
            if not data:
                break
    sock.close()
    print(json.dumps({"frames": sent, "end": t_end, "answered": answered}), flush=True)


# -- the well-behaved calls and the new callers (in this process) -------------------------


class PacedCall:
    """A Twilio call through the relay to ``/echo``: a 20 ms media message every 20 ms;
    each echo's delay kept with the time its message was sent."""

    def __init__(self, n: int) -> None:
        sid = f"CA{n:032x}"
        self.wire = TwilioCallerWire("MZ" + sid[2:], sid)
        self.delays: list[tuple[float, float]] = []  # (sent at, delay s)
        self.sent_at: deque[float] = deque()
        self.errors = 0

    async def run(self, port: int, stop: asyncio.Event) -> None:
        from websockets.asyncio.client import connect

        try:
            async with connect(
                f"ws://127.0.0.1:{port}/echo/paced", compression=None, open_timeout=30
            ) as ws:

                async def receive() -> None:
                    async for _ in ws:
                        t = time.monotonic()
                        sent = self.sent_at.popleft()
                        self.delays.append((sent, t - sent))

                reader = asyncio.create_task(receive())
                self.sent_at.append(time.monotonic())  # (the first echo is the start's)
                await ws.send(self.wire.start())
                next_t = time.monotonic()
                while not stop.is_set():
                    msg = self.wire.media(b"\xff" * 160)
                    self.sent_at.append(time.monotonic())
                    await ws.send(msg)
                    next_t += 0.02
                    await asyncio.sleep(max(0.0, next_t - time.monotonic()))
                # Every echo back, or the end of the wait.
                deadline = time.monotonic() + 60
                while self.sent_at and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                reader.cancel()
                await ws.send(self.wire.stop())
        except Exception:
            self.errors += 1


async def new_caller(port: int) -> tuple[float, int]:
    """A new caller's handshake: how long until answered, and the HTTP status."""
    t0 = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(REQUEST.format(path="/echo/new").encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
    took = time.monotonic() - t0
    writer.transport.abort()
    return took, int(head.split(b" ", 2)[1])


def _stop(proc: subprocess.Popen[Any]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def measure(relay: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    pin = not args.no_pin
    agent_port, port = free_port(), free_port()
    agent = subprocess.Popen([PY, str(HERE), "--agent", str(agent_port)], stdout=subprocess.PIPE)
    _pin(agent.pid, 1 if pin else None)
    receipts = tmp / f"{relay}.jsonl"
    upstream = f"ws://127.0.0.1:{agent_port}"
    if relay == "bare":
        cmd = [PY, str(OVERHEAD), "--bare-relay", str(port), upstream]
    else:
        cmd = proxy_command(
            *("--upstream", upstream, "--dialect", "twilio", "--receipts", str(receipts)),
            *("--secret", "bench", "--log-level", "warning", "--drain-timeout", "0"),
            listen=f"127.0.0.1:{port}",
        )
    log = tmp / f"{relay}.log"
    with open(log, "wb") as out:  # (the child keeps its own copy of the descriptor)
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=out)
    try:
        _pin(proc.pid, 0 if pin else None)
        assert agent.stdout is not None
        agent.stdout.readline()
        benchkit.wait_port(port, 15.0)
        stop = asyncio.Event()
        calls = [PacedCall(i) for i in range(args.calls)]
        tasks = [asyncio.create_task(c.run(port, stop)) for c in calls]
        await asyncio.sleep(1.0)
        flooder = await asyncio.create_subprocess_exec(
            PY, str(HERE), "--flooder", str(port), str(args.flood_seconds),
            stdout=subprocess.PIPE,
        )  # fmt: skip
        _pin(flooder.pid, 1 if pin else None)
        assert flooder.stdout is not None
        start = json.loads(await flooder.stdout.readline())["start"]
        handshakes: list[tuple[float, int]] = []
        await asyncio.sleep(0.5)
        while time.monotonic() < start + args.flood_seconds:
            handshakes.append(await new_caller(port))
            await asyncio.sleep(0.5)
        done = json.loads(await flooder.stdout.readline())
        await flooder.wait()
        await asyncio.sleep(0.5)
        stop.set()
        await asyncio.gather(*tasks)
    finally:
        _stop(proc)
        _stop(agent)
    during = [d for c in calls for sent, d in c.delays if start <= sent <= done["end"]]
    lost = sum(len(c.sent_at) for c in calls)
    result: dict[str, Any] = {
        "relay": relay,
        "frames_during_flood": len(during),
        "worst_delay_ms": round(max(during, default=float("nan")) * 1000, 1),
        "p99_delay_ms": round(pct(during, 99) * 1000, 1),
        "median_delay_ms": round(statistics.median(during) * 1000, 2) if during else None,
        "frames_lost": lost,
        "call_errors": sum(c.errors for c in calls),
        "handshake_worst_ms": round(max((t for t, _ in handshakes), default=0) * 1000, 1),
        "handshakes": [s for _, s in handshakes],
        "flood_frames": done["frames"],
        "flood_frames_per_s": round(done["frames"] / args.flood_seconds),
        "flood_close_answered_after_s": (
            round(done["answered"] - done["end"], 2) if done["answered"] else None
        ),
    }
    # Why new callers were refused, in the relay's words (its 1st, 2nd, 4th... refusal).
    result["refusals"] = [
        line.split(": ", 1)[-1] for line in log.read_text().splitlines() if "refused" in line
    ]
    if relay != "bare" and receipts.exists():
        flood = max(
            (json.loads(line) for line in receipts.read_text().splitlines() if line.strip()),
            key=lambda r: r["traffic"]["caller_to_agent_messages"],
            default=None,
        )
        if flood is not None:
            result["flood_receipt"] = {
                "terminal": flood["terminal"],
                "caller_to_agent_messages": flood["traffic"]["caller_to_agent_messages"],
                "anomalies": flood["anomalies"],
                "measurement_disabled": flood["measurement_disabled"],
            }
    return result


def table(results: list[dict[str, Any]]) -> str:
    head = (
        f"{'relay':<9} {'frames':>7} {'worst ms':>9} {'p99 ms':>8} {'p50 ms':>7} "
        f"{'lost':>5} {'handshake worst ms':>19} {'flood frames/s':>15} {'close answered s':>17}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        lines.append(
            f"{r['relay']:<9} {r['frames_during_flood']:>7} {r['worst_delay_ms']:>9} "
            f"{r['p99_delay_ms']:>8} {r['median_delay_ms']!s:>7} {r['frames_lost']:>5} "
            f"{r['handshake_worst_ms']:>19} {r['flood_frames_per_s']:>15} "
            f"{r['flood_close_answered_after_s']!s:>17}"
        )
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> None:
    results = []
    with tempfile.TemporaryDirectory() as d:
        for relay in args.relays.split(","):
            results.append(await measure(relay, args, Path(d)))
    print(
        f"{args.calls} paced calls (20 ms frames, echoed) beside one caller flooding "
        f"10-byte frames for {args.flood_seconds:g} s; delays of the frames sent during "
        "the flood; a new caller every 0.5 s during it"
    )
    print(table(results))
    for r in results:
        if "flood_receipt" in r:
            print(f"{r['relay']}: the flooding call's receipt: {r['flood_receipt']}")
        print(f"{r['relay']}: new callers' statuses: {r['handshakes']}")
        for line in r["refusals"]:
            print(f"{r['relay']}: {line}")
    record.finish(
        "flood", {"calls": args.calls, "flood_seconds": args.flood_seconds, "runs": results}, args
    )


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--flood-seconds", type=float, default=4.0)
    parser.add_argument("--relays", default="voxproxy,bare")
    parser.add_argument("--no-pin", action="store_true")
    parser.add_argument("--agent", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--flooder", nargs=2, metavar=("PORT", "S"), help=argparse.SUPPRESS)
    record.add_flag(parser)
    args = parser.parse_args()
    if args.agent:
        uvloop.run(agent_main(args.agent))
    elif args.flooder:
        flooder_main(int(args.flooder[0]), float(args.flooder[1]))
    else:
        uvloop.run(main(args))


if __name__ == "__main__":
    cli()
