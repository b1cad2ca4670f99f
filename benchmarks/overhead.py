"""What voxproxy adds to a call: one-way latency and CPU per message, against a bare relay.

Three paths are measured in one run, at each concurrency level, with the same load:

* ``direct``: callers talk to the agent with nothing in between (the latency floor);
* ``bare``: a minimal relay written here on the stock websockets asyncio layer
  (``serve`` + ``connect``, one forwarding task per direction), measuring nothing;
* ``voxproxy``: ``voxproxy proxy --dialect twilio``, measuring everything, on the build
  of the measurement core this checkout has (compiled by ``make native`` where it could
  be: the table's title and the JSON's ``build`` say which, see voxproxy/native.py);
* ``voxproxy-pure``: the same with ``VOXPROXY_PURE_PYTHON=1``, the core from its sources
  (the pure-Python fallback), side by side;
* ``voxproxy-capture``: ``voxproxy`` with ``--capture DIR`` (every call's wire written to
  disk, docs/captures.md): what capturing adds (its thread's CPU counts: it is the
  relay's process's).

Each call is a real-time Twilio Media Streams call: 20 ms ``media`` messages in
both directions (μ-law speech from the fixtures, looped), with the sender's
monotonic timestamp in an extra field. The relay under test runs in its own
process pinned to CPU 0; callers and agent share one process pinned to CPU 1.
Added latency = one-way latency through the relay minus the median one-way
latency of the direct path in the same run. CPU per message = the user+system
CPU over the window of every process of the relay (the process started and all
its descendants: worker processes, and measurement wherever it runs) / messages
it forwarded.

``--profile FILE`` samples the voxproxy relay with py-spy over the window (the
``py-spy`` command must be on the PATH or beside this Python) and writes the top
of the profile, by own and by inclusive time, to FILE; ``--paths`` picks the paths.

``--rounds N`` measures every path N times, interleaved (direct, bare, ..., then again):
this machine's speed drifts by 10-30% between runs a few minutes apart (the bare relay
read 27.7 to 37.3 µs per message at 100 calls in one half hour), so one run's ratio can
land anywhere in that band. With rounds, CPU figures are medians over the rounds (and
their range is shown), the ratio is the median of each round's own pair, and latencies
are pooled (each against its own round's direct median).

Run:  .venv/bin/python benchmarks/overhead.py [--levels 1,50,100] [--seconds 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # support.*: the helpers tests and benchmarks share

import benchkit  # noqa: E402
import record  # noqa: E402
from overhead_load import load_main  # noqa: E402  (the load, a subprocess mode)
from support.child import proxy_command  # noqa: E402

from voxproxy import native  # noqa: E402
from voxproxy.harness.ports import free_port  # noqa: E402

PATHS = ("direct", "bare", "forward-only", "voxproxy", "voxproxy-pure", "voxproxy-capture")
PROXY_PATHS = ("voxproxy", "voxproxy-pure", "voxproxy-capture")
PY = sys.executable


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def _tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (from /proc's children lists)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
    return found


def _tree_cpu_seconds(pid: int) -> dict[int, float]:
    """CPU seconds of each process of the tree (a process gone since counts 0)."""
    out: dict[int, float] = {}
    for p in _tree(pid):
        with contextlib.suppress(OSError):
            out[p] = _cpu_seconds(p)
    return out


def _cpu_between(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU spent between two readings, by the processes alive at the second (a process
    that ended in between is missed: workers live as long as the relay)."""
    return sum(cpu - before.get(p, 0.0) for p, cpu in after.items())


def _pin(pid: int, cpu: int) -> None:
    ncpu = os.cpu_count() or 1
    for p in _tree(pid):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(p, {cpu % ncpu})


# -- the bare relay (a subprocess mode of this file) ------------------------------------


async def bare_relay(port: int, upstream: str) -> None:
    from websockets.asyncio.client import connect
    from websockets.asyncio.server import ServerConnection, serve
    from websockets.exceptions import ConnectionClosed

    async def handler(caller: ServerConnection) -> None:
        async with connect(upstream, compression=None, max_size=None) as agent:

            async def pipe(src: object, dst: object) -> None:
                try:
                    async for message in src:  # type: ignore[attr-defined]
                        await dst.send(message)  # type: ignore[attr-defined]
                except ConnectionClosed:
                    pass

            t1 = asyncio.create_task(pipe(caller, agent))
            t2 = asyncio.create_task(pipe(agent, caller))
            _, pending = await asyncio.wait({t1, t2}, return_when=asyncio.FIRST_COMPLETED)
            for t in pending:
                t.cancel()

    async with serve(handler, "127.0.0.1", port, compression=None, max_size=None):
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()


async def forward_only(port: int, upstream: str) -> None:
    """voxproxy's relay with a do-nothing observer: the cost of forwarding alone."""
    from voxproxy.transports.websocket import RelayConfig, RelayServer

    server = RelayServer(RelayConfig(upstream), lambda t_ns: benchkit.NullObserver())  # type: ignore[arg-type,return-value]
    await server.start("127.0.0.1", port)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop()


# -- orchestration ----------------------------------------------------------------------


@dataclass
class PathResult:
    path: str
    calls: int
    latencies_ms: list[float]
    cpu_s: float
    messages: int
    window_s: float
    errors: int
    shed_share: float | None = None  # voxproxy: share of media messages whose analysis was shed


def measure(
    path: str, calls: int, seconds: float, warmup: float, profile: str | None = None
) -> PathResult:
    agent_port = free_port()
    relay: subprocess.Popen[bytes] | None = None
    receipts = tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False)
    captures = tempfile.TemporaryDirectory() if path == "voxproxy-capture" else None
    if path == "direct":
        target = agent_port
    else:
        target = free_port()
        if path == "bare":
            cmd = [PY, __file__, "--bare-relay", str(target), f"ws://127.0.0.1:{agent_port}"]
        elif path == "forward-only":
            cmd = [PY, __file__, "--forward-only", str(target), f"ws://127.0.0.1:{agent_port}"]
        else:
            cmd = proxy_command(
                *("--upstream", f"ws://127.0.0.1:{agent_port}", "--dialect", "twilio"),
                *("--receipts", receipts.name, "--secret", "bench"),
                *("--log-level", "warning", "--drain-timeout", "0"),
                *(("--capture", captures.name) if captures is not None else ()),
                listen=f"127.0.0.1:{target}",
            )
        env = dict(os.environ)
        env.pop(native.PURE_ENV, None)
        if path == "voxproxy-pure":
            env[native.PURE_ENV] = "1"
        relay = subprocess.Popen(cmd, cwd=ROOT, env=env)
        _pin(relay.pid, 0)
        benchkit.wait_port(target, 10.0)
        _pin(relay.pid, 0)  # processes it started meanwhile too
    load = subprocess.Popen(
        [
            PY,
            __file__,
            "--load",
            "--target-port",
            str(target),
            "--agent-port",
            str(agent_port),
            "--calls",
            str(calls),
            "--seconds",
            str(seconds),
            "--warmup",
            str(warmup),
        ],
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    _pin(load.pid, 1)
    time.sleep(warmup + 0.5)
    spy = None
    if profile and relay is not None and path == "voxproxy":
        spy = _start_py_spy(relay.pid, seconds, profile + ".raw")
    cpu0 = _tree_cpu_seconds(relay.pid) if relay else {}
    t0 = time.monotonic()
    time.sleep(seconds)
    cpu1 = _tree_cpu_seconds(relay.pid) if relay else {}
    window = time.monotonic() - t0
    if spy is not None and profile:
        spy.wait(timeout=60)
        Path(profile).write_text(summarise_profile(Path(profile + ".raw").read_text()))
    out, _ = load.communicate(timeout=seconds + warmup + 120)
    if relay is not None:
        relay.send_signal(signal.SIGTERM)
        try:
            relay.wait(timeout=20)
        except subprocess.TimeoutExpired:
            relay.kill()
    shed = _shed_share(Path(receipts.name)) if path in PROXY_PATHS else None
    os.unlink(receipts.name)
    if captures is not None:
        captures.cleanup()
    data = json.loads(out)
    lat = [x / 1e6 for x in data["latencies_ns"]]
    # Messages the relay forwarded in the CPU window: those that arrived in the
    # load's recording window (the same length), both directions.
    messages = int(len(lat) * window / seconds)
    cpu = _cpu_between(cpu0, cpu1)
    return PathResult(path, calls, lat, cpu, messages, window, data["errors"], shed)


def _shed_share(receipts: Path) -> float:
    """Of the messages the receipts count, the share whose analysis was shed (a call that
    gave up measuring counts whole): a CPU figure is only measurement's if this is 0."""
    shed = total = 0
    for line in receipts.read_text().splitlines():
        r = json.loads(line)
        t = r["traffic"]
        n = t["caller_to_agent_messages"] + t["agent_to_caller_messages"]
        total += n
        shed += n if r.get("measurement_disabled") else r["anomalies"].get("measurement_shed", 0)
    return shed / total if total else 0.0


def _start_py_spy(pid: int, seconds: float, out: str) -> subprocess.Popen[bytes]:
    exe = Path(PY).with_name("py-spy")
    spy = subprocess.Popen(
        [
            str(exe) if exe.exists() else "py-spy",
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(int(seconds)),
            "--rate",
            "250",
            "--nonblocking",
            "--format",
            "raw",
            "--output",
            out,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _pin(spy.pid, 1)  # beside the load, not on the relay's core
    return spy


def _frame_name(frame: str) -> str:
    """``function (path/to/pkg/file.py:123)`` -> ``function (pkg/file.py)``."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    return f"{name} ({'/'.join(path.split('/')[-2:])})"


def summarise_profile(raw: str, top: int = 30) -> str:
    """The top of a py-spy raw profile (``frame;frame;... count`` per line): functions by
    own samples and by inclusive samples, in % of all samples."""
    own: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [_frame_name(f) for f in stack.split(";")]
        own[frames[-1]] = own.get(frames[-1], 0) + n
        for f in set(frames):
            incl[f] = incl.get(f, 0) + n
    lines = [f"py-spy samples: {total}", "", "own %   function"]
    for f, n in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"{100 * n / total:5.1f}   {f}")
    lines += ["", "inclusive %   function"]
    for f, n in sorted(incl.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"{100 * n / total:5.1f}   {f}")
    return "\n".join(lines) + "\n"


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q)) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="1,50,100")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure every path this many times, interleaved; figures are medians over "
        "the rounds (the ratio: of each round's pair), latencies pooled",
    )
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument(
        "--paths",
        default=",".join(p for p in PATHS if p != "voxproxy-capture"),
        help="paths to run (direct first; voxproxy-capture only when named)",
    )
    parser.add_argument("--profile", default=None, help="write voxproxy's py-spy profile here")
    parser.add_argument("--bare-relay", nargs=2, metavar=("PORT", "UPSTREAM"))
    parser.add_argument("--forward-only", nargs=2, metavar=("PORT", "UPSTREAM"))
    parser.add_argument("--load", action="store_true")
    parser.add_argument("--target-port", type=int)
    parser.add_argument("--agent-port", type=int)
    parser.add_argument("--calls", type=int)
    record.add_flag(parser)
    args = parser.parse_args()
    if args.bare_relay:
        import uvloop

        uvloop.run(bare_relay(int(args.bare_relay[0]), args.bare_relay[1]))
        return
    if args.forward_only:
        import uvloop

        uvloop.run(forward_only(int(args.forward_only[0]), args.forward_only[1]))
        return
    if args.load:
        load_main(args)
        return

    from rich.console import Console

    console = Console(width=150)
    levels = [int(x) for x in args.levels.split(",")]
    rows = []
    build = native.build()
    table = benchkit.figures_table(
        "voxproxy overhead: Twilio-format real-time calls, relay pinned to one core; "
        f"voxproxy's measurement core: {build}",
        (
            "calls",
            "path",
            "p50 one-way",
            "p99 one-way",
            "p50 added",
            "p99 added",
            "CPU/msg",
            "CPU/msg range",
            "CPU/call-s",
            "calls/core",
            "errors",
            "shed",
        ),
    )
    for calls in levels:
        paths = [p for p in PATHS if p in args.paths.split(",")]
        # Rounds interleave the paths (direct, bare, ..., then again), so that a drift of
        # the machine's speed between rounds falls on every path alike.
        rounds = [
            {p: measure(p, calls, args.seconds, args.warmup, args.profile) for p in paths}
            for _ in range(args.rounds)
        ]
        level: dict[str, object] = {"calls": calls}
        per_msg: dict[str, float] = {}
        per_round: dict[str, list[float]] = {p: [] for p in paths}
        floors = []  # each round's direct median
        for one in rounds:
            direct = one.get("direct")
            floors.append(statistics.median(direct.latencies_ms) if direct else 0.0)
            for p, r in one.items():
                per_round[p].append(r.cpu_s / r.messages * 1e6 if r.messages else float("nan"))
        for p in paths:
            runs = [one[p] for one in rounds]
            # Latencies pooled over the rounds, each against its own round's direct median.
            added: list[float] = []
            for floor, r in zip(floors, runs, strict=True):
                added.extend(x - floor for x in r.latencies_ms)
            lat = [x for r in runs for x in r.latencies_ms]
            cpu_msg_us = statistics.median(per_round[p]) if p != "direct" else float("nan")
            cpu_call_s = (
                statistics.median(r.cpu_s / (calls * r.window_s) for r in runs)
                if p != "direct"
                else float("nan")
            )
            per_msg[p] = cpu_msg_us
            spread = (
                f"{min(per_round[p]):.1f}-{max(per_round[p]):.1f}"
                if p != "direct" and len(runs) > 1
                else ""
            )
            sheds = [r.shed_share for r in runs if r.shed_share is not None]
            table.add_row(
                str(calls),
                p,
                f"{pct(lat, 50):.2f} ms",
                f"{pct(lat, 99):.2f} ms",
                "" if p == "direct" else f"{pct(added, 50):.2f} ms",
                "" if p == "direct" else f"{pct(added, 99):.2f} ms",
                "" if p == "direct" else f"{cpu_msg_us:.1f} µs",
                spread,
                "" if p == "direct" else f"{cpu_call_s * 1000:.2f} ms",
                "" if p == "direct" else f"{1 / cpu_call_s:.0f}" if cpu_call_s > 0 else "",
                str(sum(r.errors for r in runs)),
                "" if not sheds else f"{100 * max(sheds):.1f}%",
            )
            if p == "voxproxy":
                level.update(
                    p50_added_ms=round(pct(added, 50), 3),
                    p99_added_ms=round(pct(added, 99), 3),
                    cpu_per_msg_us=round(cpu_msg_us, 2),
                    calls_per_core=round(1 / cpu_call_s) if cpu_call_s > 0 else None,
                    shed_share=round(max(sheds, default=0.0), 4),
                )
            if p == "forward-only":
                level.update(forward_only_cpu_per_msg_us=round(cpu_msg_us, 2))
            if p == "voxproxy-capture":
                level.update(
                    capture_cpu_per_msg_us=round(cpu_msg_us, 2),
                    capture_p99_added_ms=round(pct(added, 99), 3),
                )
            if p == "voxproxy-pure":
                level.update(
                    pure_cpu_per_msg_us=round(cpu_msg_us, 2),
                    pure_p99_added_ms=round(pct(added, 99), 3),
                    pure_shed_share=round(max(sheds, default=0.0), 4),
                )
            if p == "bare":
                level.update(
                    bare_cpu_per_msg_us=round(cpu_msg_us, 2),
                    bare_p50_added_ms=round(pct(added, 50), 3),
                    bare_p99_added_ms=round(pct(added, 99), 3),
                )
        if args.rounds > 1:
            level["rounds"] = args.rounds
            for p, key in (("voxproxy", "cpu_per_msg_ratios"), ("voxproxy-pure", "pure_ratios")):
                if p in per_round and "bare" in per_round:
                    pairs = zip(per_round[p], per_round["bare"], strict=True)
                    level[key] = [round(a / b, 3) for a, b in pairs]
        # The ratio of each round's pair (side by side in time), the median over rounds.
        if "voxproxy" in per_msg and "bare" in per_msg:
            ratios = [a / b for a, b in zip(per_round["voxproxy"], per_round["bare"], strict=True)]
            level["cpu_per_msg_ratio"] = round(statistics.median(ratios), 3)
        if "voxproxy-capture" in per_msg and "voxproxy" in per_msg:
            pairs = zip(per_round["voxproxy-capture"], per_round["voxproxy"], strict=True)
            level["capture_over_voxproxy"] = round(statistics.median(a / b for a, b in pairs), 3)
        if "voxproxy-pure" in per_msg and "bare" in per_msg:
            pairs = zip(per_round["voxproxy-pure"], per_round["bare"], strict=True)
            level["pure_cpu_per_msg_ratio"] = round(statistics.median(a / b for a, b in pairs), 3)
        rows.append(level)
        table.add_section()
    console.print(table)
    console.print(
        "cpu_per_msg_ratio = voxproxy CPU per message / bare relay CPU per message (same run; "
        "with --rounds, the median of each round's pair). "
        "Added latency is relative to the direct path's median. shed = share of voxproxy's "
        "messages whose analysis it shed (measurement fell behind: figures withheld)."
    )
    record.finish("overhead", {"build": build, "levels": rows}, args)


if __name__ == "__main__":
    main()
