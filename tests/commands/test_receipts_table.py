"""``voxproxy receipts``' table (``voxproxy/commands/_receipts_table.py``), rendered at a
given width: the full layout from WIDE columns on, the compact one below it, and below
NARROW the call ids, times and dialects shortened; one line a receipt, never wider."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from support.flowkit import flow_receipts

from voxproxy.commands._receipts_table import NARROW, WIDE, receipts_table
from voxproxy.core.receipt import Receipt
from voxproxy.receipts.policy import load_policy
from voxproxy.receipts.verdict import judged


def _receipts(days: int = 1, dialects: Sequence[str] = ("twilio",)) -> list[Receipt]:
    policy = load_policy()
    return [
        judged(
            r.model_copy(
                update={
                    "started_at": f"2025-06-0{1 + i % days}T08:00:{i:02d}.000Z",
                    "dialect": dialects[i % len(dialects)],
                }
            ),
            policy,
        )
        for i, r in enumerate(flow_receipts()[:6])
    ]


def _render(receipts: Sequence[Receipt], width: int) -> list[str]:
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    with console.capture() as got:
        console.print(receipts_table(receipts, "r.jsonl", width))
    return got.get().splitlines()


def _row(lines: list[str], r: Receipt) -> str:
    (row,) = [line for line in lines if r.call[:8] in line]
    return row


def test_the_wide_layout_has_every_value_in_full_with_its_unit() -> None:
    receipts = _receipts(dialects=("twilio", "raw"))
    lines = _render(receipts, 200)  # at WIDE itself some full values still fold
    header = " ".join(lines)
    assert "ttfs p50" in header and "stop max" in header and "barge-ins" in header
    timed = next(r for r in receipts if r.summary.ttfs_ms_median is not None)
    row = next(line for line in lines if timed.call in line)
    assert timed.started_at in row and f"{timed.summary.ttfs_ms_median:.0f} ms" in row
    assert f"{timed.duration_ms / 1000:.1f} s" in row


def test_compact_layout_keeps_full_call_ids_and_puts_a_single_dialect_in_the_title() -> None:
    receipts = _receipts()
    lines = _render(receipts, WIDE - 1)
    assert lines[0].startswith("6 receipt(s) in r.jsonl, dialect twilio")
    assert not any(" dialect " in line for line in lines[1:3])  # no dialect column
    for r in receipts:
        row = _row(lines, r)
        assert r.call in row and r.started_at[5:19].replace("T", " ") in row
        assert "2025-06" not in row  # no year
        s = r.summary
        median = "—" if s.ttfs_ms_median is None else f"{s.ttfs_ms_median:.0f}"
        peak = "—" if s.ttfs_ms_max is None else f"{s.ttfs_ms_max:.0f}"
        assert f"{median}/{peak}" in row and " ms" not in row
        assert r.verdict is not None and r.verdict.verdict in row


def test_several_dialects_get_a_column_until_the_table_is_narrow() -> None:
    receipts = _receipts(dialects=("twilio", "raw"))
    compact = _render(receipts, NARROW)
    assert "dialect" not in compact[0]
    assert all(r.dialect in _row(compact, r) for r in receipts)
    narrow = _render(receipts, NARROW - 1)
    assert narrow[0].startswith("6 receipt(s) in r.jsonl, dialects raw, twilio")


def test_below_narrow_call_ids_are_cut_and_one_day_s_times_lose_the_date() -> None:
    receipts = _receipts()
    lines = _render(receipts, 80)
    assert "on 2025-06-01 (UTC)" in lines[0]
    for r in receipts:
        row = _row(lines, r)
        assert r.call not in row  # cut to its first 8 characters
        assert row.lstrip().startswith(r.started_at[11:19])
    two_days = _render(_receipts(days=2), 80)
    assert "(UTC)" not in two_days[0]
    assert any("06-02 08:00" in line for line in two_days)


def test_every_receipt_is_one_line_no_wider_than_the_terminal() -> None:
    receipts = _receipts(days=2, dialects=("twilio", "openai-realtime"))
    for width in (60, 80, NARROW - 1, NARROW, 120, WIDE - 1):
        lines = _render(receipts, width)
        assert max(len(line) for line in lines) <= width, width
        assert all(_row(lines, r) for r in receipts)


def test_a_terminal_too_narrow_for_the_full_values_gets_the_compact_table() -> None:
    # The full layout of these receipts needs about 197 columns (long verdicts and
    # terminals): at 150-196, before, each receipt folded over three lines.
    receipts = _receipts(dialects=("twilio", "raw"))
    for width in (WIDE, 170, 196):
        lines = _render(receipts, width)
        for r in receipts:  # each receipt on one line, its call id whole (not folded)
            assert sum(1 for line in lines if r.call in line) == 1, (width, lines)
            assert sum(1 for line in lines if r.call[:8] in line) == 1, (width, lines)
