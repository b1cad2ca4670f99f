"""The SQLite receipt store: background writes, round trip, filters, clear errors."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from support.flowkit import flow_receipts, healthy

from voxproxy.core.errors import ConfigError
from voxproxy.core.receipt import Receipt
from voxproxy.receipts import store as store_module
from voxproxy.receipts.policy import load_policy
from voxproxy.receipts.store import (
    ReceiptStore,
    StoreQuery,
    connect,
    insert,
    query_receipts,
    utc_text,
)
from voxproxy.receipts.verdict import judged

POLICY = load_policy()


def at(receipt: Receipt, started_at: str, **update: object) -> Receipt:
    return receipt.model_copy(update={"started_at": started_at, **update})


def sample() -> list[Receipt]:
    """Judged flow receipts on three days, two dialects."""
    out = []
    for i, r in enumerate(flow_receipts()):
        day = 1 + i % 3
        dialect = "twilio" if i % 2 else "raw"
        out.append(judged(at(r, f"2025-06-0{day}T10:00:0{i % 10}.000Z", dialect=dialect), POLICY))
    return out


def test_round_trip_from_the_background_thread(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "receipts.db"  # the directory is created
    store = ReceiptStore(path)
    receipts = sample()
    for r in receipts:
        store.write(r)
    store.close()
    assert (store.written, store.failed) == (len(receipts), 0)
    back = list(query_receipts(path))
    by_call = {r.call: r for r in receipts}
    assert len(back) == len(receipts)
    assert all(r == by_call[r.call] for r in back)  # every field survives
    assert [r.started_at for r in back] == sorted(r.started_at for r in receipts)


def test_schema_indexes_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    conn = connect(path)
    insert(conn, [judged(healthy(), POLICY)])
    conn.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    columns = [row[1] for row in db.execute("PRAGMA table_info(receipts)")]
    assert columns == [
        "id",
        "call",
        "started_at",
        "dialect",
        "terminal",
        "verdict",
        "policy",
        "receipt",
    ]
    names = {  # index_info rows are (seqno, cid, column name)
        db.execute(f"PRAGMA index_info({n})").fetchone()[2]
        for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
    }
    assert names == {"call", "started_at", "dialect", "terminal", "verdict", "policy"}
    row = db.execute("SELECT verdict, policy, terminal, dialect FROM receipts").fetchone()
    assert row == ("pass", POLICY.hash, "completed", "flow")
    db.close()


def test_writing_returns_at_once_even_while_the_database_is_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "r.db"
    store = ReceiptStore(path)
    release = threading.Event()
    real_insert = store_module.insert

    def slow_insert(conn: sqlite3.Connection, receipts: list[Receipt]) -> int:
        release.wait(5)
        return real_insert(conn, receipts)

    monkeypatch.setattr(store_module, "insert", slow_insert)
    for _ in range(50):
        store.write(healthy())  # the thread is stuck: writes only queue
    assert store.written == 0
    release.set()
    store.close()
    assert store.written == 50
    assert len(list(query_receipts(path))) == 50


def test_a_failing_insert_is_counted_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(conn: sqlite3.Connection, receipts: list[Receipt]) -> int:
        raise sqlite3.OperationalError("disk I/O error")

    store = ReceiptStore(tmp_path / "r.db")
    monkeypatch.setattr(store_module, "insert", broken)
    store.write(healthy())
    store.close()
    assert (store.written, store.failed) == (0, 1)


@pytest.fixture
def filled(tmp_path: Path) -> tuple[Path, list[Receipt]]:
    path = tmp_path / "r.db"
    conn = connect(path)
    receipts = sample()
    unjudged = at(healthy(name="unjudged"), "2025-06-02T23:30:00.000+02:00")
    insert(conn, [*receipts, unjudged])
    conn.close()
    return path, [*receipts, unjudged]


def calls(path: Path, **query: object) -> set[str]:
    return {r.call for r in query_receipts(path, StoreQuery(**query))}  # type: ignore[arg-type]


def test_filters(filled: tuple[Path, list[Receipt]]) -> None:
    path, receipts = filled

    def expect(pred: object) -> set[str]:
        return {r.call for r in receipts if pred(r)}  # type: ignore[operator]

    assert calls(path) == expect(lambda r: True)
    assert calls(path, verdicts=("barge_in_failed",)) == expect(
        lambda r: r.verdict and r.verdict.verdict == "barge_in_failed"
    )
    assert len(calls(path, verdicts=("barge_in_failed",))) == 2
    assert calls(path, verdicts=("pass", "none")) == expect(
        lambda r: r.verdict is None or r.verdict.verdict == "pass"
    )
    assert calls(path, dialect="twilio") == expect(lambda r: r.dialect == "twilio")
    assert calls(path, terminal="upstream_timeout") == expect(
        lambda r: r.terminal == "upstream_timeout"
    )
    # Times: since inclusive, until exclusive; offsets honoured; naive times are UTC.
    day2 = calls(path, since="2025-06-02", until="2025-06-03")
    assert day2 == expect(lambda r: utc_text(r.started_at).startswith("2025-06-02"))
    # The unjudged receipt started 23:30+02:00 on the 2nd: 21:30 UTC, still the 2nd.
    assert any(r.verdict is None for r in receipts if r.call in day2)
    assert calls(path, since="2025-06-02T12:00:00+02:00", until="2025-06-02T12:00:01+02:00") == (
        expect(lambda r: r.started_at.startswith("2025-06-02T10:00:00"))
    )
    combined = calls(path, verdicts=("tool_effect_failed",), dialect="raw", since="2025-06-02")
    assert combined == expect(
        lambda r: (
            r.verdict
            and r.verdict.verdict == "tool_effect_failed"
            and r.dialect == "raw"
            and r.started_at >= "2025-06-02"
        )
    )
    assert len(list(query_receipts(path, StoreQuery(limit=3)))) == 3


def test_query_errors_name_the_store(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.db: no receipt store there"):
        list(query_receipts(tmp_path / "missing.db"))
    junk = tmp_path / "junk.db"
    junk.write_text("this is not sqlite " * 100)
    with pytest.raises(ConfigError, match=r"junk\.db: not a voxproxy receipt store"):
        list(query_receipts(junk))
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(ConfigError, match=r"other\.db: not a voxproxy receipt store"):
        list(query_receipts(other))
    good = tmp_path / "good.db"
    connect(good).close()
    with pytest.raises(ConfigError, match="not an ISO 8601 time: 'yesterday'"):
        list(query_receipts(good, StoreQuery(since="yesterday")))


def test_an_unopenable_store_fails_at_start(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="cannot open the receipt store"):
        ReceiptStore(blocker / "r.db")


def test_utc_text() -> None:
    assert utc_text("2025-06-01") == "2025-06-01T00:00:00.000Z"
    assert utc_text("2025-06-01T12:00:00+02:00") == "2025-06-01T10:00:00.000Z"
    assert utc_text("2025-06-01T10:00:00.123456Z") == "2025-06-01T10:00:00.123Z"
    with pytest.raises(ValueError):
        utc_text("June 1st")
