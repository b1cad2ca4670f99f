"""``voxproxy receipts``: query the receipt store; ``voxproxy receipts export``: flat
tables of receipts for analysts (Parquet or JSON lines, :mod:`voxproxy.receipts.export`).

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
        help="query the receipt store (--store) by verdict, time, dialect, terminal state; "
        "`receipts export`: Parquet or JSON lines for DuckDB and friends",
        description="List receipts from the SQLite store the proxy writes with --store. "
        "`voxproxy receipts export --help` writes them as flat tables instead.",
    )
    p.add_env_argument(
        "--store", default=None, metavar="PATH", help="the receipt store (proxy --store)"
    )
    p.add_env_argument(
        "--receipts",
        default=None,
        metavar="PATH",
        help="without --store: the proxy's JSON-lines receipts file (proxy --receipts; "
        "default: receipts.jsonl here, when it exists)",
    )
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
    sub2 = p.add_subparsers(dest="receipts_command", metavar="{export}")
    e = sub2.add_parser(
        "export",
        help="write receipts as a flat table (one row per call, turn or tool call)",
        description="Write receipts as a flat table for DuckDB, BigQuery, ClickHouse or "
        "pandas: Parquet (needs the parquet extra: pyarrow) or JSON lines. Reads a SQLite "
        "store (--store) and/or JSON-lines receipt files (--receipts, repeatable).",
    )
    e.add_argument(
        "--store",
        dest="export_store",
        default=None,
        metavar="PATH",
        help="a receipt store (SQLite, voxproxy proxy --store)",
    )
    e.add_argument(
        "--receipts",
        action="append",
        default=[],
        metavar="PATH",
        help="a JSON-lines receipt file (voxproxy proxy --receipts); repeatable",
    )
    e.add_argument(
        "--format",
        choices=("parquet", "jsonl"),
        default=None,
        help="parquet or jsonl (default: from --out's suffix)",
    )
    e.add_argument(
        "--table",
        choices=("calls", "turns", "tools"),
        default="calls",
        help="one row per call (default), per turn, or per tool call",
    )
    e.add_argument(
        "--out", required=True, metavar="PATH", help="the file to write ('-': stdout, jsonl)"
    )
    e.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a constant column on every row (e.g. agent_version=v12); repeatable",
    )
    e.set_defaults(func=run_export)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path
    from typing import get_args

    source = args.store
    if source is None:
        source = args.receipts or "receipts.jsonl"
        if not Path(source).is_file():
            raise ConfigError(
                f"no receipts to show: {source} is not a file; give --receipts PATH (the "
                "proxy's --receipts file) or --store PATH (its --store)"
            )
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
    if args.store is not None:
        receipts = list(query_receipts(args.store, query))
    else:
        receipts = _filtered(source, query)
    if args.json:
        for r in receipts:
            sys.stdout.write(r.to_json_line())
        return 0
    table = Table(title=f"{len(receipts)} receipt(s) in {source}", title_justify="left")
    numeric = ("duration", "turns", "ttfs p50", "ttfs max", "stop max", "barge-ins stopped")
    for col in ("started", "call", "dialect", "terminal", *numeric, "verdict", "gate", "cause"):
        table.add_column(col, justify="right" if col in numeric else "left", overflow="fold")

    def ms(x: float | None) -> str:
        return "—" if x is None else f"{x:.0f} ms"

    for r in receipts:
        v = r.verdict
        if v is None:
            verdict, gate, cause = Text("—"), "", ""
        else:
            style = "green" if v.verdict == "pass" else "red"
            verdict, gate, cause = Text(v.verdict, style=style), v.gate or "", v.cause or ""
        s = r.summary
        table.add_row(
            Text(r.started_at),
            Text(r.call),
            Text(r.dialect),
            Text(r.terminal),
            f"{r.duration_ms / 1000:.1f} s",
            str(s.turns),
            ms(s.ttfs_ms_median),
            ms(s.ttfs_ms_max),
            ms(s.stop_latency_ms_max),
            f"{s.barge_ins_stopped}/{s.barge_ins}",
            verdict,
            Text(gate),
            Text(cause),
        )
    Console().print(table)
    return 0


def _filtered(path: str, q: Any) -> list[Any]:
    """The receipts of a JSON-lines file that match the query, oldest first (as the
    store answers it)."""
    from voxproxy.receipts.store import utc_text
    from voxproxy.receipts.writer import read_receipts

    try:
        since = utc_text(q.since) if q.since is not None else None
        until = utc_text(q.until) if q.until is not None else None
    except ValueError:
        raise ConfigError(f"not an ISO 8601 time: {q.since or q.until!r}") from None
    out = []
    for r in read_receipts(path):
        verdict = r.verdict.verdict if r.verdict is not None else "none"
        started = utc_text(r.started_at)
        if (
            (q.verdicts and verdict not in q.verdicts)
            or (since is not None and started < since)
            or (until is not None and started >= until)
            or (q.dialect is not None and r.dialect != q.dialect)
            or (q.terminal is not None and r.terminal != q.terminal)
        ):
            continue
        out.append(r)
    out.sort(key=lambda r: utc_text(r.started_at))
    return out[: q.limit] if q.limit is not None else out


def _export_format(args: argparse.Namespace) -> str:
    if args.format is not None:
        return str(args.format)
    suffix = args.out.rsplit(".", 1)[-1].lower() if "." in args.out else ""
    if suffix == "parquet":
        return "parquet"
    if suffix in ("jsonl", "ndjson", "json"):
        return "jsonl"
    raise ConfigError(f"--format parquet or jsonl: cannot tell from --out {args.out!r}")


def run_export(args: argparse.Namespace) -> int:
    from collections.abc import Iterator
    from pathlib import Path

    from voxproxy.receipts.export import parse_tags, rows, write_jsonl, write_parquet
    from voxproxy.receipts.model import Receipt
    from voxproxy.receipts.store import query_receipts
    from voxproxy.receipts.writer import read_receipts

    if args.export_store is None and not args.receipts:
        raise ConfigError("receipts export: give --store PATH and/or --receipts PATH")
    fmt = _export_format(args)
    tags = parse_tags(args.tag)
    if args.out == "-" and fmt == "parquet":
        raise ConfigError("--out -: stdout takes jsonl only; give a file for parquet")
    for path in args.receipts:
        if not Path(path).is_file():
            raise ConfigError(f"--receipts {path}: no such file")
    if fmt == "parquet":
        import importlib.util

        from voxproxy.receipts.export import PARQUET_EXTRA

        if importlib.util.find_spec("pyarrow") is None:  # say so before reading anything
            raise ConfigError(f"--format parquet needs pyarrow: {PARQUET_EXTRA}")

    def receipts() -> Iterator[Receipt]:
        if args.export_store is not None:
            yield from query_receipts(args.export_store)
        for path in args.receipts:
            yield from read_receipts(path)

    table_rows = rows(receipts(), args.table, tags)
    if fmt == "parquet":
        n = write_parquet(args.out, args.table, table_rows, tags)
    elif args.out == "-":
        n = write_jsonl(sys.stdout, table_rows)
        return 0
    else:
        with open(args.out, "w", encoding="utf-8") as out:
            n = write_jsonl(out, table_rows)
    print(f"{n} {args.table} row(s) -> {args.out} ({fmt})", file=sys.stderr)
    return 0
