"""``voxproxy gate``: the release gate for agents that take consequential actions.

Fails (exit 1) on any stale write after a correction or an interruption, any
confirmation that differs from the backend, any non-idempotent tool retry, and
any call of a critical tool (policy ``critical_tools``) not verified against
the backend; explains on one screen what failed and where. Exit 0 with a short
summary when clean, 2 on bad input.
"""

from __future__ import annotations

import argparse
from typing import Any

from voxproxy.commands._inputs import add_receipt_inputs

MAX_ROWS = 15
"""Findings shown in the table; the rest are counted (one screen)."""

_TITLES = {
    "stale_write": "stale write",
    "confirmation_mismatch": "confirmation ≠ backend",
    "unsafe_retry": "unsafe retry",
    "unverified_critical": "critical, unverified",
}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "gate",
        help="release gate: stale writes, confirmation mismatches, unsafe retries, "
        "unverified critical actions",
        description="Fail when any receipt shows a stale write, a confirmation that differs "
        "from the backend, a non-idempotent retry, or a critical tool call not verified "
        "against the backend (critical_tools in the policy). Exit 1 on any, 2 on bad input.",
    )
    add_receipt_inputs(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from voxproxy.commands._inputs import judged_inputs
    from voxproxy.receipts.release import release_gate

    inputs, policy, why = judged_inputs(args)
    report = release_gate((item.receipt for item in inputs), policy)
    console = Console()
    counts = report.counts()
    tally = " · ".join(f"{_TITLES[c]}: {n}" for c, n in counts.items())
    scope = (
        f"{report.calls} call(s), {report.tool_calls} tool call(s), "
        f"{report.confirmations} confirmation(s), {report.critical_calls} critical action(s) "
        f"(critical tools: {', '.join(policy.critical_tools) or 'none listed'}); "
        f"policy {policy.label}" + (f"; {why}" if why else "")
    )
    if report.passed:
        console.print(Text("release gate: passed", style="bold green"))
        console.print(Text(scope))
        console.print(
            Text(
                "no stale write, no confirmation/backend mismatch, no unsafe retry, "
                "every critical action verified against the backend"
            )
        )
        return 0
    console.print(
        Text(
            f"release gate: FAILED: {len(report.findings)} finding(s) in "
            f"{report.failing_calls} of {report.calls} call(s)",
            style="bold red",
        )
    )
    table = Table(show_edge=False, pad_edge=False)
    for col in ("check", "call", "turn", "operation", "tool", "cause"):
        table.add_column(col, overflow="fold")
    for f in report.findings[:MAX_ROWS]:
        table.add_row(
            Text(_TITLES[f.check]),
            Text(f.call),
            "" if f.turn is None else str(f.turn),
            Text(f.operation_id or ""),
            Text(f.tool or ""),
            Text(f.cause),
        )
    console.print(table)
    hidden = len(report.findings) - MAX_ROWS
    if hidden > 0:
        console.print(Text(f"… and {hidden} more finding(s)"))
    console.print(Text(tally))
    console.print(Text(scope))
    return 1
