"""``voxproxy receipts``: query the receipt store.

Filters by verdict, time range (``--since`` inclusive, ``--until`` exclusive,
ISO 8601; times without an offset are UTC), dialect and terminal state; prints
a table, or the receipts themselves as JSON lines with ``--json``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from voxproxy.errors import ConfigError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "receipts",
        help="query the receipt store (--store) by verdict, time, dialect, terminal state",
        description="List receipts from the SQLite store the proxy writes with --store.",
    )
    p.add_env_argument("--store", required=True, metavar="PATH", help="the receipt store")
    p.add_argument(
        "--verdict",
        action="append",
        default=[],
        metavar="VERDICT",
        help="only this verdict (repeatable; 'none' for receipts without one)",
    )
    p.add_argument("--since", default=None, metavar="ISO", help="started at or after this time")
    p.add_argument("--until", default=None, metavar="ISO", help="started before this time")
    p.add_argument("--dialect", default=None, help="only this dialect")
    p.add_argument("--terminal", default=None, help="only this terminal state")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="at most N receipts")
    p.add_argument("--json", action="store_true", help="print the receipts as JSON lines")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from typing import get_args

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from voxproxy.receipts.model import Terminal
    from voxproxy.receipts.store import StoreQuery, query_receipts
    from voxproxy.receipts.verdict import VERDICTS

    known = {*VERDICTS, "none"}
    for v in args.verdict:
        if v not in known:
            raise ConfigError(f"--verdict {v!r}: expected one of {', '.join(sorted(known))}")
    if args.terminal is not None and args.terminal not in get_args(Terminal):
        raise ConfigError(
            f"--terminal {args.terminal!r}: expected one of {', '.join(get_args(Terminal))}"
        )
    if args.limit is not None and args.limit <= 0:
        raise ConfigError(f"--limit must be positive, got {args.limit}")
    query = StoreQuery(
        verdicts=tuple(args.verdict),
        since=args.since,
        until=args.until,
        dialect=args.dialect,
        terminal=args.terminal,
        limit=args.limit,
    )
    receipts = list(query_receipts(args.store, query))
    if args.json:
        for r in receipts:
            sys.stdout.write(r.to_json_line())
        return 0
    table = Table(title=f"{len(receipts)} receipt(s) in {args.store}", title_justify="left")
    for col in ("started", "call", "dialect", "terminal", "duration", "verdict", "gate", "cause"):
        table.add_column(col, justify="right" if col == "duration" else "left", overflow="fold")
    for r in receipts:
        v = r.verdict
        if v is None:
            verdict, gate, cause = Text("—"), "", ""
        else:
            style = "green" if v.verdict == "pass" else "red"
            verdict, gate, cause = Text(v.verdict, style=style), v.gate or "", v.cause or ""
        table.add_row(
            Text(r.started_at),
            Text(r.call),
            Text(r.dialect),
            Text(r.terminal),
            f"{r.duration_ms / 1000:.1f} s",
            verdict,
            Text(gate),
            Text(cause),
        )
    Console().print(table)
    return 0
