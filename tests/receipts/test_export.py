"""Receipts as flat tables: the rows, Parquet through pyarrow, JSON lines, and the DuckDB
queries ``docs/telemetry.md`` documents, run over an export and checked against the
same figures computed here from the receipts."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest
from support.receipt_samples import sample_receipt

from voxproxy.core.errors import ConfigError
from voxproxy.core.receipt import Receipt
from voxproxy.receipts.export import COLUMNS, parse_tags, rows, write_jsonl, write_parquet

DOC = Path(__file__).resolve().parents[2] / "docs" / "telemetry.md"


def test_the_calls_table_has_one_row_per_call_with_the_call_keys() -> None:
    r = sample_receipt()
    (row,) = rows([r], "calls", {"agent_version": "v12"})
    assert list(row) == [name for name, _ in COLUMNS["calls"]] + ["agent_version"]
    assert row["call"] == r.call and row["day"] == "2025-01-01"
    assert row["started_at"] == "2025-01-01T00:00:00.000Z"
    assert row["verdict"] == "tool_effect_failed" and row["verdict_gate"] == "tool_effect"
    assert row["turns"] == 4 and row["talk_overs"] == 0 and row["anomalies"] == 3
    assert row["unsafe_retries"] == 1 and row["tool_calls"] == r.effects.tool_calls  # type: ignore[union-attr]
    assert row["agent_version"] == "v12"


def test_turn_and_tool_rows_follow_the_receipt() -> None:
    r = sample_receipt()
    turns = list(rows([r], "turns"))
    assert [t["turn"] for t in turns] == [0, 1, 2, 3]
    assert [t["ttfs_ms"] for t in turns] == [t.ttfs_ms for t in r.turns]
    assert [t["barge_in_outcome"] for t in turns] == [None, "stopped", None, None]
    assert turns[1]["barge_in_stop_latency_ms"] == 250.0
    assert all(t["call"] == r.call for t in turns)
    tools = list(rows([r], "tools"))
    assert [t["operation_id"] for t in tools] == ["op-1", "op-2", "op-3"]
    assert [t["unsafe_retry"] for t in tools] == [False, False, True]
    for table in ("turns", "tools"):
        for row in rows([r], table):  # type: ignore[arg-type]
            assert list(row) == [name for name, _ in COLUMNS[table]]  # type: ignore[index]


def test_tags_are_plain_names_that_do_not_shadow_a_column() -> None:
    assert parse_tags(["agent_version=v1.2", "region=eu"]) == {
        "agent_version": "v1.2",
        "region": "eu",
    }
    for bad in ("novalue", "=x", "two words=x", "call=x", "ttfs_ms=x"):
        with pytest.raises(ConfigError):
            parse_tags([bad])


def test_parquet_keeps_types_and_an_empty_export_keeps_its_columns(tmp_path: Path) -> None:
    r = sample_receipt()
    out = tmp_path / "turns.parquet"
    assert write_parquet(out, "turns", rows([r], "turns", {"v": "1"}), {"v": "1"}) == 4
    table = pq.read_table(out)
    assert table.num_rows == 4
    assert str(table.schema.field("ttfs_ms").type) == "double"
    assert str(table.schema.field("day").type) == "date32[day]"
    assert table.column("ttfs_ms").to_pylist() == [t.ttfs_ms for t in r.turns]
    assert table.column("v").to_pylist() == ["1"] * 4
    empty = tmp_path / "empty.parquet"
    assert write_parquet(empty, "tools", rows([], "tools")) == 0
    assert pq.read_table(empty).column_names == [name for name, _ in COLUMNS["tools"]]


def test_jsonl_rows_read_back(tmp_path: Path) -> None:
    r = sample_receipt()
    out = tmp_path / "calls.jsonl"
    with out.open("w") as fh:
        assert write_jsonl(fh, rows([r, r], "calls")) == 2
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [x["call"] for x in lines] == [r.call, r.call]
    assert lines[0]["ttfs_ms_median"] == r.summary.ttfs_ms_median


# -- the documented DuckDB queries -------------------------------------------------------------


def _fleet(seed: int) -> list[Receipt]:
    """Receipts over three days and two dialects, with varied times to first sound and
    barge-in outcomes (some talk-overs too)."""
    rng = random.Random(seed)
    base = sample_receipt()
    out = []
    for i in range(60):
        turns = []
        for t in base.turns:
            if t.kind == "response":
                ttfs = round(rng.uniform(-200.0, 2500.0), 1)
                b = t.barge_in
                if b is not None:
                    b = b.model_copy(update={"outcome": rng.choice(["stopped", "not_stopped"])})
                t = t.model_copy(update={"ttfs_ms": ttfs, "barge_in": b})
            turns.append(t)
        out.append(
            base.model_copy(
                update={
                    "call": f"c_{i:08x}",
                    "started_at": f"2025-06-0{1 + i % 3}T1{i % 10}:00:00.000Z",
                    "dialect": "twilio" if i % 2 else "openai-realtime",
                    "turns": turns,
                }
            )
        )
    return out


def _sql_blocks() -> dict[str, str]:
    """The ```sql blocks of the doc's DuckDB section, by the comment on their first line."""
    text = DOC.read_text()
    section = text[text.index("## Receipts in DuckDB") :]
    blocks = re.findall(r"```sql\n(.*?)```", section, flags=re.S)
    named = {}
    for block in blocks:
        first = block.splitlines()[0]
        assert first.startswith("-- "), first
        named[first[3:].strip()] = block
    return named


def _query(sql: str) -> list[tuple[Any, ...]]:
    return duckdb.sql(sql).fetchall()


def test_the_documented_duckdb_queries_answer_from_an_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    v1, v2 = _fleet(1), _fleet(2)
    for version, receipts in (("v1", v1), ("v2", v2)):
        tags = {"agent_version": version}
        for table in ("calls", "turns"):
            write_parquet(
                tmp_path / f"{table}-{version}.parquet",
                table,  # type: ignore[arg-type]
                rows(receipts, table, tags),  # type: ignore[arg-type]
                tags,
            )
    monkeypatch.chdir(tmp_path)
    queries = _sql_blocks()
    assert {
        "p95 time to first sound by agent version and day",
        "barge-in failures by dialect",
    } <= set(queries)

    # p95 ttfs by agent version and day: DuckDB's quantile_cont is numpy's linear one.
    got = _query(queries["p95 time to first sound by agent version and day"])
    want = []
    for version, receipts in (("v1", v1), ("v2", v2)):
        for day in ("2025-06-01", "2025-06-02", "2025-06-03"):
            values = [
                t.ttfs_ms
                for r in receipts
                if r.started_at.startswith(day)
                for t in r.turns
                if t.kind == "response" and t.ttfs_ms is not None and t.ttfs_ms >= 0
            ]
            want.append((version, day, float(np.quantile(values, 0.95)), len(values)))
    assert len(got) == len(want) == 6
    for g, w in zip(got, want, strict=True):
        assert (g[0], str(g[1]), g[3]) == (w[0], w[1], w[3])
        assert abs(g[2] - w[2]) < 1e-6

    # Barge-in failures by dialect.
    got = _query(queries["barge-in failures by dialect"])
    want = []
    for dialect in ("openai-realtime", "twilio"):
        outcomes = [
            t.barge_in.outcome
            for r in (*v1, *v2)
            if r.dialect == dialect
            for t in r.turns
            if t.barge_in is not None
        ]
        failed = sum(1 for o in outcomes if o != "stopped")
        want.append((dialect, len(outcomes), failed))
    assert [(g[0], g[1], g[2]) for g in got] == want
    assert all(0.0 < g[3] < 1.0 for g in got)  # both outcomes occur in both dialects

    # Talk-over turns are in the export, not silently dropped.
    got = _query(queries["talk-over share by dialect"])
    for dialect, share in got:
        turns = [
            t
            for r in (*v1, *v2)
            if r.dialect == dialect
            for t in r.turns
            if t.kind == "response" and t.ttfs_ms is not None
        ]
        assert abs(share - sum(t.ttfs_ms < 0 for t in turns) / len(turns)) < 1e-9  # type: ignore[operator]
