"""How many real-time callers one core of the load generator sustains.

The load generator (``voxproxy.loadgen``'s scripted callers, on uvloop) runs in
one process pinned to CPU 0; a minimal agent runs in another process pinned to
CPU 1 and answers every caller frame with a frame of its own, so each caller
both streams and plays audio. At each level the table gives the pacing jitter
(how late each 20 ms frame left, against its absolute deadline: p50 and p99)
and the load generator's CPU per call-second; as a baseline in the same run,
a bare sender (a websockets client that only sends paced frames, no playout,
no detector) at the same level.

Run:  .venv/bin/python benchmarks/loadgen.py [--levels 50,150,300] [--seconds 12]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PY = sys.executable
FRAME_MS = 20


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pin(pid: int, cpu: int) -> None:
    os.sched_setaffinity(pid, {cpu % (os.cpu_count() or 1)})


async def minimal_agent(port: int) -> None:
    """Answers each caller frame with a Twilio media frame of the same audio."""
    from websockets.asyncio.server import ServerConnection, serve
    from websockets.exceptions import ConnectionClosed

    async def handler(ws: ServerConnection) -> None:
        sid = "MZbench"
        try:
            async for m in ws:
                if isinstance(m, str) and '"media"' in m:
                    start = m.find('"payload":"') + 11
                    payload = m[start : m.find('"', start)]
                    await ws.send(
                        '{"event":"media","streamSid":"%s","media":{"payload":"%s"}}'
                        % (sid, payload)
                    )
        except ConnectionClosed:
            pass

    async with serve(handler, "127.0.0.1", port, compression=None):
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()


async def callers(port: int, calls: int, seconds: float, bare: bool) -> dict[str, Any]:
    from voxproxy.fixtures import clip
    from voxproxy.loadgen.caller import CallerConfig, Say, ScriptedCaller, Silence

    lags: list[int] = []
    errors = 0

    async def one(n: int) -> None:
        nonlocal errors
        await asyncio.sleep(n * 0.003)
        if bare:
            from websockets.asyncio.client import connect

            from voxproxy.audio.g711 import pcm_to_ulaw
            from voxproxy.dialects.twilio import TwilioCallerWire

            wire = TwilioCallerWire(f"MZ{n:032d}", f"CA{n:032d}")
            frame = pcm_to_ulaw(np.zeros(160, dtype=np.int16))
            try:
                async with connect(f"ws://127.0.0.1:{port}/", compression=None) as ws:
                    t0 = time.monotonic_ns()
                    k = 0
                    while time.monotonic_ns() - t0 < seconds * 1e9:
                        k += 1
                        deadline = t0 + k * FRAME_MS * 1_000_000
                        delay = (deadline - time.monotonic_ns()) / 1e9
                        if delay > 0:
                            await asyncio.sleep(delay)
                        lags.append(time.monotonic_ns() - deadline)
                        await ws.send(wire.media(frame))
            except Exception:
                errors += 1
            return
        steps = [Say(clip("caller_iban")), Silence(seconds * 1000)]
        config = CallerConfig(
            url=f"ws://127.0.0.1:{port}/",
            dialect="twilio",
            call_id=f"CA{n:032d}",
            keep_messages=False,
            tail_ms=0.0,
        )
        caller = ScriptedCaller(config, steps)
        task = asyncio.create_task(caller.run())
        await asyncio.sleep(seconds)
        caller._done_sending.set()
        rec = await task
        if rec.error:
            errors += 1
        lags.extend(rec.pacing_lag_ns)

    await asyncio.gather(*(one(n) for n in range(calls)))
    return {"lags_ns": lags, "errors": errors}


def run_level(calls: int, seconds: float, bare: bool) -> dict[str, Any]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    agent = subprocess.Popen([PY, __file__, "--agent", str(port)], cwd=ROOT)
    _pin(agent.pid, 1)
    time.sleep(1.0)
    out_path = Path(f"/tmp/voxproxy-loadgen-{os.getpid()}-{calls}-{int(bare)}.json")
    load = subprocess.Popen(
        [
            PY,
            __file__,
            "--callers",
            str(port),
            "--calls",
            str(calls),
            "--seconds",
            str(seconds),
            "--out",
            str(out_path),
        ]
        + (["--bare"] if bare else []),
        cwd=ROOT,
    )
    _pin(load.pid, 0)
    warm = 2.0 + calls * 0.003
    time.sleep(warm)
    cpu0 = _cpu_seconds(load.pid)
    t0 = time.monotonic()
    time.sleep(max(1.0, seconds - warm - 1.0))
    cpu1 = _cpu_seconds(load.pid)
    window = time.monotonic() - t0
    load.wait(timeout=seconds + 120)
    agent.send_signal(signal.SIGTERM)
    agent.wait(timeout=10)
    data = json.loads(out_path.read_text())
    out_path.unlink()
    lags = np.array(data["lags_ns"], dtype=np.float64) / 1e6
    return {
        "calls": calls,
        "p50_ms": round(float(np.percentile(lags, 50)), 2) if lags.size else None,
        "p99_ms": round(float(np.percentile(lags, 99)), 2) if lags.size else None,
        "cpu_per_call_s_ms": round((cpu1 - cpu0) / (calls * window) * 1000, 3),
        "core_busy": round((cpu1 - cpu0) / window, 2),
        "errors": data["errors"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="50,150,300")
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--agent", type=int)
    parser.add_argument("--callers", type=int)
    parser.add_argument("--calls", type=int)
    parser.add_argument("--bare", action="store_true")
    parser.add_argument("--out")
    args = parser.parse_args()
    import uvloop

    if args.agent:
        uvloop.run(minimal_agent(args.agent))
        return
    if args.callers:
        result = uvloop.run(callers(args.callers, args.calls, args.seconds, args.bare))
        Path(args.out).write_text(json.dumps(result))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="load generator on one core: pacing jitter and CPU per call-second")
    for col in ("calls", "caller", "pacing lag p50", "p99", "CPU/call-s", "core busy", "errors"):
        table.add_column(col, justify="right")
    rows = []
    for calls in [int(x) for x in args.levels.split(",")]:
        bare = run_level(calls, args.seconds, bare=True)
        full = run_level(calls, args.seconds, bare=False)
        for label, r in (("bare sender", bare), ("voxproxy caller", full)):
            table.add_row(
                str(calls),
                label,
                f"{r['p50_ms']} ms",
                f"{r['p99_ms']} ms",
                f"{r['cpu_per_call_s_ms']} ms",
                f"{r['core_busy']:.0%}",
                str(r["errors"]),
            )
        table.add_section()
        rows.append(
            {
                **full,
                "bare_p99_ms": bare["p99_ms"],
                "bare_cpu_per_call_s_ms": bare["cpu_per_call_s_ms"],
            }
        )
    Console(width=120).print(table)
    print(json.dumps({"levels": rows}))


if __name__ == "__main__":
    main()
