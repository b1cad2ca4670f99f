"""A day in the life of a proxy: hundreds of calls, idle gaps, misbehaving peers, a flood,
a killed worker, both transports. Bounded in time (about 3 minutes; ``--quick`` about 1).

What it runs, as a user would run it (the real commands, each in its own process):

* ``voxproxy proxy --workers 2`` (websocket, Twilio wire) in front of a routing test agent
  (in a child process): the caller's path picks the agent's behaviour: ``echo`` (echoes
  every media message at once), ``burst`` (echoes ten at a time), ``err`` (a protocol
  error: a frame with a reserved opcode, then keeps its TCP open), ``close`` (a close
  frame, then keeps its TCP open), ``mute`` (reads, never answers).
* ``voxproxy proxy --transport webrtc`` in front of ``voxproxy mock-agent --transport
  webrtc``, loaded by ``voxproxy load --transport webrtc`` during the first phases.

The websocket phases, in order: callers one after another with idle gaps of 0-2 s;
overlapping batches mixing every agent route; a flood (a raw caller writing 10-byte
masked frames as fast as TCP takes them, in a process of its own) beside well-behaved
paced calls whose every frame's echo delay is timed; one worker killed with SIGKILL
while calls are in progress, then more calls; an idle minute's stand-in, then callers
one after another again.

Reported (goals from the issue on a day of calls):

* ``refused``: callers answered 503 (none was over ``--max-calls``: capacity was free;
  goal 0), with the reasons the proxy gave;
* ``receipts_wrong``: calls that reached the agent (101) without exactly one receipt
  (goal 0), per transport;
* ``hung``: calls to a failing agent that the proxy did not end before the caller's own
  hang-up (goal 0);
* ``flood_worst_ms`` / ``flood_p99_ms``: the echo delay of well-behaved calls' frames
  beside the flood (goal: worst <= 250 ms), and the same figures for the quiet phases as
  the baseline measured in the same run;
* RSS of the proxy's processes at the start and the end; whether the killed worker was
  replaced.

The last line is one JSON object with these figures.

Run:  .venv/bin/python benchmarks/day.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import multiprocessing
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import record  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402

from voxproxy.core.dialects.twilio import TwilioCallerWire  # noqa: E402
from voxproxy.core.ids import keyed_hash  # noqa: E402

SECRET = "day-secret"
ULAW_SILENCE = b"\xff" * 160
ROUTES = ("echo", "burst", "err", "close", "mute")
FAILING = ("err", "close")


# -- the routing agent (a child process) -------------------------------------------------


def agent_main(port_out: Any) -> None:
    from websockets.asyncio.server import ServerConnection, serve

    async def handler(ws: ServerConnection) -> None:
        assert ws.request is not None
        route = ws.request.path.lstrip("/").split("/", 1)[0]
        held: list[str | bytes] = []
        n = 0
        try:
            async for m in ws:
                if not (isinstance(m, str) and '"media"' in m):
                    continue
                n += 1
                if route == "echo":
                    await ws.send(m)
                elif route == "burst":
                    held.append(m)
                    if len(held) == 10:
                        for h in held:
                            await ws.send(h)
                        held.clear()
                elif route in FAILING and n == 5:
                    # Written under the library: it goes on as if nothing was sent.
                    if route == "err":
                        ws.transport.write(b"\x83\x00")  # opcode 3: reserved
                    else:
                        ws.transport.write(b"\x88\x02\x03\xe8")  # close 1000
                    await asyncio.sleep(30)  # TCP kept open, nothing read
                    return
        except ConnectionClosed:
            pass

    async def main() -> None:
        async with serve(handler, "127.0.0.1", 0, compression=None, max_size=None) as server:
            port_out.send(next(iter(server.sockets)).getsockname()[1])
            await asyncio.Future()

    asyncio.run(main())


# -- the flooding caller (a child process) ----------------------------------------------


def flood_main(port: int, seconds: float, sent_out: Any) -> None:
    """A caller that writes 10-byte masked binary frames as fast as TCP takes them."""
    sock = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /echo/flood HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
    frame = b"\x82\x84" + os.urandom(4) + b"\x00\x00\x00\x00"
    block = frame * 2000
    sent = 0
    end = time.monotonic() + seconds
    sock.settimeout(1.0)
    try:
        while time.monotonic() < end:
            sock.sendall(block)
            sent += 2000
    except OSError:
        pass
    sent_out.send(sent)
    sock.close()


# -- websocket callers -------------------------------------------------------------------


@dataclass
class Call:
    name: str
    route: str
    status: int | None = None  # 101, 503, ...
    reason: str = ""
    close_code: int | None = None
    closed_by_proxy: bool = False  # the call ended before the caller hung up
    delays_ms: list[float] = field(default_factory=list)
    error: str | None = None


def call_sid(name: str) -> str:
    return "CA" + name.encode().hex().ljust(32, "0")[:32]


async def ws_call(port: int, route: str, name: str, frames: int, interval_s: float = 0.02) -> Call:
    out = Call(name, route)
    sid = call_sid(name)
    wire = TwilioCallerWire("MZ" + sid[2:], sid)
    sent_at: dict[str, float] = {}
    try:
        ws = await connect(
            f"ws://127.0.0.1:{port}/{route}/{name}",
            compression=None,
            max_size=None,
            open_timeout=15,
            close_timeout=5,
        )
    except InvalidStatus as e:
        out.status = e.response.status_code
        out.reason = e.response.body.decode(errors="replace").strip() if e.response.body else ""
        return out
    except Exception as e:  # (a reset handshake, a timeout: reported, not raised)
        out.error = f"connect: {e!r}"
        return out
    out.status = 101

    async def reader() -> None:
        try:
            async for m in ws:
                t = sent_at.pop(m, None) if isinstance(m, str) else None
                if t is not None:
                    out.delays_ms.append((time.monotonic() - t) * 1000.0)
        except ConnectionClosed:
            pass

    reading = asyncio.create_task(reader())
    try:
        await ws.send(wire.connected())
        await ws.send(wire.start())
        for _ in range(frames):
            if reading.done():  # the proxy ended the call
                out.closed_by_proxy = True
                break
            m = wire.media(ULAW_SILENCE)
            sent_at[m] = time.monotonic()
            await ws.send(m)
            await asyncio.sleep(interval_s)
        else:
            await ws.send(wire.stop())
        await asyncio.sleep(0.1)  # the last echoes
        await ws.close()
    except ConnectionClosed:
        out.closed_by_proxy = True
    except Exception as e:  # a benchmark reports; it does not stop
        out.error = repr(e)
    await asyncio.wait_for(reading, 10)
    out.close_code = ws.close_code
    return out


# -- processes ----------------------------------------------------------------------------


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("VOXPROXY_")}


def start(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "w") as err:
        return subprocess.Popen(cmd, stdout=err, stderr=subprocess.STDOUT, env=clean_env())


async def wait_log(log: Path, pattern: str, timeout_s: float = 60.0) -> re.Match[str]:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        found = re.search(pattern, log.read_text(errors="replace"))
        if found:
            return found
        await asyncio.sleep(0.1)
    raise RuntimeError(f"{log.name}: no {pattern!r} in:\n{log.read_text(errors='replace')}")


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        return []


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return round(total / 1024, 1)


def receipt_calls(path: Path) -> Counter[str]:
    seen: Counter[str] = Counter()
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            try:
                seen[json.loads(line)["call"]] += 1
            except (ValueError, KeyError, TypeError):
                continue
    return seen


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return round(s[min(len(s) - 1, int(q * len(s)))], 1)


# -- the day ------------------------------------------------------------------------------


async def day(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    py = sys.executable
    ctx = multiprocessing.get_context("spawn")
    recv_port, send_port = ctx.Pipe(duplex=False)
    agent = ctx.Process(target=agent_main, args=(send_port,), daemon=True)
    agent.start()
    agent_port = recv_port.recv()
    receipts = work / "receipts.jsonl"
    proxy_log = work / "proxy.log"
    for old in work.glob("*receipts.jsonl*"):
        old.unlink()  # (a kept directory of an earlier run)
    proxy = start(
        [
            *(py, "-m", "voxproxy.cli", "proxy", "--workers", "2", "--listen", "127.0.0.1:0"),
            *("--upstream", f"ws://127.0.0.1:{agent_port}", "--dialect", "twilio"),
            *("--secret", SECRET, "--receipts", str(receipts), "--drain-timeout", "10"),
        ],
        proxy_log,
    )
    started = await wait_log(proxy_log, r"listening on ws://127\.0\.0\.1:(\d+)")
    port = int(started[1])
    await asyncio.sleep(1.0)
    proxy_pids = [proxy.pid, *children(proxy.pid)]
    rss_start = rss_mb(proxy_pids)

    # WebRTC: the mock agent, a proxy, and `voxproxy load` in the background.
    rtc_receipts = work / "rtc-receipts.jsonl"
    rtc_agent_log, rtc_proxy_log, rtc_load_log = (
        work / "rtc-agent.log",
        work / "rtc-proxy.log",
        work / "rtc-load.log",
    )
    rtc_agent = start(
        [
            py,
            "-m",
            "voxproxy.cli",
            "mock-agent",
            "--transport",
            "webrtc",
            "--listen",
            "127.0.0.1:0",
        ],
        rtc_agent_log,
    )
    whip = (await wait_log(rtc_agent_log, r"(http://127\.0\.0\.1:\d+/whip)"))[1]
    rtc_proxy = start(
        [
            *(
                py,
                "-m",
                "voxproxy.cli",
                "proxy",
                "--transport",
                "webrtc",
                "--listen",
                "127.0.0.1:0",
            ),
            *("--upstream", whip, "--secret", SECRET, "--receipts", str(rtc_receipts)),
        ],
        rtc_proxy_log,
    )
    rtc_url = (
        await wait_log(rtc_proxy_log, r"answering offers on (http://127\.0\.0\.1:\d+/whip)")
    )[1]
    rtc_load = start(
        [
            *(py, "-m", "voxproxy.cli", "load", "normal_question", "--transport", "webrtc"),
            *("--target", rtc_url, "--calls", str(args.rtc_calls), "--concurrency", "3"),
            *("--out", str(work / "rtc-load")),
        ],
        rtc_load_log,
    )

    calls: list[Call] = []
    phases: dict[str, list[Call]] = {}
    k = 0

    def name() -> str:
        nonlocal k
        k += 1
        return f"d{k:04d}"

    async def sequential(label: str, n: int) -> None:
        gaps = [0.0, 0.3, 0.6, 1.0, 2.0]
        for i in range(n):
            await asyncio.sleep(gaps[i % len(gaps)] * args.scale)
            c = await ws_call(port, "echo", name(), frames=25)
            phases.setdefault(label, []).append(c)

    async def overlapping(label: str, n: int, at_once: int) -> None:
        mix = ["echo"] * 10 + ["burst"] * 3 + ["err", "close", "mute"]
        for start_i in range(0, n, at_once):
            batch = [
                ws_call(port, mix[(start_i + j) % len(mix)], name(), frames=60)
                for j in range(min(at_once, n - start_i))
            ]
            phases.setdefault(label, []).extend(await asyncio.gather(*batch))

    t0 = time.monotonic()
    await sequential("sequential", args.sequential)
    await overlapping("overlapping", args.overlapping, 20)

    # The flood beside well-behaved paced calls.
    recv_sent, send_sent = ctx.Pipe(duplex=False)
    flood = ctx.Process(target=flood_main, args=(port, 4.0, send_sent), daemon=True)
    beside = [ws_call(port, "echo", name(), frames=300) for _ in range(args.beside)]
    tasks = [asyncio.ensure_future(b) for b in beside]
    await asyncio.sleep(1.0)
    flood.start()
    flood_calls = list(await asyncio.gather(*tasks))
    phases["beside the flood"] = flood_calls
    flood.join(30)
    flood_frames = recv_sent.recv() if recv_sent.poll(1) else None

    # A worker killed while calls are in progress.
    workers_before = children(proxy.pid)
    in_progress = [
        asyncio.ensure_future(ws_call(port, "echo", name(), frames=150)) for _ in range(20)
    ]
    await asyncio.sleep(1.0)
    killed = workers_before[-1] if workers_before else None
    if killed is not None:
        os.kill(killed, signal.SIGKILL)
    phases["worker killed"] = list(await asyncio.gather(*in_progress))
    await asyncio.sleep(2.0)
    await overlapping("after the kill", args.after_kill, 10)
    await asyncio.sleep(5.0 * args.scale)  # idle
    await sequential("after idle", args.sequential // 2)
    workers_after = children(proxy.pid)
    day_s = time.monotonic() - t0

    try:
        rtc_load.wait(max(30.0, 240.0 - day_s))
    except subprocess.TimeoutExpired:
        rtc_load.kill()
    rss_end = rss_mb([proxy.pid, *workers_after])
    for p in (proxy, rtc_proxy):
        p.send_signal(signal.SIGTERM)
    for p in (proxy, rtc_proxy):
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
    rtc_agent.send_signal(signal.SIGTERM)
    try:
        rtc_agent.wait(10)
    except subprocess.TimeoutExpired:
        rtc_agent.kill()
    agent.kill()

    for label_calls in phases.values():
        calls.extend(label_calls)
    seen = receipt_calls(receipts)
    reached = [c for c in calls if c.status == 101]
    wrong = [
        c.name for c in reached if seen[keyed_hash(SECRET.encode(), call_sid(c.name), "c_")] != 1
    ]
    refused = [c for c in calls if c.status is not None and c.status != 101]
    hung = [c.name for c in reached if c.route in FAILING and not c.closed_by_proxy]
    rtc_results_path = work / "rtc-load" / "results.json"
    rtc: dict[str, Any] = {"calls": 0, "connected": 0, "receipts": 0}
    if rtc_results_path.exists():
        rtc_results = json.loads(rtc_results_path.read_text())
        rtc_calls = rtc_results.get("calls", [])
        rtc["calls"] = len(rtc_calls)
        rtc["connected"] = sum(1 for c in rtc_calls if c.get("error") is None)
        rtc["errors"] = Counter(str(c.get("error"))[:60] for c in rtc_calls if c.get("error"))
    rtc["receipts"] = sum(receipt_calls(rtc_receipts).values())
    quiet = [  # (a burst agent holds its echoes ten frames: the echo route's only)
        d
        for label in ("sequential", "overlapping")
        for c in phases[label]
        if c.route == "echo"
        for d in c.delays_ms
    ]
    flood_delays = [d for c in flood_calls for d in c.delays_ms]
    return {
        "calls": len(calls),
        "phases": {
            label: {
                "calls": len(cs),
                "101": sum(1 for c in cs if c.status == 101),
                "refused": sum(1 for c in cs if c.status not in (None, 101)),
                "errors": sum(1 for c in cs if c.error),
                "closed_by_proxy": sum(1 for c in cs if c.closed_by_proxy),
                "echo_p99_ms": pct([d for c in cs if c.route == "echo" for d in c.delays_ms], 0.99),
            }
            for label, cs in phases.items()
        },
        "refused": len(refused),
        "refused_reasons": dict(Counter(c.reason[:80] for c in refused)),
        "receipts_wrong": len(wrong),
        "receipts_wrong_calls": wrong[:10],
        "hung": len(hung),
        "errors": dict(Counter((c.error or "")[:80] for c in calls if c.error)),
        "quiet_p99_ms": pct(quiet, 0.99),
        "quiet_worst_ms": pct(quiet, 1.0),
        "flood_p99_ms": pct(flood_delays, 0.99),
        "flood_worst_ms": pct(flood_delays, 1.0),
        "flood_frames_sent": flood_frames,
        "flood_frames_echoed_calls": sum(1 for c in flood_calls if c.delays_ms),
        "killed_worker": killed,
        "workers_before": len(workers_before),
        "workers_after": len(workers_after),
        "worker_replaced": killed is not None
        and len(workers_after) == len(workers_before)
        and killed not in workers_after,
        "rss_start_mb": rss_start,
        "rss_end_mb": rss_end,
        "webrtc": {k: (dict(v) if isinstance(v, Counter) else v) for k, v in rtc.items()},
        "day_s": round(day_s, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer calls, shorter gaps (about a minute)"
    )
    parser.add_argument("--keep", type=Path, help="keep the logs and receipts in this directory")
    record.add_flag(parser)
    args = parser.parse_args()
    args.scale = 0.5 if args.quick else 1.0
    args.sequential = 10 if args.quick else 30
    args.overlapping = 60 if args.quick else 200
    args.after_kill = 20 if args.quick else 60
    args.beside = 8 if args.quick else 16
    args.rtc_calls = 4 if args.quick else 16
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        work = args.keep
        out = asyncio.run(day(args, work))
    else:
        with tempfile.TemporaryDirectory(prefix="voxproxy-day-") as tmp:
            out = asyncio.run(day(args, Path(tmp)))
    goals = [
        ("callers refused while capacity was free", out["refused"], "0"),
        ("calls without exactly one receipt (websocket)", out["receipts_wrong"], "0"),
        (
            "webrtc calls connected / receipts",
            f"{out['webrtc']['connected']} / {out['webrtc']['receipts']}",
            "equal",
        ),
        ("calls to a failing agent left hanging", out["hung"], "0"),
        (
            "frame delay beside the flood, p99 / worst ms",
            f"{out['flood_p99_ms']} / {out['flood_worst_ms']}",
            "worst <= 250",
        ),
        (
            "frame delay, quiet phases (baseline), p99 / worst ms",
            f"{out['quiet_p99_ms']} / {out['quiet_worst_ms']}",
            "",
        ),
        ("killed worker replaced", out["worker_replaced"], "yes"),
        ("proxy RSS start / end MB", f"{out['rss_start_mb']} / {out['rss_end_mb']}", ""),
    ]
    print(
        f"\nA day of calls: {out['calls']} websocket calls in {out['day_s']} s, "
        f"{out['webrtc']['calls']} WebRTC calls beside them\n"
    )
    print(
        f"{'phase':<20} {'calls':>6} {'101':>5} {'refused':>8} {'errors':>7} "
        f"{'ended by proxy':>15} {'echo p99 ms':>12}"
    )
    for label, p in out["phases"].items():
        row = f"{label:<20} {p['calls']:>6} {p['101']:>5} {p['refused']:>8} {p['errors']:>7}"
        print(f"{row} {p['closed_by_proxy']:>15} {p['echo_p99_ms']!s:>12}")
    print()
    print(f"{'figure':<52} {'measured':>16} {'goal':>14}")
    for label, value, goal in goals:
        print(f"{label:<52} {value!s:>16} {goal:>14}")
    if out["refused_reasons"]:
        print("\nrefused:", out["refused_reasons"])
    if out["errors"]:
        print("caller errors:", out["errors"])
    record.finish("day", out, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
