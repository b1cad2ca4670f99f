"""``voxproxy verdict``: judge receipts against a policy, gate by gate.

Prints one row per call (verdict, gate, cause, reason), then counts per
verdict and cause; writes JUnit XML for CI systems with ``--junit``. Receipts
that already carry a verdict are judged again under the given policy.

Exit status: 0 when every call passes, 1 when any call does not (a failed gate
or insufficient evidence), 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxproxy.commands._inputs import add_receipt_inputs
from voxproxy.core.errors import ConfigError

if TYPE_CHECKING:
    from voxproxy.commands._inputs import Sourced
    from voxproxy.core.receipt import VerdictRecord


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "verdict",
        help="judge receipts against a verdict policy (gates, causes, JUnit XML)",
        description="Judge each receipt with the ordered gates of the policy: reachability, "
        "turn timing, interruption, tool effect, outcome. The first gate that does not pass "
        "names the verdict. Exit 1 when any call does not pass, 2 on bad input.",
    )
    add_receipt_inputs(p)
    p.add_argument("--junit", default=None, metavar="FILE", help="write JUnit XML to FILE")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from voxproxy.commands._inputs import judged_inputs
    from voxproxy.receipts.verdict import judge

    inputs, policy, why = judged_inputs(args)
    rows: list[tuple[Sourced, VerdictRecord]] = []
    changed = 0
    for item in inputs:
        record = judge(item.receipt, policy)
        before = item.receipt.verdict
        if before is not None and (before.verdict, before.cause) != (record.verdict, record.cause):
            changed += 1
        rows.append((item, record))

    console = Console()
    if why is not None:
        console.print(Text(f"policy: {why}"))
    table = Table(title=f"verdicts under policy {policy.label}", title_justify="left")
    for col in ("call", "verdict", "gate", "cause", "reason"):
        table.add_column(col, overflow="fold")
    for item, record in rows:
        style = "green" if record.verdict == "pass" else "red"
        table.add_row(
            Text(item.receipt.call),
            Text(record.verdict, style=style),
            Text(record.gate or ""),
            Text(record.cause or ""),
            Text(record.reason or ""),
        )
    console.print(table)

    counts = Counter((r.verdict, r.gate or "", r.cause or "") for _, r in rows)
    summary = Table(title="by verdict and cause", title_justify="left")
    for col in ("verdict", "gate", "cause", "calls"):
        summary.add_column(col, justify="right" if col == "calls" else "left", overflow="fold")
    for (verdict, gate, cause), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        summary.add_row(verdict, gate, cause, str(n))
    console.print(summary)

    failing = sum(1 for _, r in rows if r.verdict != "pass")
    line = f"{len(rows)} call(s): {len(rows) - failing} pass, {failing} not passing"
    if changed:
        line += f"; {changed} carried a different verdict before"
    console.print(line)

    if args.junit:
        _write_junit(Path(args.junit), rows, policy.hash, policy.version)
    return 1 if failing else 0


def _write_junit(
    path: Path, rows: list[tuple[Sourced, VerdictRecord]], policy_hash: str, policy_version: str
) -> None:
    failures = sum(1 for _, r in rows if r.verdict != "pass")
    suites = ET.Element(
        "testsuites", name="voxproxy", tests=str(len(rows)), failures=str(failures), errors="0"
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="voxproxy.verdict",
        tests=str(len(rows)),
        failures=str(failures),
        errors="0",
        skipped="0",
    )
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="policy", value=policy_hash)
    ET.SubElement(props, "property", name="policy_version", value=policy_version)
    for item, record in rows:
        receipt = item.receipt
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"voxproxy.verdict.{Path(item.source).name}",
            name=receipt.call,
            time=f"{receipt.duration_ms / 1000:.3f}",
        )
        if record.verdict != "pass":
            failure = ET.SubElement(
                case,
                "failure",
                type=record.verdict,
                message=f"{record.verdict} at gate {record.gate}: {record.reason}",
            )
            failure.text = "\n".join(
                [
                    f"verdict: {record.verdict}",
                    f"gate: {record.gate}",
                    *([f"cause: {record.cause}"] if record.cause else []),
                    f"reason: {record.reason}",
                    f"started_at: {receipt.started_at}",
                    "evidence: " + json.dumps(record.evidence, sort_keys=True),
                ]
            )
    tree = ET.ElementTree(suites)
    ET.indent(tree)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tree.write(path, encoding="utf-8", xml_declaration=True)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write JUnit XML: {exc.strerror or exc}") from None
