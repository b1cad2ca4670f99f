"""How many real-time callers one core of the load generator sustains.

The load generator (``voxproxy.loadgen``'s scripted callers, on uvloop) runs in
one process pinned to CPU 0; a minimal agent runs in another process pinned to
CPU 1 and answers every caller frame with a frame of its own, so each caller
both streams and plays audio. At each level the table gives the pacing jitter
(how late each 20 ms frame left, against its absolute deadline: p50 and p99)
and the load generator's CPU per call-second; as a baseline in the same run,
a bare sender (a websockets client that only sends paced frames, one
``asyncio.sleep`` per frame, no playout, no detector) at the same level. Below the
table: callers per core at pacing p99 <= 5 ms (the most callers among the levels
tried, no failed call) for both, and their ratio. The scripted callers of one loop
share one pacing timer (``voxproxy.loadgen.pacing``), which also spaces out the garbage
collector's full passes while they pace, as in ``voxproxy load``.

What the pacing figures cover: every frame of every caller, from its first. The callers
start 3 ms apart (the connection ramp, about 0.75 s at 250, is inside the measured
time); a caller's frame clock starts once its connection is open, so the handshake's
own duration is not a pacing lag, but everything the handshakes of later callers take
from the loop is. Each voxproxy caller says one 10.6 s clip the whole time (speech
both ways: the agent echoes it back, the caller's playout and detector listen to it).
"others" is the CPU the rest of the machine used during the level (cores, from
/proc/stat: user, system and steal time, less the load and agent processes): on a
shared machine a level with others above a few hundredths ran beside other work, and
its pacing shows it.

Then ``voxproxy load --workers``: the load command's own path (``play_workers``: W
processes, shard k/W of one plan each, started together, records merged) at 1 and at
2 workers, the load processes allowed on W cores (CPU 0, or CPUs 0-1) and the agent
on the last CPU. Each call says a clip, then stays silent (about ``--seconds`` in
all). The table gives pacing lag p50/p99 over all callers; "callers per core" is the
most callers at which p99 stays <= 5 ms with no failed call, divided by W. On a
2-core machine the second worker shares its core with the agent, which makes the
2-worker figure conservative.

Run:  .venv/bin/python benchmarks/loadgen.py [--levels 50,150,250,300] [--seconds 12]
          [--worker-levels 50,100,200,300] [--workers 1,2]
      (--workers '' skips the workers part, --levels '' the first)
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

import benchkit
import numpy as np
import record

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PY = sys.executable
FRAME_MS = 20


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_busy_seconds() -> float:
    """CPU seconds the machine's processes used (all cores), and what the hypervisor
    took (steal), from /proc/stat; interrupts (the loopback traffic's) not counted."""
    with open("/proc/stat") as fh:
        user, nice, system, _idle, _iowait, _irq, _softirq, steal = (
            int(x) for x in fh.readline().split()[1:9]
        )
    return (user + nice + system + steal) / os.sysconf("SC_CLK_TCK")


def _children_cpu_seconds() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)  # the children waited for
    return ru.ru_utime + ru.ru_stime


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
    from voxproxy.clips import clip
    from voxproxy.loadgen.caller import CallerConfig, Say, ScriptedCaller, Silence

    lags: list[int] = []
    errors = 0

    async def one(n: int) -> None:
        nonlocal errors
        await asyncio.sleep(n * 0.003)
        if bare:
            from websockets.asyncio.client import connect

            from voxproxy.core.audio.g711 import pcm_to_ulaw
            from voxproxy.core.dialects.twilio import TwilioCallerWire

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
    # What the rest of the machine used while the load ran (the machine may be shared):
    children0, agent0 = _children_cpu_seconds(), _cpu_seconds(agent.pid)
    all0, t_start = _machine_busy_seconds(), time.monotonic()
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
    load_cpu = _children_cpu_seconds() - children0
    all1, agent1, t1 = _machine_busy_seconds(), _cpu_seconds(agent.pid), time.monotonic()
    others = (all1 - all0) - load_cpu - (agent1 - agent0)
    agent.send_signal(signal.SIGTERM)
    agent.wait(timeout=10)
    data, lags = _lags(out_path)
    return {
        "calls": calls,
        **lags,
        "cpu_per_call_s_ms": round((cpu1 - cpu0) / (calls * window) * 1000, 3),
        "core_busy": round((cpu1 - cpu0) / window, 2),
        "others_cores": round(max(0.0, others) / (t1 - t_start), 2),
        "errors": data["errors"],
    }


def _lags(out_path: Path) -> tuple[dict[str, Any], dict[str, float | None]]:
    """What a load child wrote to ``out_path`` (then removed), and the median and p99 of
    its pacing lags in ms."""
    data = json.loads(out_path.read_text())
    out_path.unlink()
    lags = np.array(data["lags_ns"], dtype=np.float64) / 1e6
    p50 = round(float(np.percentile(lags, 50)), 2) if lags.size else None
    p99 = round(float(np.percentile(lags, 99)), 2) if lags.size else None
    return data, {"p50_ms": p50, "p99_ms": p99}


def workers_run(port: int, calls: int, seconds: float, workers: int, out: Path) -> None:
    """In a child process: ``calls`` callers through ``play_workers`` on ``workers`` cores."""
    import tempfile

    from voxproxy.loadgen.runner import LoadPlan
    from voxproxy.loadgen.scenario import load_scenario
    from voxproxy.loadgen.shard import play_workers

    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, set(cpus[:workers]))  # the worker processes inherit it
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "paced.yaml"
        silence_ms = max(1000.0, seconds * 1000 - 4000)
        path.write_text(f"name: paced\nsteps:\n  - say: caller_iban\n  - silence: {silence_ms}\n")
        plan = LoadPlan(
            target=f"ws://127.0.0.1:{port}/",
            dialect="twilio",
            scenarios=((load_scenario(path), path.parent),),
            calls=calls,
            concurrency=calls,
            ramp_ms=3.0,
        )
        records = play_workers(plan, workers)
    lags = [lag for _, _, r in records for lag in r.pacing_lag_ns]
    errors = sum(1 for _, _, r in records if r.error)
    out.write_text(json.dumps({"lags_ns": lags, "errors": errors, "calls": len(records)}))


def run_workers_level(calls: int, seconds: float, workers: int) -> dict[str, Any]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    agent = subprocess.Popen([PY, __file__, "--agent", str(port)], cwd=ROOT)
    _pin(agent.pid, (os.cpu_count() or 1) - 1)
    time.sleep(1.0)
    out_path = Path(f"/tmp/voxproxy-loadgen-w{os.getpid()}-{calls}-{workers}.json")
    cmd = [PY, __file__, "--workers-run", str(workers), "--callers", str(port)]
    cmd += ["--calls", str(calls), "--seconds", str(seconds), "--out", str(out_path)]
    children0, agent0 = _children_cpu_seconds(), _cpu_seconds(agent.pid)
    all0, t0 = _machine_busy_seconds(), time.monotonic()
    try:
        subprocess.run(cmd, cwd=ROOT, check=True, timeout=seconds + 300)
        mine = _children_cpu_seconds() - children0 + _cpu_seconds(agent.pid) - agent0
        others = (_machine_busy_seconds() - all0 - mine) / (time.monotonic() - t0)
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=10)
    data, lags = _lags(out_path)
    return {
        "workers": workers,
        "calls": calls,
        **lags,
        "others_cores": round(max(0.0, others), 2),
        "errors": data["errors"] + (calls - data["calls"]),
    }


PACING_P99_LIMIT_MS = 5.0


def _per_core(levels: list[tuple[int, float | None, int]]) -> int | None:
    """The most callers (one core) whose pacing p99 stayed <= the limit with no failed call."""
    ok = [
        n
        for n, p99, errors in levels
        if p99 is not None and p99 <= PACING_P99_LIMIT_MS and not errors
    ]
    return max(ok) if ok else None


def _most(per_core: int | None, rows: list[dict[str, Any]]) -> str:
    return str(per_core) if per_core is not None else f"< {min(r['calls'] for r in rows)}"


def workers_section(levels: list[int], workers: list[int], seconds: float) -> dict[str, Any]:
    from rich.console import Console

    table = benchkit.figures_table(
        "voxproxy load --workers: pacing lag over all callers",
        ("callers", *(f"{w} worker{'s' if w > 1 else ''} p50 / p99" for w in workers)),
    )
    runs: dict[int, list[dict[str, Any]]] = {w: [] for w in workers}
    for calls in levels:
        cells = []
        for w in workers:
            r = run_workers_level(calls, seconds, w)
            runs[w].append(r)
            bad = f", {r['errors']} failed" if r["errors"] else ""
            cells.append(f"{r['p50_ms']} / {r['p99_ms']} ms{bad} (others {r['others_cores']:.2f})")
        table.add_row(str(calls), *cells)
    per_core = {}
    for w in workers:
        ok = [
            r["calls"]
            for r in runs[w]
            if r["p99_ms"] is not None and r["p99_ms"] <= PACING_P99_LIMIT_MS and not r["errors"]
        ]
        per_core[w] = round(max(ok) / w) if ok else None
    table.add_section()
    table.add_row(
        f"callers per core (p99 <= {PACING_P99_LIMIT_MS:g} ms)",
        *(
            str(per_core[w]) if per_core[w] is not None else f"< {min(levels) / w:.0f}"
            for w in workers
        ),
    )
    Console(width=120).print(table)
    first, last = workers[0], workers[-1]
    ratio = None
    if per_core.get(first) and per_core.get(last):
        ratio = round(per_core[last] * last / (per_core[first] * first), 2)
        print(f"{last} workers carry {ratio}x the callers of {first} (within the levels tried)")
    return {
        "workers": [
            {"workers": w, "callers_per_core": per_core[w], "levels": runs[w]} for w in workers
        ],
        "workers_ratio": ratio,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="50,150,250,300")
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--agent", type=int)
    parser.add_argument("--callers", type=int)
    parser.add_argument("--calls", type=int)
    parser.add_argument("--bare", action="store_true")
    parser.add_argument("--out")
    parser.add_argument("--workers", default="1,2", help="worker counts to compare ('' skips)")
    parser.add_argument("--worker-levels", default="50,100,200,300")
    parser.add_argument("--workers-run", type=int)
    record.add_flag(parser)
    args = parser.parse_args()
    if args.workers_run:
        workers_run(args.callers, args.calls, args.seconds, args.workers_run, Path(args.out))
        return
    import uvloop

    if args.agent:
        uvloop.run(minimal_agent(args.agent))
        return
    if args.callers:
        result = uvloop.run(callers(args.callers, args.calls, args.seconds, args.bare))
        Path(args.out).write_text(json.dumps(result))
        return
    from rich.console import Console

    table = benchkit.figures_table(
        "load generator on one core: pacing jitter and CPU per call-second",
        ("calls", "caller", "pacing lag p50", "p99", "CPU/call-s", "core busy", "others", "errors"),
    )
    rows = []
    for calls in [int(x) for x in args.levels.split(",") if x]:
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
                f"{r['others_cores']:.2f}",
                str(r["errors"]),
            )
        table.add_section()
        rows.append(
            {
                **full,
                "bare_p99_ms": bare["p99_ms"],
                "bare_cpu_per_call_s_ms": bare["cpu_per_call_s_ms"],
                "bare_errors": bare["errors"],
            }
        )
    summary: dict[str, Any] = {}
    if rows:
        mine = _per_core([(r["calls"], r["p99_ms"], r["errors"]) for r in rows])
        base = _per_core([(r["calls"], r["bare_p99_ms"], r["bare_errors"]) for r in rows])
        Console(width=120).print(table)
        ratio = round(mine / base, 2) if mine and base else None
        print(
            f"callers per core at pacing p99 <= {PACING_P99_LIMIT_MS:g} ms (levels tried): "
            f"voxproxy caller {_most(mine, rows)}, bare sender {_most(base, rows)}"
            + (f", ratio {ratio}" if ratio is not None else "")
        )
        summary = {
            "callers_per_core": mine,
            "bare_callers_per_core": base,
            "callers_per_core_over_bare": ratio,
        }
    extra: dict[str, Any] = {}
    if args.workers:
        workers = [int(x) for x in args.workers.split(",")]
        levels = [int(x) for x in args.worker_levels.split(",")]
        extra = workers_section(levels, workers, args.seconds)
    record.finish("loadgen", {"levels": rows, **summary, **extra}, args)


if __name__ == "__main__":
    main()
