"""The run log: one row per scoring run; a term error rate move over 5 points is called out."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from voxproxy.core.errors import ConfigError
from voxproxy.transcripts.runlog import COLUMNS, append_row, compare, read_rows

LABELS = {"policy": "voxproxy-default@sha256:aaaa", "term_list": "t@sha256:bbbb"}


def row(date: str, model: str, ter: float | None, total: float = 80.0) -> dict[str, Any]:
    return {
        "date": date,
        "model_version": model,
        "terms": None if ter is None else 100 - ter,
        "speaker_attribution": None,
        "numbers": 100.0,
        "segmentation": None,
        "raw_wer": 95.0,
        "weighted_total": total,
        "term_error_rate_pct": ter,
        "wer_pct": 5.0,
        "numbers_text": "13 of 15",
        **LABELS,
        "source": "ref.txt vs hyp.txt",
    }


@pytest.mark.parametrize("name", ["runs.csv", "runs.jsonl"])
def test_rows_accumulate_and_big_moves_are_called_out(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    assert append_row(path, row("2026-08-31", "whisper-large-v3", 10.0)) == []
    assert append_row(path, row("2026-09-30", "whisper-large-v3", 14.9)) == []  # 4.9 points
    out = append_row(path, row("2026-10-31", "whisper-large-v3", 21.0))  # 6.1 points
    assert len(out) == 1 and "rose 6.1 points" in out[0] and "2026-09-30" in out[0]
    out = append_row(path, row("2026-11-30", "whisper-large-v3-turbo", 12.0))
    assert "fell 9.0 points" in out[0]
    rows = read_rows(path)
    assert [r["model_version"] for r in rows] == ["whisper-large-v3"] * 3 + [
        "whisper-large-v3-turbo"
    ]
    if name.endswith(".csv"):
        with path.open() as f:
            assert next(csv.reader(f)) == list(COLUMNS)
        assert rows[0]["segmentation"] == ""  # left out: an empty cell, not a zero
    else:
        assert json.loads(path.read_text().splitlines()[0])["segmentation"] is None


def test_a_policy_change_is_called_out() -> None:
    before = row("d1", "m", 10.0)
    after = {**row("d2", "m", 10.0), "policy": "other@sha256:cccc"}
    assert "not comparable" in compare(before, after)[0]


def test_a_users_own_csv_keeps_its_columns(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text("date,model_version,weighted_total,my_note\n2026-01-01,m0,70,first\n")
    append_row(path, row("2026-02-01", "m1", 3.0, total=75.0))
    last = read_rows(path)[-1]
    assert last == {
        "date": "2026-02-01",
        "model_version": "m1",
        "weighted_total": "75.0",
        "my_note": "",
    }
    bad = tmp_path / "bad.csv"
    bad.write_text("when,what\n1,2\n")
    with pytest.raises(ConfigError, match="header lacks"):
        append_row(bad, row("d", "m", 1.0))
