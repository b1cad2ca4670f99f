"""Hostile peers against a real ``voxproxy proxy`` process (issue 14), on loopback.

Two measurements, each against a fresh proxy process, reporting its resident
memory (VmRSS), threads and UDP sockets from /proc:

- ``flood``: a caller that stops reading beside an agent that writes 1 s Twilio
  media messages as fast as it can and never answers a close. The proxy drops
  the caller after ``--stall-timeout`` (1 s) and waits ``--close-timeout`` for the
  agent; the figure is the proxy's peak RSS over the call, against its RSS
  before.
- ``whip``: 300 WHIP offers at once to ``--transport webrtc --max-calls 10``; the
  figures are how many got ``201`` and ``503``, and the proxy's RSS, threads and
  UDP sockets while they are held (the callers never connect their media).
- ``ahead``: a caller that sends 10 Twilio ``media`` messages of 1 MB (97.5 s of
  audio each) back to back, beside an ordinary call echoing 20 ms frames; the
  figures are the ordinary call's round trips during the flood (a stalled event
  loop stalls every call) and what the flooding call's receipt says.

Usage: ``.venv/bin/python benchmarks/hostile.py [flood] [whip] [ahead]``. The last
line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import aiohttp
import record

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # support.*

from support.child import port_in_log, proxy_command
from support.rawws import accept_handshake

from voxproxy.core.dialects.twilio import TwilioAgentWire, TwilioCallerWire
from voxproxy.transports.webrtc import AudioPeer, use_host_addresses


def proc_status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "Threads"):
                out[key] = int(value.split()[0])
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    udp = 0
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        with suppress(OSError), open(table) as fh:
            udp += sum(1 for line in fh.readlines()[1:] if line.split()[9] in inodes)
    out["udp_sockets"] = udp
    return out


def start_proxy(args: list[str], log: Path) -> tuple[subprocess.Popen[bytes], int]:
    cmd = proxy_command(*args, "--receipts", str(log.with_suffix(".jsonl")), "--secret", "bench")
    with open(log, "wb") as out:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(cmd, stdout=out, stderr=out)
    return proc, port_in_log(proc, log)


async def flood(tmp: Path) -> dict[str, Any]:
    message = TwilioAgentWire("MZ1").media(os.urandom(8000)).encode()
    frame = b"\x81\x7e" + len(message).to_bytes(2, "big") + message
    sent = [0]

    async def agent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accept_handshake(reader, writer)
        with suppress(ConnectionError):
            while sent[0] < 500_000 and not writer.transport.is_closing():
                writer.write(frame)
                sent[0] += 1
                await writer.drain()

    server = await asyncio.start_server(agent, "127.0.0.1", 0)
    agent_port = server.sockets[0].getsockname()[1]
    flags = ["--upstream", f"ws://127.0.0.1:{agent_port}", "--dialect", "twilio"]
    proc, port = start_proxy([*flags, "--stall-timeout", "1"], tmp / "flood.log")
    from websockets.asyncio.client import connect

    try:
        await asyncio.sleep(0.5)
        before = proc_status(proc.pid)
        ws = await connect(f"ws://127.0.0.1:{port}/", max_size=None, max_queue=None)
        sid = "CA" + "f" * 32
        await ws.send(TwilioCallerWire("MZ" + sid[2:], sid).start())
        ws.transport.pause_reading()
        peak = before["VmRSS"]
        receipts = tmp / "flood.jsonl"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            peak = max(peak, proc_status(proc.pid)["VmRSS"])
            if receipts.exists() and receipts.read_text().strip():
                break
            await asyncio.sleep(0.05)
        after = proc_status(proc.pid)
        ws.transport.abort()
    finally:
        proc.terminate()
        proc.wait(20)
        server.close()
    return {
        "rss_before_kb": before["VmRSS"],
        "rss_peak_kb": peak,
        "rss_after_kb": after["VmRSS"],
        "agent_mb_sent": round(sent[0] * len(frame) / 1e6, 1),
    }


async def whip(tmp: Path) -> dict[str, Any]:
    from voxproxy.mockagent import MockAgentConfig
    from voxproxy.mockagent.webrtc import WebRtcMockAgent

    use_host_addresses(["127.0.0.1"])
    async with WebRtcMockAgent(MockAgentConfig(delay_ms=400)) as agent:
        flags = ["--transport", "webrtc", "--upstream", agent.url(), "--max-calls", "10"]
        flags += ["--ice-host", "127.0.0.1", "--ice-timeout", "30"]
        proc, port = start_proxy(flags, tmp / "whip.log")
        caller = AudioPeer(name="caller")
        offer = await caller.create_offer()
        await caller.close()  # its sockets are gone: nothing will connect
        try:
            await asyncio.sleep(0.5)
            before = proc_status(proc.pid)
            url = f"http://127.0.0.1:{port}/whip"
            async with aiohttp.ClientSession() as http:

                async def post() -> int:
                    headers = {"Content-Type": "application/sdp"}
                    async with http.post(url, data=offer.encode(), headers=headers) as r:
                        return r.status

                statuses = await asyncio.gather(*(post() for _ in range(300)))
            held = proc_status(proc.pid)
            offers_at_agent = len(agent.calls)
        finally:
            proc.terminate()
            proc.wait(40)
    return {
        "created_201": statuses.count(201),
        "refused_503": statuses.count(503),
        "offers_reaching_the_agent": offers_at_agent,
        "rss_before_kb": before["VmRSS"],
        "rss_held_kb": held["VmRSS"],
        "threads_before": before["Threads"],
        "threads_held": held["Threads"],
        "udp_sockets_held": held["udp_sockets"],
    }


async def ahead(tmp: Path) -> dict[str, Any]:
    from websockets.asyncio.client import connect
    from websockets.asyncio.server import ServerConnection, serve

    async def agent(ws: ServerConnection) -> None:  # echoes media, swallows the rest
        assert ws.request is not None
        echo = ws.request.path.startswith("/echo")
        async for m in ws:
            if echo and isinstance(m, str) and '"media"' in m:
                await ws.send(m)

    async with serve(agent, "127.0.0.1", 0, max_size=None, compression=None) as server:
        agent_port = next(iter(server.sockets)).getsockname()[1]
        flags = ["--upstream", f"ws://127.0.0.1:{agent_port}", "--dialect", "twilio"]
        proc, port = start_proxy(flags, tmp / "ahead.log")
        receipts = tmp / "ahead.jsonl"
        flooding = asyncio.Event()
        rtts_ms: list[float] = []
        try:

            async def ordinary() -> None:
                sid = "CA" + "e" * 32
                wire = TwilioCallerWire("MZ" + sid[2:], sid)
                async with connect(f"ws://127.0.0.1:{port}/echo/o", compression=None) as ws:
                    await ws.send(wire.start())
                    for _ in range(250):  # 5 s of 20 ms frames
                        t0 = time.monotonic()
                        await ws.send(wire.media(b"\xff" * 160))
                        await ws.recv()
                        if flooding.is_set():
                            rtts_ms.append((time.monotonic() - t0) * 1000)
                        await asyncio.sleep(0.02)
                    await ws.send(wire.stop())

            async def flooder() -> None:
                sid = "CA" + "a" * 32
                wire = TwilioCallerWire("MZ" + sid[2:], sid)
                big = wire.media(os.urandom(780_000))  # 97.5 s of (noisy) audio, ~1 MB
                await asyncio.sleep(1.0)
                async with connect(f"ws://127.0.0.1:{port}/sink/f", max_size=None) as ws:
                    await ws.send(wire.start())
                    flooding.set()
                    for _ in range(10):
                        await ws.send(big)
                    await ws.send(wire.stop())

            await asyncio.gather(ordinary(), flooder())
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                lines = receipts.read_text().splitlines() if receipts.exists() else []
                if len(lines) == 2:
                    break
                await asyncio.sleep(0.05)
        finally:
            proc.terminate()
            proc.wait(20)
    flood = max(map(json.loads, lines), key=lambda r: r["traffic"]["caller_audio_ms"])
    return {
        "ordinary_rtt_ms_max": round(max(rtts_ms), 1),
        "ordinary_rtt_ms_median": round(sorted(rtts_ms)[len(rtts_ms) // 2], 1),
        "flood_duration_ms": flood["duration_ms"],
        "flood_caller_audio_ms": flood["traffic"]["caller_audio_ms"],
        "flood_caller_audio_unanalysed_ms": flood["traffic"].get("caller_audio_unanalysed_ms"),
        "flood_anomalies": flood["anomalies"],
    }


MEASUREMENTS = ("flood", "whip", "ahead")


async def main(which: list[str], args: argparse.Namespace | None = None) -> None:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if "flood" in which:
            results["flood"] = await flood(tmp)
            print("stalled caller + flooding agent:", results["flood"])
        if "whip" in which:
            results["whip"] = await whip(tmp)
            print("300 WHIP offers, --max-calls 10:", results["whip"])
        if "ahead" in which:
            results["ahead"] = await ahead(tmp)
            print("10 x 1 MB of caller audio beside an ordinary call:", results["ahead"])
    record.finish("hostile", results, args)


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("which", nargs="*", help="flood, whip, ahead (default: all three)")
    record.add_flag(parser)
    args = parser.parse_args()
    unknown = set(args.which) - set(MEASUREMENTS)
    if unknown:
        parser.error(f"unknown measurements {sorted(unknown)}; have {', '.join(MEASUREMENTS)}")
    asyncio.run(main(args.which or list(MEASUREMENTS), args))


if __name__ == "__main__":
    cli()
