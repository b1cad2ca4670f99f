"""``voxproxy receipts``' table, one line per receipt at any terminal width.

Thirteen columns of full values need 150 columns or more; narrower, every cell wrapped
over several lines. So the table is laid out for the width it gets: full values from
:data:`WIDE` columns on, where they fit without folding; else a compact layout (times
without the year, figures without units, ttfs p50 and max in one column, verdict and
cause in one, the dialect in the title when every receipt has the same one) and, below
:data:`NARROW` columns, call ids cut to 8 characters, times to the minute and the
dialects in the title only. Cells that still do not fit end in an ellipsis instead of
wrapping. ``--json`` has every value in full.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich import box
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from voxproxy.core.receipt import Receipt

WIDE = 150
"""From this many columns on, the full layout, where its values fit unfolded."""

NARROW = 110
"""Below this many columns, call ids and times are shortened too."""

GAP = 1
"""Spaces between two columns (the table's own separator; cells have no padding)."""


def _ms(x: float | None, unit: str = "") -> str:
    return "—" if x is None else f"{x:.0f}{unit}"


def _verdict(r: Receipt, with_cause: bool) -> Text:
    v = r.verdict
    if v is None:
        return Text("—")
    style = "green" if v.verdict == "pass" else "red"
    text = Text(v.verdict, style=style)
    if with_cause and v.cause:
        text.append(f" · {v.cause}")
    return text


def receipts_table(receipts: Sequence[Receipt], source: str, width: int) -> Table:
    """The table of ``receipts`` (read from ``source``) for a terminal ``width`` wide."""
    title = f"{len(receipts)} receipt(s) in {source}"
    if width >= WIDE:
        wide = _wide(receipts, title)
        if _natural_width(wide) <= width:
            return wide  # (long verdicts, causes and terminals may want more than WIDE)
    narrow = width < NARROW
    dialects = sorted({r.dialect for r in receipts})
    days = sorted({r.started_at[:10] for r in receipts})
    if len(dialects) == 1 or narrow:
        title += f", dialect{'s' if len(dialects) > 1 else ''} {', '.join(dialects)}"
    one_day = narrow and len(days) == 1
    if one_day:
        title += f", on {days[0]} (UTC)"
    columns: dict[str, list[str | Text]] = {"started": [], "call": []}
    if len(dialects) > 1 and not narrow:
        columns["dialect"] = []
    columns |= {"end": [], "s": [], "turns": [], "ttfs": [], "stop": [], "b-in": []}
    if narrow:
        del columns["turns"]
    verdicts = []
    for r in receipts:
        s = r.summary
        started = r.started_at.replace("T", " ")
        row: dict[str, str | Text] = {
            "started": started[11:19] if one_day else started[5 : 16 if narrow else 19],
            "call": Text(r.call[:8] if narrow else r.call),
            "dialect": Text(r.dialect),
            "end": Text(r.terminal),
            "s": f"{r.duration_ms / 1000:.1f}",
            "turns": str(s.turns),
            "ttfs": f"{_ms(s.ttfs_ms_median)}/{_ms(s.ttfs_ms_max)}",
            "stop": _ms(s.stop_latency_ms_max),
            "b-in": f"{s.barge_ins_stopped}/{s.barge_ins}",
        }
        for name, cells in columns.items():
            cells.append(row[name])
        verdicts.append(_verdict(r, with_cause=True))
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=0,
        caption="s: duration; ttfs: time to first sound, ms, p50/max; stop: the slowest "
        "barge-in stop, ms; b-in: barge-ins stopped/all; --json: every field in full",
        caption_justify="left",
    )
    caps = {"end": 9 if narrow else 13, "dialect": 8}
    numeric = {"s", "turns", "ttfs", "stop", "b-in"}
    used = 0
    for name, cells in columns.items():
        natural = max([len(name), *(len(str(c)) for c in cells)])
        fixed = min(natural, caps.get(name, natural))
        used += fixed + GAP
        table.add_column(
            name,
            justify="right" if name in numeric else "left",
            width=fixed,
            no_wrap=True,
            overflow="ellipsis",
        )
    # The verdict takes what is left, so that no other column is squeezed.
    table.add_column("verdict", no_wrap=True, overflow="ellipsis", max_width=width - used)
    for k, verdict in enumerate(verdicts):
        table.add_row(*(cells[k] for cells in columns.values()), verdict)
    return table


def _natural_width(table: Table) -> int:
    """The columns ``table`` takes with none of its cells folded."""
    from rich.console import Console

    return Console(width=10_000).measure(table).maximum


def _wide(receipts: Sequence[Receipt], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    numeric = ("duration", "turns", "ttfs p50", "ttfs max", "stop max", "barge-ins stopped")
    for col in ("started", "call", "dialect", "terminal", *numeric, "verdict", "gate", "cause"):
        table.add_column(col, justify="right" if col in numeric else "left", overflow="fold")
    for r in receipts:
        v = r.verdict
        s = r.summary
        table.add_row(
            Text(r.started_at),
            Text(r.call),
            Text(r.dialect),
            Text(r.terminal),
            f"{r.duration_ms / 1000:.1f} s",
            str(s.turns),
            _ms(s.ttfs_ms_median, " ms"),
            _ms(s.ttfs_ms_max, " ms"),
            _ms(s.stop_latency_ms_max, " ms"),
            f"{s.barge_ins_stopped}/{s.barge_ins}",
            _verdict(r, with_cause=False),
            Text(v.gate or "" if v is not None else ""),
            Text(v.cause or "" if v is not None else ""),
        )
    return table
