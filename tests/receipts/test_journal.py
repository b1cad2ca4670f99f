"""The journal of calls in progress, read back after a kill."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from voxproxy.receipts.journal import CallJournal, journal_path, receipts_written

T0 = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)


def iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def receipt_line(call: str, start: datetime, duration_ms: float = 1000.0) -> str:
    # Only what the journal reads of a receipt: its identity and its end.
    return json.dumps({"call": call, "started_at": iso(start), "duration_ms": duration_ms}) + "\n"


def left_by_a_kill(journal: Path, calls: dict[str, datetime], closed: set[str]) -> None:
    """A journal as a killed proxy leaves it: ``calls`` opened, ``closed`` closed."""
    with open(journal, "w", encoding="utf-8") as fh:
        for key, start in calls.items():
            fh.write(
                json.dumps(
                    {
                        "open": key,
                        "call": f"c_{key}",
                        "started_at": iso(start),
                        "start_wall_ns": int(start.timestamp() * 1e9),
                    }
                )
                + "\n"
            )
        for key in closed:
            fh.write(json.dumps({"close": key}) + "\n")
        fh.write(json.dumps({"alive": int((T0 + timedelta(seconds=30)).timestamp() * 1e9)}) + "\n")


def test_the_calls_left_open_are_returned_and_stay_open(tmp_path: Path) -> None:
    receipts = tmp_path / "receipts.jsonl"
    journal = CallJournal.beside(receipts)
    calls = {"k1": T0, "k2": T0 + timedelta(seconds=1), "k3": T0 + timedelta(seconds=2)}
    left_by_a_kill(journal.path, calls, closed={"k2"})
    left = journal.open(receipts)
    assert sorted(e["key"] for e in left) == ["k1", "k3"]
    assert journal.open_calls == 2
    journal.close()
    assert journal.path.exists()  # still owed: their receipts are not written yet


def test_a_call_whose_receipt_reached_disk_before_its_close_is_not_left_open(
    tmp_path: Path,
) -> None:
    """Killed between a receipt's fsync and its ``close`` line: the call has its receipt,
    and is not given a second one."""
    receipts = tmp_path / "receipts.jsonl"
    calls = {f"k{i}": T0 + timedelta(seconds=i) for i in range(4)}
    left_by_a_kill(journal_path(receipts), calls, closed=set())
    with open(receipts, "w", encoding="utf-8") as fh:
        fh.write(receipt_line("c_other", T0 - timedelta(seconds=5)))
        fh.write(receipt_line("c_k1", calls["k1"]))
        fh.write(receipt_line("c_k3", calls["k3"]))
        fh.write(receipt_line("c_k0", T0 - timedelta(seconds=10)))  # the same id, another call
        fh.write('{"call": "c_k2", "started_')  # a torn last line is no receipt
    journal = CallJournal.beside(receipts)
    assert sorted(e["key"] for e in journal.open(receipts)) == ["k0", "k2"]
    # Without the receipts file to look in, all four are owed.
    again = CallJournal(tmp_path / "copy.open-calls")
    left_by_a_kill(again.path, calls, closed=set())
    assert len(again.open()) == 4


def test_receipts_written_reads_only_the_tail_it_needs(tmp_path: Path) -> None:
    """Backwards, across blocks, and no further than the slack before the oldest start."""
    path = tmp_path / "receipts.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        # Far in the past: 20,000 receipts (well over one 64 KiB block).
        for i in range(20_000):
            fh.write(receipt_line(f"c_old{i}", T0 - timedelta(hours=2) + timedelta(seconds=i / 10)))
        for i in range(3):
            fh.write(receipt_line(f"c_new{i}", T0 + timedelta(seconds=i)))
    since = int(T0.timestamp() * 1e9)
    wanted = {(f"c_new{i}", iso(T0 + timedelta(seconds=i))) for i in range(3)}
    assert receipts_written(path, wanted, since) == wanted
    # One written long before the oldest call started is not looked for: the scan stopped.
    early = ("c_old5", iso(T0 - timedelta(hours=2) + timedelta(seconds=0.5)))
    assert receipts_written(path, {early, *wanted}, since) == wanted
    # Given an earlier start, it reads on and finds it.
    assert receipts_written(path, {early}, since - int(3 * 3600 * 1e9)) == {early}
    assert receipts_written(tmp_path / "none.jsonl", wanted, since) == set()
