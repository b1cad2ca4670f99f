"""The outcome testbench: did the call really do what the caller asked?

Plays the failure matrix of ``fixtures/testbench/`` (ten corrections, ten
interruptions at different moments, ten tool failures) in real time over
loopback, through voxproxy, against two mock agents at once: a correct one and a
faulty one (every task fault switched on; each fires only when its case comes
up). Each agent posts its state, tool, backend and outcome events to its proxy's
event API; the receipts carry only hashes. Every call is scored on six axes from
its receipt (``voxproxy.loadgen.outcome``), never averaged: end-to-end task
integrity holds only when all six do. Then the failing calls by cause, the
verdicts, and the release gate, per agent.

Run:  .venv/bin/python benchmarks/testbench.py [--scenarios c01_... i06_...]
The last line is one JSON object with the per-axis counts for both agents.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # support.*: the helpers tests and benchmarks share

import record  # noqa: E402
from support.testbench import (  # noqa: E402
    INTERRUPT_STOP_MS,
    OutcomeCall,
    fault_checks,
    load_testbench,
    outcome_policy,
    run_testbench,
)

from voxproxy.loadgen.outcome import AXES, CAUSE_AXIS, CAUSE_TEXT, tally  # noqa: E402
from voxproxy.receipts.policy import Policy  # noqa: E402
from voxproxy.receipts.release import RELEASE_CHECKS, release_gate  # noqa: E402
from voxproxy.receipts.verdict import check  # noqa: E402

SECRET = b"voxproxy-outcome-testbench"
AGENTS = ("correct", "faulty")


def _short(name: str) -> str:
    return name.split("_", 1)[0]


def report(calls: list[OutcomeCall], policy: Policy, elapsed: float) -> dict[str, Any]:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=140)
    by_agent = {a: [c for c in calls if c.agent == a] for a in AGENTS}
    n = len(by_agent["correct"])
    cats = Counter(c.scenario.category for c in by_agent["correct"])
    tallies = {a: tally(c.score for c in by_agent[a]) for a in AGENTS}

    table = Table(
        title=f"outcome testbench: {n} scripted calls per agent "
        f"({cats['correction']} corrections, {cats['interruption']} interruptions, "
        f"{cats['tool_failure']} tool failures) through voxproxy, {elapsed:.0f} s"
    )
    table.add_column("axis (calls where it held)")
    for a in AGENTS:
        table.add_column(f"{a} mock", justify="right")
    for axis in AXES:
        table.add_row(axis, *(f"{tallies[a].axes[axis]} of {n}" for a in AGENTS))
    table.add_row(
        "[bold]end-to-end task integrity[/]",
        *(f"[bold]{tallies[a].integrity} of {n}[/]" for a in AGENTS),
    )
    console.print(table)

    cat_table = Table(title="task integrity by category")
    cat_table.add_column("category")
    for a in AGENTS:
        cat_table.add_column(a, justify="right")
    for cat in ("correction", "interruption", "tool_failure"):
        cells = []
        for a in AGENTS:
            mine = [c for c in by_agent[a] if c.scenario.category == cat]
            cells.append(f"{sum(1 for c in mine if c.score.integrity)} of {len(mine)}")
        cat_table.add_row(cat, *cells)
    console.print(cat_table)

    for a in AGENTS:
        failing = [c for c in by_agent[a] if not c.score.integrity]
        if not failing:
            console.print(f"{a} mock: every call kept end-to-end task integrity.")
            continue
        causes = Table(
            title=f"{a} mock: the {len(failing)} failing calls by cause "
            "(a call may show more than one)"
        )
        for col in ("cause", "calls", "breaks", "scenarios"):
            causes.add_column(col, justify="right" if col == "calls" else "left")
        groups: dict[str, list[str]] = defaultdict(list)
        for c in failing:
            for cause in c.score.causes:
                groups[cause].append(_short(c.scenario.name))
        for cause, names in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            causes.add_row(
                CAUSE_TEXT[cause],  # type: ignore[index]
                str(len(names)),
                str(CAUSE_AXIS[cause] or "-"),  # type: ignore[index]
                ", ".join(sorted(names)),
            )
        console.print(causes)

    checks = [(c, f) for c in by_agent["faulty"] for f in fault_checks(c)]
    caught = sum(1 for _, f in checks if f.caught)
    console.print(
        f"faults that fired in the faulty mock: {len(checks)} in "
        f"{len({c.scenario.name for c, _ in checks})} calls; caught by the axis their cause "
        f"names: {caught} of {len(checks)}"
    )
    for c, f in checks:
        if not f.caught:
            console.print(
                f"  [red]not caught[/]: {c.scenario.name}: {f.fault} -> {f.cause} "
                f"(cause found: {f.cause_found}, {f.axis} failed: {f.axis_failed})"
            )
    correct_faults = [c.scenario.name for c in by_agent["correct"] if c.task and c.task.faults]
    if correct_faults:
        console.print(f"  [red]faults logged by the correct mock[/]: {correct_faults}")

    console.print(
        f"\nverdicts (policy {policy.hash}: default thresholds, barge-in stop limit "
        f"{INTERRUPT_STOP_MS:.0f} ms, critical tools: {', '.join(policy.critical_tools)})"
    )
    out: dict[str, Any] = {"calls": n, "elapsed_s": round(elapsed, 1)}
    for a in AGENTS:
        receipts = [c.receipt for c in by_agent[a] if c.receipt is not None]
        verdicts: Counter[str] = Counter()
        gate: Counter[str] = Counter()
        for r in receipts:
            v = r.verdict
            label = "no verdict" if v is None else v.verdict + (f"/{v.cause}" if v.cause else "")
            verdicts[label] += 1
            t = check("tool_effect", r, policy)
            gate[t.verdict + (f"/{t.cause}" if t.cause else "")] += 1
        rel = release_gate(receipts, policy)
        counts = rel.counts()
        console.print(
            f"  {a}: verdicts {dict(verdicts.most_common())}; tool_effect gate alone "
            f"{dict(gate.most_common())}"
        )
        console.print(
            f"  {a}: release gate {'PASS' if rel.passed else 'FAIL'} over {rel.calls} calls, "
            f"{rel.tool_calls} tool calls ({rel.critical_calls} critical), "
            f"{rel.confirmations} confirmations; findings "
            + ", ".join(f"{k} {counts[k]}" for k in RELEASE_CHECKS)
            + f" in {rel.failing_calls} calls"
        )
        if a == "correct" and not rel.passed:
            for f in rel.findings:
                name = next(
                    c.scenario.name for c in by_agent[a] if c.receipt and c.receipt.call == f.call
                )
                console.print(f"    {f.check}: {name}: {f.cause}")
        missing = sum(1 for c in by_agent[a] if c.receipt is None or c.error)
        t = tallies[a]
        out[a] = {
            **t.axes,
            "integrity": t.integrity,
            "causes": t.causes,
            "verdicts": dict(verdicts),
            "release_gate": {"passed": rel.passed, **counts},
            "calls_missing": missing,
        }
    out["faults_fired"] = len(checks)
    out["faults_caught_by_axis"] = caught
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", nargs="*", help="testbench scenario names (default: all)")
    parser.add_argument("--concurrency", type=int, default=64)
    record.add_flag(parser)
    args = parser.parse_args()
    scenarios = load_testbench(args.scenarios or None)
    policy = outcome_policy(scenarios)
    started = time.monotonic()
    calls = asyncio.run(
        run_testbench(scenarios, secret=SECRET, policy=policy, concurrency=args.concurrency)
    )
    out = report(calls, policy, time.monotonic() - started)
    record.finish("testbench", out, args)


if __name__ == "__main__":
    main()
