"""Appending receipts as JSON lines, and reading them back."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from voxproxy.core.dialects import make_decoder
from voxproxy.core.receipt import CloseInfo, Receipt
from voxproxy.core.session import CallSession
from voxproxy.receipts import writer as writer_module
from voxproxy.receipts.writer import ReceiptWriter, read_receipts

MS = 1_000_000


def receipt(n: int) -> Receipt:
    session = CallSession(make_decoder("raw"), 0, secret=b"s", link_id=f"link-{n}")
    return session.close((1000 + n) * MS, "completed", CloseInfo(initiator="caller"))


def test_appends_complete_lines_with_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sub" / "receipts.jsonl"  # the directory is created
    synced_at: list[int] = []  # the file's size at each fsync
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced_at.append(path.stat().st_size)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    writer = ReceiptWriter(path)
    rs = [receipt(i) for i in range(3)]
    for r in rs:
        writer.write(r)
    writer.close()
    assert writer.written == 3 and writer.failed == 0
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    # Each fsync came after whole lines and after something new (none twice, none over a
    # torn line), and the last one with the whole file written: every line was synced.
    line_ends = {len("\n".join(lines[: i + 1])) + 1 for i in range(len(lines) - 1)}
    assert synced_at and synced_at == sorted(set(synced_at))
    assert set(synced_at) <= line_ends and synced_at[-1] == path.stat().st_size
    assert lines[-1] == "" and len(lines) == 4  # every line complete
    for line, r in zip(lines, rs, strict=False):
        assert json.loads(line)["call"] == r.call
        assert json.loads(line)["schema"] == "voxproxy.receipt/1"
    # A second writer appends; it does not truncate.
    again = ReceiptWriter(path)
    again.write(receipt(3))
    again.close()
    assert [r.call for r in read_receipts(path)] == [r.call for r in [*rs, receipt(3)]]


def test_a_backlog_is_synced_in_groups_and_said_written_only_once_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk slower than the calls ending: the writer catches up one fsync per group, not
    one per receipt, and ``on_written`` (which closes the call in the journal) comes only
    after the fsync that covered the receipt."""
    path = tmp_path / "receipts.jsonl"
    events: list[tuple[str, int]] = []  # ("sync", lines on disk) / ("written", index)
    entered, release = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        entered.set()
        release.wait(10)
        events.append(("sync", path.read_bytes().count(b"\n")))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    rs = [receipt(i) for i in range(21)]
    index = {r.call: i for i, r in enumerate(rs)}
    writer = ReceiptWriter(path, on_written=lambda r: events.append(("written", index[r.call])))
    writer.write(rs[0])
    assert entered.wait(10)  # the first receipt's fsync is under way (and slow)
    for r in rs[1:]:
        writer.write(r)  # these pile up behind it
    release.set()
    writer.close()
    assert writer.written == 21 and writer.failed == 0
    assert events == [("sync", 1), ("written", 0), ("sync", 21)] + [
        ("written", i) for i in range(1, 21)
    ]
    assert [r.call for r in read_receipts(path)] == [r.call for r in rs]


def test_a_group_is_no_larger_than_group_max(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer_module, "GROUP_MAX", 4)
    synced: list[int] = []
    path = tmp_path / "receipts.jsonl"
    gate = threading.Event()
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        gate.wait(10)
        synced.append(path.read_bytes().count(b"\n"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    writer = ReceiptWriter(path)
    for i in range(10):
        writer.write(receipt(i))
    gate.set()
    writer.close()
    assert writer.written == 10
    steps = [b - a for a, b in zip([0, *synced], synced, strict=False)]
    assert sum(steps) == 10 and max(steps) <= 4


def test_fsync_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    writer = ReceiptWriter(tmp_path / "r.jsonl", fsync=False)
    writer.write(receipt(0))
    writer.close()
    assert writer.written == 1 and synced == []


def test_read_skips_a_torn_last_line_and_non_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    writer = ReceiptWriter(path)
    rs = [receipt(i) for i in range(2)]
    writer.write(rs[0])
    writer.close()
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("not json at all\n")
        fh.write("\n")
        fh.write(rs[1].to_json_line())
        fh.write(rs[1].to_json_line()[:40])  # killed mid-write: no newline
    back = list(read_receipts(path))
    assert back == rs


def test_a_torn_line_that_happens_to_be_json_is_still_skipped(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(receipt(0).to_json_line() + "{}", encoding="utf-8")
    assert len(list(read_receipts(path))) == 1


def test_round_trip_is_exact(tmp_path: Path) -> None:
    r = receipt(7)
    path = tmp_path / "r.jsonl"
    writer = ReceiptWriter(path)
    writer.write(r)
    writer.close()
    (back,) = read_receipts(path)
    assert back == r
    assert back.to_json_line() == r.to_json_line()


def test_an_empty_file_has_no_receipts(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("", encoding="utf-8")
    assert list(read_receipts(path)) == []


def _append_from_a_process(path: str, first: int, count: int, pad: int) -> None:
    writer = ReceiptWriter(path, fsync=False)
    for n in range(first, first + count):
        # A receipt larger than the file buffer: written in several pieces unless locked.
        writer.write(receipt(n).model_copy(update={"dialect": "x" * pad}))
    writer.close()


def test_processes_appending_to_one_file_never_interleave_lines(tmp_path: Path) -> None:
    import multiprocessing

    path = tmp_path / "r.jsonl"
    ctx = multiprocessing.get_context("fork")
    procs = [
        ctx.Process(target=_append_from_a_process, args=(str(path), 1000 * i, 60, 40_000))
        for i in range(3)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    lines = path.read_text().splitlines()
    assert len(lines) == 180
    calls = [Receipt.model_validate_json(line).call for line in lines]  # every line whole
    assert len(set(calls)) == 180
