"""Reading a receipts file line by line: every receipt it holds, and for every other line
what it was (not UTF-8, not JSON, JSON but not a receipt, an unfinished last line), with
a receipt glued to a torn fragment recovered and the fragment named."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from support.receipt_samples import sample_receipt

from voxproxy.core.receipt import Receipt
from voxproxy.receipts.lines import BadLine, scan_receipts
from voxproxy.receipts.writer import read_receipts


def _receipt(n: int) -> Receipt:
    return sample_receipt().model_copy(update={"call": f"call-{n:04d}"})


def _lines(path: Path) -> list[tuple[str, int] | str]:
    """The scan as (problem, line) for bad lines and the call for receipts."""
    return [
        (item.problem, item.line) if isinstance(item, BadLine) else item.call
        for item in scan_receipts(path)
    ]


def test_every_kind_of_bad_line_is_named_and_the_receipts_around_it_kept(
    tmp_path: Path,
) -> None:
    r = [_receipt(n).to_json_line().encode() for n in range(5)]
    path = tmp_path / "r.jsonl"
    path.write_bytes(
        r[0]
        + b'{"kind": "not a receipt"}\n'  # 2: JSON, not a receipt
        + b"\xff\xfe not utf-8\n"  # 3
        + b"garbled {\n"  # 4: not JSON
        + r[1][:57]  # 5: a writer killed mid-line, then the next line glued on
        + r[2]
        + b"\n"
        + r[3]
        + r[4][:30]  # 8: the last line, still being written
    )
    assert _lines(path) == [
        "call-0000",
        ("not_receipt", 2),
        ("not_utf8", 3),
        ("not_json", 4),
        ("torn_fragment", 5),
        "call-0002",
        "call-0003",
        ("incomplete", 8),
    ]
    torn = next(i for i in scan_receipts(path) if isinstance(i, BadLine) and i.line == 5)
    assert torn.dropped == 57 and "receipt kept" in torn.describe()
    bad = next(i for i in scan_receipts(path) if isinstance(i, BadLine) and i.line == 2)
    assert bad.describe().startswith(f"{path}:2: not a receipt") and "skipped" in bad.describe()


def test_a_fragment_with_braces_of_its_own_still_gives_back_the_receipt(tmp_path: Path) -> None:
    line = _receipt(1).to_json_line().encode()
    fragment = line[: line.index(b"}") + 1] + b'{"x": {'  # braces and a whole sub-object
    path = tmp_path / "r.jsonl"
    path.write_bytes(fragment + line)
    assert _lines(path) == [("torn_fragment", 1), "call-0001"]


def test_the_strict_reading_recovers_the_glued_receipt_and_raises_on_non_receipts(
    tmp_path: Path,
) -> None:
    a, b = (_receipt(n).to_json_line().encode() for n in range(2))
    path = tmp_path / "r.jsonl"
    path.write_bytes(a[:20] + a + b"not json\n" + b)
    assert [x.call for x in read_receipts(path)] == ["call-0000", "call-0001"]
    path.write_bytes(a + b'{"kind": 1}\n' + b)
    with pytest.raises(ValidationError):
        list(read_receipts(path))
    path.write_bytes(a + b"\xff\n" + b)
    with pytest.raises(UnicodeDecodeError):
        list(read_receipts(path))
