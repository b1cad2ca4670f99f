"""Capacity: the most real-time Twilio calls a relay sustains, per core, and overload.

For each relay, the largest number of concurrent calls at which the p99 added
one-way latency stays <= ``--max-p99-ms`` (5 ms) with no failed call and, for voxproxy,
nothing shed (its receipts' ``measurement_shed``: a count at which the proxy keeps
forwarding but no longer measures everything is not a count it measures):

* ``voxproxy``: ``voxproxy proxy --workers 1 --dialect twilio --max-calls 0``, measuring
  everything (receipts written, telemetry off), on one core;
* ``voxproxy-2w``: the same with ``--workers 2`` on two cores (SO_REUSEPORT workers);
  its calls per core are its count / 2, and its ratio to ``voxproxy`` is the scaling;
* ``bare``: the minimal relay of ``benchmarks/overhead.py`` on the stock websockets
  asyncio layer (one forwarding task per direction), measuring nothing;
* ``nginx``: Debian's nginx proxying websockets, one process (``master_process
  off``, so the one worker is the process measured), minimal config in a temp dir.

Each call is overhead.py's load: 20 ms Twilio ``media`` messages both ways (mu-law
speech from the fixtures, the sender's monotonic time in a ``"t"`` field), plus
``connected`` and ``start``. A relay on k cores runs on CPUs 0..k-1 (pinned before it
starts, so its workers inherit it; its CPU is the whole process tree's), the load
(callers and agent in one process) on CPU k, or on the last CPU when the machine has
no more (then it shares a core with the relay: flagged in the table and the JSON).
Added latency = one-way latency through the relay minus the median one-way latency
of the direct path (no relay) at the same number of calls, measured in the same run
(as overhead.py defines it).

The load generator is not overhead.py's: that one runs on the stock websockets
asyncio layer (a task and a ``sleep`` per call and direction, a ``json.loads`` per
message received) and itself saturates its core below the counts measured here. This
one (capacity_load.py) writes and cuts RFC 6455 frames itself on plain asyncio
protocols, no websockets protocol object a call, and sends every call's frames from
one 1 ms timer, each call at its own phase of the 20 ms frame; it reuses overhead.py's
helpers (speech frames, pinning, CPU from /proc, ports). Its own limit is reported: a
level where the direct path itself misses the bound, or where its pacing lags, is
load-limited, and the search stops there. So that voxproxy's count is its own, the
JSON's ``load_headroom`` says whether the load alone carried ``--headroom`` (2) times
it on the direct path (a majority of runs), voxproxy's CPU over the load's in the same
runs, and the share of a core the load (one process) used at voxproxy's count.

Search: levels grow geometrically (``--start`` 100, or 100 x F with ``--core-share F``,
x``--growth`` 1.4) while any relay still passes and the load keeps up; then each relay's
bound is bisected (at most ``--bisect-steps`` 5, until the bracket is within
``--resolution``; the summary gives each count with the least count seen to fail, and
the 2-worker ratio with the range those brackets allow). One 4 s window's p99 is a noisy
pass or fail near the bound (2026-12-04: two workers failed 92 and 105 calls in two
searches, then passed 110 in 4 runs of 4): so each count's verdict is the majority of up
to ``--runs-per-level`` 3 runs, for the relays and for the direct path's check that the
load keeps up (1: one run each, half the time). The direct path is measured
once per level and shared; its median at a bisection point is interpolated between
levels. The machine may be shared: a run during which other processes used more than
``--max-foreign`` (5%) of a core (the machine's busy time in /proc/stat less ours) is
repeated, up to 3 runs (the table shows how many); runs still disturbed are counted in
the JSON line and flagged in a warning.

Also printed: each relay's CPU per call-second (median over its runs below 90% of a
core) and what a full core would carry on CPU alone. Per-message costs measured at
partial load run higher than in a busy loop (a process that sleeps between messages
wakes with cold caches; on this VM about 1.5x), so that estimate is conservative.
``--relays`` may add ``forward-only`` (voxproxy's relay with measurement off).

Core shares (``--core-share F``), for a machine with too few cores to give two workers
two cores and the load a third: every relay process (each of voxproxy's workers) is
given F of one core of its own (``benchmarks/cpushare.py``: a cgroup's CPU bandwidth
with a 2.2 ms period at F = 0.45, pinned, nice -20; root needed) and the load runs on what is
left. Calls per core are then counts / (workers x F), and ``voxproxy-2w`` / ``voxproxy``
is the workers' scaling at equal CPU each.

Overload (``--overload 1.2``): once ``voxproxy``'s capacity C is found, C x 1.2 calls are
placed on one worker twice: with ``--max-calls C`` (the operator's admission limit at the
measured capacity) and with no limit. Reported: calls admitted and refused (HTTP 503 at
the handshake), and the added latency p99 of the admitted calls. With no limit, what is
refused is the proxy's admission on measured load: measurement more than 100 ms behind
the calls (it yields to forwarding while the loop runs late, so a full core shows there
first), measurement shedding, or the loop's median lag of the last second over
``--max-loop-lag-ms`` (default 100).

Run:  .venv/bin/python benchmarks/capacity.py [--window 4] [--max-calls 800]
Prints a table, then one JSON line: the counts, calls per core and the ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # support.*: the helpers tests and benchmarks share

import benchkit  # noqa: E402
import numpy as np  # noqa: E402
import overhead  # noqa: E402  (benchmarks/overhead.py: frames, pinning, CPU, bare relay)
import record  # noqa: E402
from capacity_load import run_load  # noqa: E402  (the load side, a subprocess mode)
from capacity_relays import (  # noqa: E402
    Run,
    busy_s,
    confine,
    own_s,
    start_relay,
    tree_cpu_seconds,
)
from cpushare import CoreShares  # noqa: E402
from support.child import stop  # noqa: E402

from voxproxy import native  # noqa: E402
from voxproxy.harness.ports import free_port  # noqa: E402

ROOT = overhead.ROOT
PY = overhead.PY
CPUS = sorted(os.sched_getaffinity(0))
RELAY_CORES = {"voxproxy-2w": 2}  # cores (and workers) per relay; the others: 1
RELAYS = ("voxproxy", "voxproxy-2w", "bare")  # (nginx too, with --relays)
SHARE: float | None = None  # --core-share: each relay process gets this much of a core


def cores_of(path: str) -> float:
    """The CPU a relay is given: its cores, or its workers' shares of one."""
    workers = RELAY_CORES.get(path, 1)
    return workers if SHARE is None else workers * SHARE


def relay_cpus(path: str) -> set[int]:
    return set(CPUS[: RELAY_CORES.get(path, 1)])


def load_cpu_of(path: str) -> int:
    """The load's CPU: the first one the relay does not use, else the last (shared)."""
    k = RELAY_CORES.get(path, 1)
    return CPUS[k] if len(CPUS) > k else CPUS[-1]


def load_shares_relay(path: str) -> bool:
    return SHARE is None and load_cpu_of(path) in relay_cpus(path)


def measure(path: str, calls: int, warmup: float, window: float, max_calls: int = 0) -> Run:
    agent_port = free_port()
    relay = None
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="capacity-")))
        if path == "direct":
            target = agent_port
        else:
            target = free_port()
            workers = RELAY_CORES.get(path, 1)
            cpus = relay_cpus(path) if SHARE is None else set(CPUS)  # (with shares: confine)
            relay = start_relay(path, target, agent_port, tmp, max_calls, workers, cpus)
            if SHARE is not None:
                shares = stack.enter_context(CoreShares(SHARE, f"capacity-{os.getpid()}"))
                confine(relay, workers if path.startswith("voxproxy") else 1, shares)
        cmd = [PY, __file__, "--load", str(target), str(agent_port), str(calls)]
        cmd += ["--warmup", str(warmup), "--window", str(window)]
        load = subprocess.Popen(cmd, stdout=subprocess.PIPE, cwd=ROOT, text=True)
        if SHARE is None:  # (with shares, the load runs wherever the relays leave room)
            overhead._pin(load.pid, load_cpu_of(path))
        assert load.stdout is not None
        cpu0 = load_cpu0 = t0 = 0.0
        busy0 = own0 = 0.0
        relay_cpu = load_cpu = foreign = float("nan")
        result: dict[str, Any] = {}
        for line in load.stdout:
            if line.startswith("window-start"):
                t0 = time.monotonic()
                cpu0 = tree_cpu_seconds(relay.pid) if relay else 0.0
                load_cpu0 = overhead._cpu_seconds(load.pid)
                busy0, own0 = busy_s(), own_s()
            elif line.startswith("window-end"):
                elapsed = time.monotonic() - t0
                relay_cpu = (tree_cpu_seconds(relay.pid) - cpu0) / elapsed if relay else 0.0
                load_cpu = (overhead._cpu_seconds(load.pid) - load_cpu0) / elapsed
                ours = (relay_cpu + load_cpu) * elapsed + own_s() - own0
                foreign = max(0.0, (busy_s() - busy0 - ours) / elapsed)
            elif line.startswith("{"):
                result = json.loads(line)
        load.communicate(timeout=60)  # (and closes its pipe)
        shed = 0.0
        if relay is not None:
            stop(relay, timeout_s=20)
            receipts = tmp / "receipts.jsonl"
            if path.startswith("voxproxy") and receipts.exists():
                shed = overhead._shed_share(receipts)
    return Run(
        path,
        calls,
        result.get("p50_ms", float("nan")),
        result.get("p99_ms", float("nan")),
        result.get("max_ms", float("nan")),
        result.get("errors", calls),
        result.get("messages", 0),
        relay_cpu,
        load_cpu,
        result.get("lag_p99_ms", float("nan")),
        foreign,
        refused=result.get("refused", 0),
        opened=result.get("opened", 0),
        shed=shed,
    )


def measure_settled(
    path: str, calls: int, warmup: float, window: float, max_foreign: float, max_calls: int = 0
) -> Run:
    """``measure``, repeated (up to 3 times) while other processes disturb the run."""
    for attempt in range(1, 4):
        r = measure(path, calls, warmup, window, max_calls)
        r.attempts = attempt
        if not r.disturbed(max_foreign):
            break
        print(f"  (disturbed: {_line(r)}; again)", file=sys.stderr, flush=True)
    return r


# -- the search ---------------------------------------------------------------------------------


def _ratio_range(
    passed_a: int, failed_a: int | None, passed_b: int, failed_b: int | None
) -> list[float | None]:
    """The least and most ``a / b`` can be when each count lies between what passed and
    one call fewer than what failed (None: no failure seen, no upper bound)."""
    low = round(passed_a / (failed_b - 1), 3) if failed_b is not None and failed_b > 1 else None
    high = round((failed_a - 1) / passed_b, 3) if failed_a is not None else None
    return [low, high]


def _majority(
    trial: Callable[[], bool], runs: int, stop: Callable[[], bool] = lambda: False
) -> bool:
    """Whether most of up to ``runs`` calls of ``trial`` pass: calls stop once the majority
    is decided, or after a failing one when ``stop()`` says more would not tell."""
    need = runs // 2 + 1
    passes = fails = 0
    while passes < need and fails < need:
        if trial():
            passes += 1
        else:
            fails += 1
            if stop():
                break
    return passes >= need


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", nargs=3, type=int, metavar=("TARGET", "AGENT", "CALLS"))
    parser.add_argument("--warmup", type=float, default=1.5)
    parser.add_argument("--window", type=float, default=4.0, help="seconds measured per run")
    parser.add_argument("--max-p99-ms", type=float, default=5.0)
    parser.add_argument(
        "--start",
        type=int,
        help="first level (calls; default 100, with --core-share F: 100 x F)",
    )
    parser.add_argument("--growth", type=float, default=1.4, help="level factor")
    parser.add_argument("--resolution", type=float, default=0.05, help="bisect to this fraction")
    parser.add_argument("--bisect-steps", type=int, default=5, help="at most, per relay")
    parser.add_argument(
        "--runs-per-level",
        type=int,
        default=3,
        help="a relay holds a count (and the load keeps up with it) when most of this many "
        "runs at it pass (odd; runs stop once the majority is decided): one window's p99 "
        "is a noisy pass or fail",
    )
    parser.add_argument("--max-calls", type=int, default=800)
    parser.add_argument("--max-lag-ms", type=float, default=3.0, help="load pacing lag limit")
    parser.add_argument(
        "--max-load-cpu",
        type=float,
        default=0.9,
        help="a relay that fails while the load uses more of its core than this is "
        "load-limited (its count is a lower bound)",
    )
    parser.add_argument(
        "--max-foreign",
        type=float,
        default=0.05,
        help="a run is disturbed (and repeated, up to 3 times) when other processes used more "
        "than this share of a core during its window (from /proc/stat, minus our own)",
    )
    parser.add_argument("--relays", default=",".join(RELAYS))
    parser.add_argument(
        "--headroom",
        type=float,
        default=2.0,
        help="then check that the load alone keeps up with this many times voxproxy's count "
        "on the direct path (0: skip): the count is the relay's only if it does",
    )
    parser.add_argument(
        "--overload",
        type=float,
        default=1.2,
        help="then place this many times voxproxy's capacity on one worker, with --max-calls "
        "at the capacity and without a limit (0: skip)",
    )
    parser.add_argument(
        "--core-share",
        type=float,
        help="give every relay process (each voxproxy worker) this share of one core of its "
        "own, the load the rest (cgroup CPU bandwidth; root): scaling on too few cores",
    )
    record.add_flag(parser)
    args = parser.parse_args()
    global SHARE
    SHARE = args.core_share
    if args.runs_per_level < 1 or args.runs_per_level % 2 == 0:
        parser.error(f"--runs-per-level: an odd count of runs, not {args.runs_per_level}")
    if args.start is None:
        args.start = max(10, round(100 * (SHARE or 1.0)))
    if args.load:
        import uvloop

        target, agent, calls = args.load
        uvloop.run(run_load(target, agent, calls, args.warmup, args.window))
        return
    if os.cpu_count() is None or (os.cpu_count() or 1) < 2:
        print("warning: fewer than 2 CPUs; relay and load share a core", file=sys.stderr)

    from rich.console import Console

    relays = [r for r in args.relays.split(",") if r]
    foreign = args.max_foreign
    runs: list[Run] = []
    direct: dict[int, Run] = {}
    t_begin = time.monotonic()

    def measure_direct(n: int) -> Run:
        d = measure_settled("direct", n, args.warmup, args.window, foreign)
        d.added_p99_ms = d.p99_ms - d.p50_ms
        runs.append(d)
        print(_line(d), file=sys.stderr, flush=True)
        return d

    def run_direct(n: int) -> Run:
        """The direct path at ``n`` calls, measured once (its figures serve every relay)."""
        if n not in direct:
            direct[n] = measure_direct(n)
        return direct[n]

    def direct_ok(d: Run) -> bool:
        return (
            d.errors == 0 and d.added_p99_ms <= args.max_p99_ms and d.lag_p99_ms <= args.max_lag_ms
        )

    def load_ok(n: int) -> bool:
        """Whether the load keeps up at ``n`` calls on the direct path: the majority of up
        to ``--runs-per-level`` runs, as for a relay (the first run's figures are kept)."""
        tried: list[bool] = []

        def trial() -> bool:
            d = measure_direct(n) if tried else run_direct(n)
            tried.append(True)
            return direct_ok(d)

        return _majority(trial, args.runs_per_level)

    def direct_p50(n: int) -> float:
        """The direct path's median one-way latency at ``n`` calls: measured at each level,
        interpolated between levels (for the bisection steps)."""
        if n in direct:
            return direct[n].p50_ms
        xs = sorted(direct)
        return float(np.interp(n, xs, [direct[x].p50_ms for x in xs]))

    load_bound: set[str] = set()

    def run_once(path: str, n: int) -> bool:
        r = measure_settled(path, n, args.warmup, args.window, foreign)
        r.added_p99_ms = r.p99_ms - direct_p50(n)
        runs.append(r)
        print(_line(r), file=sys.stderr, flush=True)
        ok = r.ok(args.max_p99_ms)
        if not ok and r.load_cpu > args.max_load_cpu:
            load_bound.add(path)  # the load generator, not the relay, ran out of CPU
        return ok

    def run(path: str, n: int) -> bool:
        """Whether ``path`` holds ``n`` calls: the majority of up to ``--runs-per-level``
        runs (they stop once the majority is decided, or the load runs out of CPU)."""
        return _majority(lambda: run_once(path, n), args.runs_per_level, lambda: path in load_bound)

    passed = {p: 0 for p in relays}
    failed: dict[str, int | None] = {p: None for p in relays}
    load_limit: int | None = None
    n = args.start
    while n <= args.max_calls and any(failed[p] is None for p in relays):
        if not load_ok(n):
            load_limit = n
            break
        for p in relays:
            if failed[p] is None and p not in load_bound:
                if run(p, n):
                    passed[p] = n
                elif p not in load_bound:
                    failed[p] = n
        if all(failed[p] is not None or p in load_bound for p in relays):
            break
        n = max(n + 1, round(n * args.growth))
    for p in relays:
        hi = failed[p]
        for _ in range(args.bisect_steps):
            if hi is None or hi - passed[p] <= max(5, args.resolution * passed[p]):
                break
            mid = (passed[p] + hi) // 2
            if run(p, mid):
                passed[p] = mid
            else:
                hi = mid
        failed[p] = hi

    headroom: dict[str, Any] = {}
    if args.headroom > 0 and passed.get("voxproxy"):
        n = round(passed["voxproxy"] * args.headroom)
        headroom = {"factor": args.headroom, "calls": n, "load_keeps_up": load_ok(n)}
        mine = [r for r in runs if r.path == "voxproxy" and r.calls and r.relay_cpu == r.relay_cpu]
        ratio = np.median([r.relay_cpu / r.load_cpu for r in mine if r.load_cpu > 0])
        headroom["relay_cpu_over_load"] = round(float(ratio), 2)  # (in the same runs)
        at = [r.load_cpu for r in mine if r.calls == passed["voxproxy"]]  # (one process)
        headroom["load_cpu_at_count"] = round(float(np.median(at)), 3)
    overload: dict[str, Any] = {}
    overload_runs: list[tuple[str, Run]] = []
    capacity = passed.get("voxproxy", 0)
    if args.overload > 0 and capacity:
        n = round(capacity * args.overload)
        run_direct(n)
        for label, limit in ((f"--max-calls {capacity}", capacity), ("no limit", 0)):
            r = measure_settled("voxproxy", n, args.warmup, args.window, foreign, limit)
            r.added_p99_ms = r.p99_ms - direct_p50(n)
            overload_runs.append((label, r))
            print(f"overload, {label}: {_line(r)}", file=sys.stderr, flush=True)
        overload = {"factor": args.overload, "calls": n, "capacity": capacity}
        for key, (_label, r) in zip(
            ("with_max_calls", "without_limit"), overload_runs, strict=True
        ):
            overload[key] = {
                "admitted": r.opened,
                "refused": r.refused,
                "errors": r.errors,
                "p99_added_ms": round(r.added_p99_ms, 2),
                "relay_cpu": round(r.relay_cpu, 2),
                "shed": round(r.shed, 4),
            }
        # With no --max-calls, every refusal is the admission on measured load.
        overload["lag_admission_refused"] = overload["without_limit"]["refused"]

    console = Console(width=150, stderr=False)
    build = native.build()
    table = benchkit.figures_table(
        "capacity: real-time Twilio calls per relay (voxproxy-2w: 2 workers, "
        + ("2 cores" if SHARE is None else f"each on {SHARE:g} of a core, as every relay")
        + f"); voxproxy's measurement core: {build} (VOXPROXY_PURE_PYTHON=1: the sources)",
        ("path", "calls", "p50 one-way", "p99 one-way", "p99 added", "relay CPU",
         "CPU/call-s", "load CPU", "load lag p99", "others' CPU", "runs", "errors",
         "shed", "ok"),
    )  # fmt: skip
    for r in sorted(runs, key=lambda r: (r.path, r.calls)):
        ok = r.ok(args.max_p99_ms)
        table.add_row(
            r.path,
            str(r.calls),
            f"{r.p50_ms:.2f} ms",
            f"{r.p99_ms:.2f} ms",
            f"{r.added_p99_ms:.2f} ms",
            "" if r.path == "direct" else f"{r.relay_cpu * 100:.0f}%",
            "" if r.path == "direct" else f"{r.relay_cpu * 1000 / r.calls:.2f} ms",
            f"{r.load_cpu * 100:.0f}%",
            f"{r.lag_p99_ms:.2f} ms",
            f"{r.foreign * 100:.0f}%",
            str(r.attempts),
            str(r.errors),
            f"{100 * r.shed:.1f}%" if r.path.startswith("voxproxy") else "",
            "yes" if ok else "NO",
        )
    console.print(table)
    if overload_runs:
        over = benchkit.figures_table(
            f"overload: {overload['calls']} calls on one worker "
            f"({args.overload:.0%} of its capacity, {capacity})",
            ("admission", "admitted", "refused (503)", "errors", "p99 added", "relay CPU"),
        )
        for label, r in overload_runs:
            over.add_row(
                label,
                str(r.opened),
                str(r.refused),
                str(r.errors),
                f"{r.added_p99_ms:.2f} ms",
                f"{r.relay_cpu * 100:.0f}%",
            )
        console.print(over)
        console.print(
            "no limit: the calls refused were refused by the admission on measured load "
            "(measurement behind or shedding, event-loop lag over --max-loop-lag-ms): "
            f"{overload['lag_admission_refused']}"
        )
    summary: dict[str, Any] = {
        "max_p99_added_ms": args.max_p99_ms,
        "cpus": len(CPUS),
        "build": build,
        "core_share": SHARE,
        "runs_per_level": args.runs_per_level,
    }
    for p in relays:
        summary[f"{p}_calls"] = passed[p]
        summary[f"{p}_failed_at"] = failed[p]  # the least count seen to fail (None: none)
        bound = "relay" if failed[p] is not None else "load"
        if failed[p] is None and p not in load_bound and load_limit is None:
            bound = "max_calls"  # never failed up to --max-calls
        summary[f"{p}_bound"] = bound
        mine = [r for r in runs if r.path == p and r.relay_cpu == r.relay_cpu and r.calls]
        if mine:  # CPU per call-second, from the runs below saturation
            per_call = [r.relay_cpu / r.calls for r in mine if r.relay_cpu < 0.9] or [
                r.relay_cpu / r.calls for r in mine
            ]
            summary[f"{p}_cpu_ms_per_call_s"] = round(1000 * float(np.median(per_call)), 3)
            # What one full core would carry on CPU alone (latency aside).
            summary[f"{p}_calls_at_full_core"] = round(1 / float(np.median(per_call)))
    for p in relays:
        summary[f"{p}_calls_per_core"] = round(passed[p] / cores_of(p), 1)
    summary["load_shares_relay_core"] = [p for p in relays if load_shares_relay(p)]
    if "voxproxy" in relays and "voxproxy-2w" in relays and passed["voxproxy"]:
        summary["voxproxy_2w_over_1w"] = round(passed["voxproxy-2w"] / passed["voxproxy"], 3)
        summary["voxproxy_2w_over_1w_range"] = _ratio_range(
            passed["voxproxy-2w"], failed["voxproxy-2w"], passed["voxproxy"], failed["voxproxy"]
        )
    if "voxproxy" in relays and "bare" in relays and passed["bare"]:
        summary["voxproxy_over_bare"] = round(passed["voxproxy"] / passed["bare"], 3)
    if "voxproxy" in relays and "nginx" in relays and passed["nginx"]:
        summary["voxproxy_over_nginx"] = round(passed["voxproxy"] / passed["nginx"], 3)
    summary["load_limit_calls"] = load_limit
    if headroom:
        summary["load_headroom"] = headroom
    disturbed = [r for r in runs if r.disturbed(foreign)]
    summary["disturbed_runs"] = len(disturbed)
    if overload:
        summary["overload"] = overload
    summary["seconds"] = round(time.monotonic() - t_begin)
    for p in relays:
        bound = {
            "relay": "its own limit",
            "load": "the load generator's limit: a lower bound",
            "max_calls": "--max-calls reached: a lower bound",
        }[summary[f"{p}_bound"]]
        cores = f"{cores_of(p):g}"
        shared = " (the load shares one of its cores)" if load_shares_relay(p) else ""
        fails = f", {failed[p]} failed" if failed[p] is not None else ""
        console.print(
            f"{p}: {passed[p]} calls on {cores} core(s){fails}, "
            f"{summary[f'{p}_calls_per_core']} per core ({bound}){shared}"
        )
    if "voxproxy_2w_over_1w" in summary:
        low, high = summary["voxproxy_2w_over_1w_range"]
        within = f" (the counts' brackets allow {low}-{high})" if high != low else ""
        console.print(f"voxproxy 2 workers / 1 worker = {summary['voxproxy_2w_over_1w']}{within}")
    if "voxproxy_over_bare" in summary:
        ratios = f"voxproxy / bare = {summary['voxproxy_over_bare']}"
        if "voxproxy_over_nginx" in summary:
            ratios += f", voxproxy / nginx = {summary['voxproxy_over_nginx']}"
        console.print(ratios)
    if headroom:
        kept = "kept up" if headroom["load_keeps_up"] else "did NOT keep up (no proof)"
        console.print(
            f"the load alone at {headroom['factor']:g}x voxproxy's count: {kept}; voxproxy's CPU "
            f"a call {headroom['relay_cpu_over_load']}x the load's; the load used "
            f"{headroom['load_cpu_at_count']:.0%} of a core at voxproxy's count"
        )
    if disturbed:
        console.print(
            f"[bold red]warning[/]: {len(disturbed)} of {len(runs)} runs stayed disturbed by "
            "other processes after 3 tries (others' CPU column): these figures are not reliable; "
            "run again on a quiet machine"
        )
    record.finish("capacity", summary, args)


def _line(r: Run) -> str:
    return (
        f"{r.path:>8} {r.calls:5d} calls: p50 {r.p50_ms:6.2f} p99 {r.p99_ms:6.2f} "
        f"added p99 {r.added_p99_ms:6.2f} ms, relay CPU {r.relay_cpu * 100:4.0f}%, "
        f"load CPU {r.load_cpu * 100:4.0f}%, lag p99 {r.lag_p99_ms:5.2f} ms, errors {r.errors}, "
        f"refused {r.refused}, shed {100 * r.shed:.1f}%, "
        f"others' CPU {r.foreign * 100:.0f}%"
    )


if __name__ == "__main__":
    main()
