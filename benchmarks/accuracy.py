"""How close are the proxy's figures to the truth, call after call?

Runs the built-in scenarios through voxproxy against the mock agent, in real
time over loopback: both dialects (raw, Twilio), both send modes (paced,
bursts ahead of real time), with response jitter, many calls at once. Truth
comes from the two ends: the caller knows when its speech truly started and
ended (the clips' edges, and when each sample was captured) and when each agent
sample played on its own playout timeline; the agent's log says which clip it
sent where. The table compares the proxy's time-to-first-sound and barge-in
stop latency with that truth, on clean calls and on calls with background noise
at 10 dB SNR, and checks that every noise-only interruption (a cough, a door)
was judged correctly: not counted as a barge-in, and a yield to it flagged.

Run:  .venv/bin/python benchmarks/accuracy.py [--calls 300] [--concurrency 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from voxproxy.loadgen.bench import BenchAgent, run_bench  # noqa: E402
from voxproxy.loadgen.results import CallOutcome, evaluate  # noqa: E402
from voxproxy.loadgen.scenario import builtin_names, find_scenario  # noqa: E402
from voxproxy.mockagent import MockAgentConfig  # noqa: E402

SECRET = b"accuracy-benchmark"
NOISY = {"background_noise"}


def agent_configs() -> list[MockAgentConfig]:
    out = []
    seed = 0
    for dialect in ("raw", "twilio"):
        for mode in ("paced", "burst"):
            seed += 1
            out.append(
                MockAgentConfig(
                    dialect=dialect,  # type: ignore[arg-type]
                    send_mode=mode,  # type: ignore[arg-type]
                    delay_ms=500 + 250 * seed,
                    jitter_ms=250.0,
                    reaction_ms=80 + 60 * seed,
                    seed=seed,
                )
            )
    return out


async def run(calls: int, concurrency: int) -> list[CallOutcome]:
    scenarios = tuple(find_scenario(n) for n in builtin_names())
    configs = agent_configs()
    n = len(configs)
    agents = [
        BenchAgent(f"{c.dialect}/{c.send_mode}", c, calls // n + (1 if i < calls % n else 0))
        for i, c in enumerate(configs)
    ]
    bench = await run_bench(agents, scenarios, secret=SECRET, concurrency=concurrency)
    return [b.outcome for b in bench]


def stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"n": 0, "p50": None, "p95": None, "max": None}
    a = np.abs(np.array(values))
    return {
        "n": int(a.size),
        "p50": round(float(np.percentile(a, 50)), 1),
        "p95": round(float(np.percentile(a, 95)), 1),
        "max": round(float(a.max()), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=308)
    parser.add_argument("--concurrency", type=int, default=60)
    args = parser.parse_args()
    started = time.monotonic()
    try:
        import uvloop

        calls = uvloop.run(run(args.calls, args.concurrency))
    except ImportError:
        calls = asyncio.run(run(args.calls, args.concurrency))
    elapsed = time.monotonic() - started
    results = [evaluate(c) for c in calls]
    groups: dict[str, dict[str, list[float]]] = {}
    missing = 0
    noises_total = noises_ok = 0
    for c, r in zip(calls, results, strict=True):
        if c.receipt is None or r["error"]:
            missing += 1
            continue
        cond = "noisy (10 dB SNR)" if c.scenario.name in NOISY else "clean"
        for key in (cond, f"{cond} · {c.dialect}"):
            g = groups.setdefault(key, {"ttfs": [], "stop": []})
            for t in r["turns"]:
                if t["diff"]["ttfs_ms"] is not None:
                    g["ttfs"].append(t["diff"]["ttfs_ms"])
                if t["diff"]["stop_latency_ms"] is not None:
                    g["stop"].append(t["diff"]["stop_latency_ms"])
        for n in r["noises"]:
            noises_total += 1
            noises_ok += 1 if n["proxy_judged_correctly"] else 0

    from rich.console import Console
    from rich.table import Table

    console = Console(width=140)
    table = Table(
        title=f"voxproxy accuracy: |proxy - truth| over {len(calls)} live calls "
        f"({elapsed:.0f} s), built-in scenarios, 4 mock agents (raw/twilio x paced/burst, "
        "250 ms response jitter)"
    )
    for col in (
        "calls",
        "turns",
        "ttfs |err| p50",
        "p95",
        "max",
        "barge-ins",
        "stop |err| p50",
        "p95",
        "max",
    ):
        table.add_column(col, justify="right")
    table.add_column("condition", justify="left")
    for key in sorted(groups):
        g = groups[key]
        t, s = stats(g["ttfs"]), stats(g["stop"])

        def f(x: float | None) -> str:
            return "—" if x is None else f"{x:.1f} ms"

        table.add_row(
            "",
            str(t["n"]),
            f(t["p50"]),
            f(t["p95"]),
            f(t["max"]),
            str(s["n"]),
            f(s["p50"]),
            f(s["p95"]),
            f(s["max"]),
            key,
        )
    console.print(table)
    console.print(
        f"noise-only interruptions judged correctly: {noises_ok} of {noises_total}; "
        f"calls without a receipt or with an error: {missing}"
    )
    clean = groups.get("clean", {"ttfs": [], "stop": []})
    noisy = groups.get("noisy (10 dB SNR)", {"ttfs": [], "stop": []})
    tc, sc, tn = stats(clean["ttfs"]), stats(clean["stop"]), stats(noisy["ttfs"])
    headline: dict[str, Any] = {
        "calls": len(calls),
        "turns": sum(len(g["ttfs"]) for k, g in groups.items() if "·" not in k),
        "ttfs_err_ms_p95": tc["p95"],
        "ttfs_err_ms_max": tc["max"],
        "stop_err_ms_p95": sc["p95"],
        "stop_err_ms_max": sc["max"],
        "noisy_ttfs_err_ms_p95": tn["p95"],
        "noisy_ttfs_err_ms_max": tn["max"],
        "noise_interruptions": noises_total,
        "false_barge_in_errors": noises_total - noises_ok,
        "calls_missing": missing,
    }
    print(json.dumps(headline))


if __name__ == "__main__":
    main()
