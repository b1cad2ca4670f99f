"""Receipts as flat tables, for the tools analysts query them with (DuckDB, BigQuery,
ClickHouse, pandas): one row per call, per turn or per tool call, written as Parquet
(through pyarrow, the optional ``parquet`` extra) or JSON lines.

Columns keep the receipt's names and units (``ttfs_ms`` is milliseconds, as in the
receipt); every table starts with the call's keys (``call``, ``started_at`` in UTC,
its ``day``, ``dialect``, ``transport``, ``terminal``, ``verdict``) so tables join on
``call`` and group by day without parsing. ``tags`` add constant columns (say
``agent_version=v12``) so exports from several proxies or agent versions can be
stacked and told apart. Content-free like the receipts themselves.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Literal, get_args

from voxproxy.core.errors import ConfigError
from voxproxy.core.receipt import Receipt
from voxproxy.receipts.store import utc_text

Table = Literal["calls", "turns", "tools"]
Format = Literal["parquet", "jsonl"]
FORMATS: tuple[Format, ...] = get_args(Format)

PARQUET_EXTRA = "pip install 'voxproxy[parquet]'"
"""What to run when pyarrow is missing (the one line the command prints)."""

ColumnType = Literal["string", "double", "int64", "bool", "date"]

_KEYS: tuple[tuple[str, ColumnType], ...] = (
    ("call", "string"),
    ("started_at", "string"),
    ("day", "date"),
    ("dialect", "string"),
    ("transport", "string"),
    ("terminal", "string"),
    ("verdict", "string"),
)

COLUMNS: dict[Table, tuple[tuple[str, ColumnType], ...]] = {
    "calls": (
        *_KEYS,
        ("verdict_gate", "string"),
        ("verdict_cause", "string"),
        ("policy", "string"),
        ("call_id_source", "string"),
        ("source", "string"),
        ("vantage", "string"),
        ("duration_ms", "double"),
        ("upstream_connect_ms", "double"),
        ("upstream_status", "int64"),
        ("close_initiator", "string"),
        ("turns", "int64"),
        ("responses", "int64"),
        ("no_responses", "int64"),
        ("talk_overs", "int64"),
        ("ttfs_ms_median", "double"),
        ("ttfs_ms_max", "double"),
        ("barge_ins", "int64"),
        ("barge_ins_stopped", "int64"),
        ("stop_latency_ms_max", "double"),
        ("flushes", "int64"),
        ("anomalies", "int64"),
        ("measurement_disabled", "bool"),
        ("tool_calls", "int64"),
        ("stale_writes", "int64"),
        ("unsafe_retries", "int64"),
        ("confirmation_mismatches", "int64"),
        ("outcome_verified", "bool"),
        ("caller_audio_ms", "double"),
        ("agent_audio_ms", "double"),
    ),
    "turns": (
        *_KEYS,
        ("turn", "int64"),
        ("kind", "string"),
        ("ttfs_ms", "double"),
        ("ttfs_uncertainty_ms", "double"),
        ("talked_over", "bool"),
        ("reason", "string"),
        ("caller_onset_ms", "double"),
        ("caller_offset_ms", "double"),
        ("agent_onset_ms", "double"),
        ("agent_offset_ms", "double"),
        ("talk_over_ms", "double"),
        ("reprompt_ms", "double"),
        ("flushes", "int64"),
        ("tool_calls", "int64"),
        ("barge_in_outcome", "string"),
        ("barge_in_evidence", "string"),
        ("barge_in_stop_latency_ms", "double"),
        ("barge_in_stop_uncertainty_ms", "double"),
        ("barge_in_ambiguous", "bool"),
    ),
    "tools": (
        *_KEYS,
        ("turn", "int64"),
        ("tool", "string"),
        ("operation_id", "string"),
        ("attempt", "int64"),
        ("status", "string"),
        ("started_ms", "double"),
        ("finished_ms", "double"),
        ("latency_ms", "double"),
        ("cancelled", "bool"),
        ("idempotent", "bool"),
        ("stale_write", "bool"),
        ("stale_cause", "string"),
        ("unsafe_retry", "bool"),
        ("source", "string"),
    ),
}
"""Every table's columns and their types, in order (a Parquet file has them even when
it has no rows)."""


def _keys(r: Receipt) -> dict[str, Any]:
    try:
        started = utc_text(r.started_at)
    except ValueError:
        started = r.started_at
    return {
        "call": r.call,
        "started_at": started,
        "day": started[:10],
        "dialect": r.dialect,
        "transport": r.transport,
        "terminal": r.terminal,
        "verdict": r.verdict.verdict if r.verdict is not None else None,
    }


def _call_row(r: Receipt) -> dict[str, Any]:
    s, e, v = r.summary, r.effects, r.verdict
    return {
        **_keys(r),
        "verdict_gate": v.gate if v is not None else None,
        "verdict_cause": v.cause if v is not None else None,
        "policy": r.policy,
        "call_id_source": r.call_id_source,
        "source": r.source,
        "vantage": r.vantage,
        "duration_ms": r.duration_ms,
        "upstream_connect_ms": r.upstream_connect_ms,
        "upstream_status": r.close.upstream_status,
        "close_initiator": r.close.initiator,
        "turns": s.turns,
        "responses": s.responses,
        "no_responses": s.no_responses,
        "talk_overs": sum(1 for t in r.turns if t.ttfs_ms is not None and t.ttfs_ms < 0),
        "ttfs_ms_median": s.ttfs_ms_median,
        "ttfs_ms_max": s.ttfs_ms_max,
        "barge_ins": s.barge_ins,
        "barge_ins_stopped": s.barge_ins_stopped,
        "stop_latency_ms_max": s.stop_latency_ms_max,
        "flushes": s.flushes,
        "anomalies": sum(r.anomalies.values()),
        "measurement_disabled": r.measurement_disabled,
        "tool_calls": e.tool_calls if e is not None else len(r.tools),
        "stale_writes": e.stale_writes if e is not None else None,
        "unsafe_retries": e.unsafe_retries if e is not None else None,
        "confirmation_mismatches": e.confirmation_mismatches if e is not None else None,
        "outcome_verified": e.outcome_verified if e is not None else None,
        "caller_audio_ms": r.traffic.caller_audio_ms,
        "agent_audio_ms": r.traffic.agent_audio_ms,
    }


def _turn_rows(r: Receipt) -> Iterator[dict[str, Any]]:
    keys = _keys(r)
    for t in r.turns:
        b = t.barge_in
        yield {
            **keys,
            "turn": t.index,
            "kind": t.kind,
            "ttfs_ms": t.ttfs_ms,
            "ttfs_uncertainty_ms": t.ttfs_uncertainty_ms,
            "talked_over": t.ttfs_ms < 0 if t.ttfs_ms is not None else None,
            "reason": t.reason,
            "caller_onset_ms": t.caller_onset_ms,
            "caller_offset_ms": t.caller_offset_ms,
            "agent_onset_ms": t.agent_onset_ms,
            "agent_offset_ms": t.agent_offset_ms,
            "talk_over_ms": t.talk_over_ms,
            "reprompt_ms": t.reprompt_ms,
            "flushes": t.flushes,
            "tool_calls": t.tool_calls,
            "barge_in_outcome": b.outcome if b is not None else None,
            "barge_in_evidence": b.evidence if b is not None else None,
            "barge_in_stop_latency_ms": b.stop_latency_ms if b is not None else None,
            "barge_in_stop_uncertainty_ms": b.stop_uncertainty_ms if b is not None else None,
            "barge_in_ambiguous": b.ambiguous if b is not None else None,
        }


def _tool_rows(r: Receipt) -> Iterator[dict[str, Any]]:
    keys = _keys(r)
    for c in r.tools:
        yield {
            **keys,
            "turn": c.turn,
            "tool": c.tool,
            "operation_id": c.operation_id,
            "attempt": c.attempt,
            "status": c.status,
            "started_ms": c.started_ms,
            "finished_ms": c.finished_ms,
            "latency_ms": c.latency_ms,
            "cancelled": c.cancelled,
            "idempotent": c.idempotent,
            "stale_write": c.stale_write,
            "stale_cause": c.stale_cause,
            "unsafe_retry": c.unsafe_retry,
            "source": c.source,
        }


def parse_tags(raw: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` pairs; KEY a column name that no table already has."""
    taken = {name for cols in COLUMNS.values() for name, _ in cols}
    tags: dict[str, str] = {}
    for item in raw:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ConfigError(f"--tag {item!r}: expected KEY=VALUE, KEY a plain name")
        if key in taken:
            raise ConfigError(f"--tag {key}: a column of that name exists already")
        tags[key] = value
    return tags


def rows(
    receipts: Iterable[Receipt], table: Table, tags: Mapping[str, str] | None = None
) -> Iterator[dict[str, Any]]:
    """The rows of ``table`` over ``receipts``, each with the ``tags`` columns last."""
    extra = dict(tags or {})
    for r in receipts:
        if table == "calls":
            found: Iterable[dict[str, Any]] = (_call_row(r),)
        elif table == "turns":
            found = _turn_rows(r)
        else:
            found = _tool_rows(r)
        for row in found:
            row.update(extra)
            yield row


def write_jsonl(out: IO[str], table_rows: Iterable[Mapping[str, Any]]) -> int:
    n = 0
    for row in table_rows:
        out.write(json.dumps(row, separators=(",", ":"), ensure_ascii=False) + "\n")
        n += 1
    return n


def write_parquet(
    path: str | Path,
    table: Table,
    table_rows: Iterable[Mapping[str, Any]],
    tags: Mapping[str, str] | None = None,
) -> int:
    """Write ``table_rows`` as one Parquet file (typed columns, zstd). Raises
    :class:`ConfigError` naming the extra to install when pyarrow is missing."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ConfigError(f"--format parquet needs pyarrow: {PARQUET_EXTRA}") from exc
    import datetime as dt

    types = {
        "string": pa.string(),
        "double": pa.float64(),
        "int64": pa.int64(),
        "bool": pa.bool_(),
        "date": pa.date32(),
    }
    columns = [*COLUMNS[table], *((k, "string") for k in (tags or {}))]
    schema = pa.schema([(name, types[kind]) for name, kind in columns])
    data: dict[str, list[Any]] = {name: [] for name, _ in columns}
    n = 0
    for row in table_rows:
        for name, kind in columns:
            value = row.get(name)
            if kind == "date" and value is not None:
                value = dt.date.fromisoformat(value)
            data[name].append(value)
        n += 1
    pq.write_table(pa.Table.from_pydict(data, schema=schema), str(path), compression="zstd")
    return n
