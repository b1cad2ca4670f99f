"""Readable renderings of receipts for a terminal."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from voxproxy.receipts.model import Receipt


def _fmt(x: float | None, unit: str = " ms") -> str:
    return "—" if x is None else f"{x:.1f}{unit}"


def receipt_table(receipt: Receipt, title: str | None = None) -> Table:
    table = Table(
        title=title or f"call {receipt.call} · {receipt.dialect} · {receipt.terminal}",
        title_justify="left",
    )
    for col in (
        "turn",
        "kind",
        "caller end",
        "agent start",
        "ttfs",
        "barge-in",
        "stop latency",
        "outcome",
        "evidence",
    ):
        table.add_column(
            col, justify="right" if col not in ("kind", "outcome", "evidence") else "left"
        )
    for t in receipt.turns:
        b = t.barge_in
        table.add_row(
            str(t.index),
            t.kind + (f" ({t.reason})" if t.reason else ""),
            _fmt(t.caller_offset_ms),
            _fmt(t.agent_onset_ms),
            _fmt(t.ttfs_ms)
            if t.kind != "agent_initiated"
            else (f"reprompt {_fmt(t.reprompt_ms)}" if t.reprompt_ms is not None else "greeting"),
            _fmt(b.onset_ms) if b else "",
            _fmt(b.stop_latency_ms) if b else "",
            b.outcome if b else "",
            (b.evidence + (" (ambiguous)" if b.ambiguous else "")) if b else "",
        )
    s = receipt.summary
    table.caption = (
        f"duration {receipt.duration_ms / 1000:.1f} s · turns {s.turns} · median ttfs "
        f"{_fmt(s.ttfs_ms_median)} · barge-ins {s.barge_ins} ({s.barge_ins_stopped} stopped) · "
        f"flushes {s.flushes} · anomalies {sum(receipt.anomalies.values())} · "
        f"close {receipt.close.caller_code}/{receipt.close.agent_code}"
    )
    table.caption_justify = "left"
    return table


def print_receipt(
    receipt: Receipt, console: Console | None = None, title: str | None = None
) -> None:
    (console or Console()).print(receipt_table(receipt, title))
