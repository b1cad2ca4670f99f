"""``voxproxy receipts``: query the receipt store; ``voxproxy receipts export``: flat
tables of receipts for analysts (Parquet or JSON lines, :mod:`voxproxy.receipts.export`).

Filters by verdict, time range (``--since`` inclusive, ``--until`` exclusive,
ISO 8601; times without an offset are UTC), dialect and terminal state; prints
a table, or the receipts themselves as JSON lines with ``--json``.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxproxy.commands._inputs import DEFAULT_RECEIPTS
from voxproxy.core.errors import ConfigError

if TYPE_CHECKING:
    from voxproxy.core.receipt import Receipt


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
        f"default: {DEFAULT_RECEIPTS} here, when it exists)",
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
        help="a JSON-lines receipt file (voxproxy proxy --receipts); repeatable. Without "
        f"--store or --receipts: {DEFAULT_RECEIPTS} here, as for `voxproxy receipts`",
    )
    e.add_argument(
        "--format",
        choices=("parquet", "jsonl"),
        default=None,
        help="parquet or jsonl (default: from --out's suffix; jsonl on stdout)",
    )
    e.add_argument(
        "--table",
        choices=("calls", "turns", "tools"),
        default="calls",
        help="one row per call (default), per turn, or per tool call",
    )
    e.add_argument(
        "--out",
        default=None,
        metavar="PATH",
        help="the file to write, replaced whole once every row is written ('-': stdout, "
        "jsonl; default: stdout, or TABLE.parquet here with --format parquet)",
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
    from typing import get_args

    source = args.store
    if source is None:
        source = args.receipts or DEFAULT_RECEIPTS
        if not Path(source).is_file():
            raise ConfigError(
                f"no receipts to show: {source} is not a file; give --receipts PATH (the "
                "proxy's --receipts file) or --store PATH (its --store)"
            )
    from rich.console import Console

    from voxproxy.core.receipt import Terminal
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
        skips = Skips("voxproxy receipts")
        receipts = _filtered(skips.receipts([source]), query)
        skips.summary()
    if args.json:
        for r in receipts:
            sys.stdout.write(r.to_json_line())
        return 0
    from voxproxy.commands._receipts_table import receipts_table

    console = Console()
    console.print(receipts_table(receipts, source, console.width))
    return 0


class Skips:
    """The receipts of JSON-lines files, the lines that are not receipts skipped and
    counted: one warning line each (the first :data:`SHOWN`), then one summary line."""

    SHOWN = 10

    def __init__(self, command: str) -> None:
        self.command = command
        self.skipped = 0  # lines that gave no receipt
        self.recovered = 0  # receipts read from after a torn fragment

    def receipts(self, paths: Iterable[str]) -> Iterator[Receipt]:
        from voxproxy.core.receipt import Receipt
        from voxproxy.receipts.lines import scan_receipts

        for path in paths:
            for item in scan_receipts(path):
                if isinstance(item, Receipt):
                    yield item
                    continue
                if item.problem == "torn_fragment":
                    self.recovered += 1
                else:
                    self.skipped += 1
                if self.skipped + self.recovered <= self.SHOWN:
                    print(f"{self.command}: warning: {item.describe()}", file=sys.stderr)

    def summary(self) -> None:
        """The counts, in one line, when more lines were bad than were shown."""
        if self.skipped + self.recovered > self.SHOWN:
            print(
                f"{self.command}: warning: {self.skipped} line(s) that are not receipts "
                f"skipped, {self.recovered} receipt(s) recovered from after a torn fragment",
                file=sys.stderr,
            )


def _filtered(found: Iterable[Receipt], q: Any) -> list[Any]:
    """The receipts that match the query, oldest first (as the store answers it)."""
    from voxproxy.receipts.store import utc_text

    try:
        since = utc_text(q.since) if q.since is not None else None
        until = utc_text(q.until) if q.until is not None else None
    except ValueError:
        raise ConfigError(f"not an ISO 8601 time: {q.since or q.until!r}") from None
    out = []
    for r in found:
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
    if args.out is None or args.out == "-":
        return "jsonl"
    suffix = args.out.rsplit(".", 1)[-1].lower() if "." in args.out else ""
    if suffix == "parquet":
        return "parquet"
    if suffix in ("jsonl", "ndjson", "json"):
        return "jsonl"
    raise ConfigError(f"--format parquet or jsonl: cannot tell from --out {args.out!r}")


def _export_inputs(args: argparse.Namespace) -> list[str]:
    """The JSON-lines files to read: --receipts, or without it and --store the proxy's
    default file here."""
    if args.receipts or args.export_store is not None:
        for path in args.receipts:
            if not Path(path).is_file():
                raise ConfigError(f"--receipts {path}: no such file")
        return list(args.receipts)
    if not Path(DEFAULT_RECEIPTS).is_file():
        raise ConfigError(
            f"no receipts to export: {DEFAULT_RECEIPTS} is not a file here; give --receipts "
            "PATH (the proxy's --receipts file) and/or --store PATH (its --store)"
        )
    return [DEFAULT_RECEIPTS]


def _refuse_overwriting_an_input(out: str, inputs: Iterable[str]) -> None:
    """--out must not be one of the inputs (the same file by device and inode: a link or
    another spelling of the path counts): writing it would lose the receipts."""
    try:
        target = os.stat(out)
    except OSError:
        return  # not there yet: nothing to lose
    for path in inputs:
        try:
            source = os.stat(path)
        except OSError:
            continue
        if (source.st_dev, source.st_ino) == (target.st_dev, target.st_ino):
            raise ConfigError(
                f"--out {out} is the input {path}: writing it would replace the receipts "
                "with the export; choose another --out"
            )


def run_export(args: argparse.Namespace) -> int:
    from voxproxy.receipts.export import parse_tags, rows, write_jsonl
    from voxproxy.receipts.store import query_receipts

    fmt = _export_format(args)
    tags = parse_tags(args.tag)
    out = args.out or ("-" if fmt == "jsonl" else f"{args.table}.parquet")
    if out == "-" and fmt == "parquet":
        raise ConfigError("--out -: stdout takes jsonl only; give a file for parquet")
    files = _export_inputs(args)
    stores = [args.export_store] if args.export_store is not None else []
    if out != "-":
        _refuse_overwriting_an_input(out, [*files, *stores])
    if fmt == "parquet":
        import importlib.util

        from voxproxy.receipts.export import PARQUET_EXTRA

        if importlib.util.find_spec("pyarrow") is None:  # say so before reading anything
            raise ConfigError(f"--format parquet needs pyarrow: {PARQUET_EXTRA}")
    skips = Skips("voxproxy receipts export")

    def receipts() -> Iterator[Receipt]:
        for store in stores:
            yield from query_receipts(store)
        yield from skips.receipts(files)

    table_rows = rows(receipts(), args.table, tags)
    if out == "-":
        write_jsonl(sys.stdout, table_rows)
        skips.summary()
        return 0
    n = _write_whole(out, lambda tmp: _write(tmp, fmt, args.table, table_rows, tags))
    skips.summary()
    print(f"{n} {args.table} row(s) -> {out} ({fmt})", file=sys.stderr)
    return 0


def _write(
    path: str, fmt: str, table: Any, table_rows: Iterable[dict[str, Any]], tags: dict[str, str]
) -> int:
    from voxproxy.receipts.export import write_jsonl, write_parquet

    if fmt == "parquet":
        return write_parquet(path, table, table_rows, tags)
    with open(path, "x", encoding="utf-8") as fh:
        return write_jsonl(fh, table_rows)


def _write_whole(out: str, write: Callable[[str], int]) -> int:
    """``write(tmp)`` into a new file beside ``out``, then renamed over it: ``out`` is
    either what it was or the whole export, never a part (a failure, Ctrl-C, a bad line
    midway)."""
    target = Path(out)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        n = write(str(tmp))
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return n
