"""``voxproxy demo``: the six conversation checks (and a noise-only interruption),
run at once through voxproxy against mock agents, some of them with faults.

Everything runs in one process on loopback: four mock agents with different
behaviour, each behind its own proxy (one worker each, in this process); every built-in
scenario is called against each of them. The callers, the agents and the proxies share
this process's event loop, so the calls run a few at a time (:func:`demo_concurrency`):
28 real-time calls at once on a shared two-core machine made the callers send hundreds of
ms late and the proxies withhold most figures. The proxy's receipts, the load results,
the summary and the HTML report land in the output directory; a table per scenario shows
the caller's truth next to the proxy's figures and verdict, and a sentence under it says
what a ``—`` and an ``insufficient_evidence`` there mean.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from voxproxy.harness.bench import BenchAgent, run_bench
from voxproxy.loadgen.runner import LoadPlan, print_summary, write_results
from voxproxy.loadgen.scenario import builtin_names, find_scenario
from voxproxy.mockagent import MockAgentConfig
from voxproxy.receipts.writer import ReceiptWriter

SECRET = b"voxproxy-demo"


@dataclass(frozen=True, slots=True)
class DemoAgent:
    label: str
    config: MockAgentConfig


AGENTS = (
    DemoAgent(
        "good (twilio, paced, flushes)",
        MockAgentConfig(dialect="twilio", send_mode="paced", delay_ms=650, jitter_ms=80, seed=1),
    ),
    DemoAgent(
        "bursty (raw, 2x faster than real time)",
        MockAgentConfig(
            dialect="raw", send_mode="burst", burst_speedup=2.0, delay_ms=800, jitter_ms=80, seed=2
        ),
    ),
    DemoAgent(
        "slow and never stops (twilio)",
        MockAgentConfig(dialect="twilio", barge_in="never", delay_ms=1700, jitter_ms=150, seed=3),
    ),
    DemoAgent(
        "jumpy: yields to noise (raw)",
        MockAgentConfig(dialect="raw", noise_is_speech=True, delay_ms=700, reaction_ms=90, seed=4),
    ),
)
CALLS_PER_PAIR = 1
# Real-time calls one event loop keeps on time beside its agents and proxies, with other
# work on the machine (two agents' calls each at once).
CALLS_AT_ONCE = 8
WITHHELD_NOTE = (
    "— : the proxy withheld the figure (null in the receipt, with the reason shown): its "
    "evidence did not hold, e.g. noise over the caller's edge (caller_noise), a direction "
    "that never went quiet, or the proxy's own clock running late on a busy machine "
    "(clock_lag, measurement_shed). It says so rather than publish a number it cannot "
    "stand behind. A time to first sound withheld only as too uncertain (an edge that "
    "moves with the talker's level, clock lag) still bounds the answer: where that span "
    "lies wholly on one side of the limit, the verdict is judged on it."
)
INSUFFICIENT_NOTE = (
    "insufficient_evidence: the verdict of a call whose figures the policy judges were "
    "withheld (—) or too uncertain: neither pass nor fail; the gate in brackets names what "
    "could not be judged."
)


def demo_concurrency(total: int, cpus: int | None = None) -> int:
    """How many of the demo's ``total`` calls run at once: :data:`CALLS_AT_ONCE`, half that
    on a machine with one CPU, never fewer than one per agent."""
    n = cpus if cpus is not None else len(os.sched_getaffinity(0))
    at_once = CALLS_AT_ONCE if n >= 2 else CALLS_AT_ONCE // 2
    return max(len(AGENTS), min(total, at_once))


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.0f}"


def _figure(truth: float | None, proxy: dict[str, Any] | None, key: str) -> str:
    """``truth/proxy`` of one figure, the reason after a withheld one."""
    value = (proxy or {}).get(key)
    cell = f"{_fmt(truth)}/{_fmt(value)}"
    reason = (proxy or {}).get("reason")
    return cell + (f" ({reason})" if value is None and reason else "")


def _withheld(turn: dict[str, Any]) -> bool:
    """A figure of the turn has a truth but no proxy figure."""
    proxy = turn["proxy"] or {}
    return any(
        turn["truth"].get(key) is not None and proxy.get(key) is None
        for key in ("ttfs_ms", "stop_latency_ms")
    )


async def run_demo(out: str, concurrency: int | None = None) -> int:
    # The demo's own proxies and event APIs are scaffolding: their start-up lines would
    # only stand in front of the results.
    logging.getLogger("voxproxy.eventapi").setLevel(logging.WARNING)
    console = Console(width=max(Console().width, 120))
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    receipts_path = out_dir / "receipts.jsonl"
    receipts_path.unlink(missing_ok=True)
    writer = ReceiptWriter(receipts_path)
    names = builtin_names()
    scenarios = tuple(find_scenario(n) for n in names)
    total = len(scenarios) * len(AGENTS) * CALLS_PER_PAIR
    at_once = concurrency or demo_concurrency(total)
    console.print(
        f"[bold]voxproxy demo[/]: {len(scenarios)} scenarios x {len(AGENTS)} mock agents, "
        f"{total} real-time calls through voxproxy, {at_once} at a time "
        f"(about {_minutes(total, at_once)})…"
    )
    started = time.monotonic()
    bench = await run_bench(
        [
            BenchAgent(a.label, a.config, len(scenarios) * CALLS_PER_PAIR, post_events=True)
            for a in AGENTS
        ],
        scenarios,
        secret=SECRET,
        concurrency=at_once,
        extra_sinks=[writer.write],
    )
    writer.close()
    calls = [b.outcome for b in bench]
    labels = [b.label for b in bench]
    merged = LoadPlan(
        target="in-process mock agents behind voxproxy",
        dialect="raw+twilio",
        scenarios=scenarios,
        calls=len(calls),
        concurrency=len(calls),
    )
    results, summary = write_results(out_dir, merged, calls)
    for scenario, _base in scenarios:
        table = Table(
            title=f"{scenario.name}: {scenario.description.strip()}", title_justify="left"
        )
        for col in (
            "agent",
            "ttfs truth / proxy (ms)",
            "stop truth / proxy (ms)",
            "barge-in",
            "noise",
            "verdict",
            "expectations",
        ):
            table.add_column(col, overflow="fold")
        withheld = insufficient = False
        for c, r, label in zip(calls, results, labels, strict=True):
            if c.scenario.name != scenario.name:
                continue
            ttfs = ", ".join(
                _figure(t["truth"]["ttfs_ms"], t["proxy"], "ttfs_ms") for t in r["turns"]
            )
            stops = ", ".join(
                _figure(t["truth"]["stop_latency_ms"], t["proxy"], "stop_latency_ms")
                for t in r["turns"]
                if t["barge_in"]
            )
            outcomes = ", ".join(
                str((t["proxy"] or {}).get("outcome") or "—") for t in r["turns"] if t["barge_in"]
            )
            noise = ", ".join(
                ("yielded" if n["agent_yielded"] else "kept talking")
                + ("" if n["proxy_judged_correctly"] is not False else " (proxy wrong)")
                for n in r["noises"]
            )
            verdict = "—"
            if c.receipt is not None and c.receipt.verdict is not None:
                v = c.receipt.verdict
                verdict = v.verdict + (f" ({v.gate})" if v.gate and v.verdict != "pass" else "")
                insufficient |= v.verdict == "insufficient_evidence"
            elif c.receipt is None:
                verdict = "no receipt"
            withheld |= any(_withheld(t) for t in r["turns"])
            table.add_row(
                label,
                ttfs or "—",
                stops,
                outcomes,
                noise,
                verdict,
                "[green]met[/]" if r["passed"] else f"[red]{'; '.join(r['failures'])}[/]",
            )
        console.print(table)
        for note, shown in ((WITHHELD_NOTE, withheld), (INSUFFICIENT_NOTE, insufficient)):
            if shown:
                console.print(f"  {note}", markup=False, highlight=False)
    print_summary(summary)
    if summary.get("all", {}).get("generator_overloaded"):
        console.print(
            f"  (the demo's callers share this process with its agents and proxies: run it "
            f"with fewer calls at once, voxproxy demo --concurrency {max(1, at_once // 2)})",
            markup=False,
            highlight=False,
        )
    errors = sum(1 for c in calls if c.record.error or c.receipt is None)
    console.print(
        f"{len(calls)} calls in {time.monotonic() - started:.0f} s; "
        f"{sum(1 for r in results if not r['passed'])} missed an expectation (by design: some "
        f"agents are faulty). Look at {out_dir / 'report.html'}; receipts in {receipts_path}, "
        f"results in {out_dir / 'results.json'} and {out_dir / 'summary.json'}."
    )
    return 1 if errors else 0


def _minutes(total: int, at_once: int) -> str:
    """About how long the calls take, at about 15 s a round of calls."""
    seconds = 15 * -(-total // at_once) + 10
    return f"{seconds} s" if seconds < 90 else f"{round(seconds / 60)} min"
