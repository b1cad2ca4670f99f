"""An embedded SQLite store of receipts (stdlib ``sqlite3``, WAL mode).

One table, ``receipts``: indexed columns for what queries filter on (``call``,
``started_at``, ``dialect``, ``terminal``, ``verdict``, ``policy``) and the
receipt itself as JSON. ``started_at`` is stored normalised to UTC with
millisecond precision (``2025-06-01T09:30:00.000Z``) so that text order is
time order.

:class:`ReceiptStore` is a receipt sink for the proxy: like
:class:`~voxproxy.receipts.writer.ReceiptWriter`, a background thread owns the
database, so writing a receipt only puts it on a queue and never blocks the
event loop. Receipts queued together are inserted in one transaction.
:func:`query_receipts` reads a store (read-only) for the CLI.
"""

from __future__ import annotations

import datetime as _dt
import logging
import queue
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from pydantic import ValidationError

from voxproxy.core.errors import ConfigError
from voxproxy.core.receipt import Receipt
from voxproxy.core.timebase import parse_utc
from voxproxy.receipts.writer import STOP, BackgroundSink

log = logging.getLogger("voxproxy.store")

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS receipts (
    id INTEGER PRIMARY KEY,
    call TEXT NOT NULL,
    started_at TEXT NOT NULL,
    dialect TEXT NOT NULL,
    terminal TEXT NOT NULL,
    verdict TEXT,
    policy TEXT,
    receipt TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS receipts_call ON receipts (call);
CREATE INDEX IF NOT EXISTS receipts_started_at ON receipts (started_at);
CREATE INDEX IF NOT EXISTS receipts_dialect ON receipts (dialect);
CREATE INDEX IF NOT EXISTS receipts_terminal ON receipts (terminal);
CREATE INDEX IF NOT EXISTS receipts_verdict ON receipts (verdict);
CREATE INDEX IF NOT EXISTS receipts_policy ON receipts (policy);
"""
_INSERT = (
    "INSERT INTO receipts (call, started_at, dialect, terminal, verdict, policy, receipt) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_BATCH = 256


def utc_text(value: str) -> str:
    """An ISO 8601 time as UTC text with milliseconds; naive times are taken as UTC.

    Raises :class:`ValueError` when ``value`` is not an ISO 8601 date or time.
    """
    utc = parse_utc(value).astimezone(_dt.UTC)
    return utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _row(receipt: Receipt) -> tuple[str, str, str, str, str | None, str | None, str]:
    try:
        started = utc_text(receipt.started_at)
    except ValueError:
        started = receipt.started_at
    return (
        receipt.call,
        started,
        receipt.dialect,
        receipt.terminal,
        receipt.verdict.verdict if receipt.verdict is not None else None,
        receipt.policy,
        receipt.model_dump_json(by_alias=True),
    )


def connect(path: str | Path) -> sqlite3.Connection:
    """Open (creating if needed) a store for writing: schema, WAL mode."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(target, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        conn.commit()
    except (OSError, sqlite3.Error) as exc:
        raise ConfigError(f"{path}: cannot open the receipt store: {exc}") from None
    return conn


def insert(conn: sqlite3.Connection, receipts: Iterable[Receipt]) -> int:
    """Insert receipts in one transaction; returns how many."""
    rows = [_row(r) for r in receipts]
    with conn:
        conn.executemany(_INSERT, rows)
    return len(rows)


class ReceiptStore(BackgroundSink):
    """A receipt sink: receipts go to SQLite from a background thread."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._conn = connect(self.path)  # errors surface here, before any call
        self._start("receipt-store")

    def write(self, receipt: Receipt) -> None:
        self._queue.put(receipt)

    def _run(self) -> None:
        stop = False
        while not stop:
            batch: list[Receipt] = []
            item = self._queue.get()
            while True:
                if item is STOP:
                    stop = True
                    break
                assert isinstance(item, Receipt)
                batch.append(item)
                if len(batch) >= _BATCH:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                try:
                    self.written += insert(self._conn, batch)
                except (sqlite3.Error, ValueError) as exc:
                    self.failed += len(batch)
                    log.warning("%s: could not store %d receipt(s): %s", self.path, len(batch), exc)
        self._conn.close()


# -- queries ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoreQuery:
    """Filters; all optional. ``since`` is inclusive, ``until`` exclusive (ISO 8601)."""

    verdicts: Sequence[str] = ()  # "none" matches receipts without a verdict
    since: str | None = None
    until: str | None = None
    dialect: str | None = None
    terminal: str | None = None
    limit: int | None = None


def _where(q: StoreQuery) -> tuple[str, list[object]]:
    clauses: list[str] = []
    params: list[object] = []
    if q.verdicts:
        named = [v for v in q.verdicts if v != "none"]
        parts = []
        if named:
            parts.append(f"verdict IN ({', '.join('?' for _ in named)})")
            params.extend(named)
        if "none" in q.verdicts:
            parts.append("verdict IS NULL")
        clauses.append("(" + " OR ".join(parts) + ")")
    for column, op, value in (
        ("started_at", ">=", q.since),
        ("started_at", "<", q.until),
    ):
        if value is not None:
            try:
                params.append(utc_text(value))
            except ValueError:
                raise ConfigError(f"not an ISO 8601 time: {value!r}") from None
            clauses.append(f"{column} {op} ?")
    for column, value in (("dialect", q.dialect), ("terminal", q.terminal)):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def query_receipts(path: str | Path, query: StoreQuery | None = None) -> Iterator[Receipt]:
    """Receipts in the store at ``path`` that match ``query``, oldest first."""
    q = query or StoreQuery()
    where, params = _where(q)
    sql = f"SELECT id, receipt FROM receipts{where} ORDER BY started_at, id"
    if q.limit is not None:
        sql += " LIMIT ?"
        params.append(q.limit)
    target = Path(path)
    if not target.is_file():
        raise ConfigError(f"{path}: no receipt store there")
    uri = f"file:{quote(str(target.resolve()))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise ConfigError(f"{path}: cannot open the receipt store: {exc}") from None
    try:
        try:
            rows = conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise ConfigError(f"{path}: not a voxproxy receipt store ({exc})") from None
        for row_id, text in rows:
            try:
                yield Receipt.model_validate_json(text)
            except ValidationError as exc:
                raise ConfigError(
                    f"{path}: row {row_id} is not a valid receipt: {exc.errors()[0]['msg']}"
                ) from None
    finally:
        conn.close()
