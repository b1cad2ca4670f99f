"""``voxproxy demo``: the six conversation checks (and a noise-only interruption),
run at once through voxproxy against mock agents, some of them with faults.

Everything runs in one process on loopback: four mock agents with different
behaviour, each behind its own proxy; every built-in scenario is called against
several of them at once. The proxy's receipts, the load results, the summary and
the HTML report land in the output directory; a table per scenario shows the
caller's truth next to the proxy's figures and verdict.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

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


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.0f}"


async def run_demo(out: str) -> int:
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
    console.print(
        f"[bold]voxproxy demo[/]: {len(scenarios)} scenarios x {len(AGENTS)} mock agents, "
        f"{len(scenarios) * len(AGENTS) * CALLS_PER_PAIR} real-time calls at once through "
        "voxproxy (about 40 s)…"
    )
    started = time.monotonic()
    bench = await run_bench(
        [
            BenchAgent(a.label, a.config, len(scenarios) * CALLS_PER_PAIR, post_events=True)
            for a in AGENTS
        ],
        scenarios,
        secret=SECRET,
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
            table.add_column(col)
        for c, r, label in zip(calls, results, labels, strict=True):
            if c.scenario.name != scenario.name:
                continue
            ttfs = ", ".join(
                f"{_fmt(t['truth']['ttfs_ms'])}/{_fmt((t['proxy'] or {}).get('ttfs_ms'))}"
                for t in r["turns"]
            )
            stops = ", ".join(
                f"{_fmt(t['truth']['stop_latency_ms'])}/"
                f"{_fmt((t['proxy'] or {}).get('stop_latency_ms'))}"
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
            elif c.receipt is None:
                verdict = "no receipt"
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
    print_summary(summary)
    errors = sum(1 for c in calls if c.record.error or c.receipt is None)
    console.print(
        f"{len(calls)} calls in {time.monotonic() - started:.0f} s; "
        f"{sum(1 for r in results if not r['passed'])} missed an expectation (by design: some "
        f"agents are faulty). Look at {out_dir / 'report.html'}; receipts in {receipts_path}, "
        f"results in {out_dir / 'results.json'} and {out_dir / 'summary.json'}."
    )
    return 1 if errors else 0
