"""voxproxy.proxy.journals: where worker ``i`` of ``voxproxy proxy --workers N`` journals
its calls in progress, folding the journals of workers that will not run again into
worker 0's, and the parent writing a dead worker's receipts from its journal.

On files under ``tmp_path``; no process is started (tests/proxy/test_workers.py runs the
real workers).
"""

from __future__ import annotations

import json
from pathlib import Path

from voxproxy.proxy.journals import fold_journals, recover_journal, worker_journal
from voxproxy.proxy.server import ServeConfig
from voxproxy.proxy.websocket import ProxyConfig
from voxproxy.receipts.journal import journal_path
from voxproxy.receipts.policy import load_policy
from voxproxy.receipts.writer import read_receipts
from voxproxy.transports.websocket import RelayConfig


def _config(receipts: Path | None) -> ServeConfig:
    return ServeConfig(
        ProxyConfig(RelayConfig("ws://127.0.0.1:1"), secret=b"s"), receipts=receipts, workers=2
    )


def test_worker_0_journals_where_a_single_proxy_does_and_the_others_beside_it(
    tmp_path: Path,
) -> None:
    receipts = tmp_path / "r.jsonl"
    assert worker_journal(receipts, 0) == journal_path(receipts)
    assert worker_journal(str(receipts), 2) == journal_path(receipts).with_name(
        journal_path(receipts).name + ".2"
    )
    assert len({worker_journal(receipts, i) for i in range(4)}) == 4


def test_journals_of_workers_gone_are_folded_into_worker_0s(tmp_path: Path) -> None:
    receipts = tmp_path / "r.jsonl"
    worker_journal(receipts, 0).write_text('{"open": "a", "start_wall_ns": 1}\n{"clo')
    worker_journal(receipts, 1).write_text('{"open": "b", "start_wall_ns": 2}\n')
    worker_journal(receipts, 3).write_text('{"open": "c", "start_wall_ns": 3}\n')
    assert fold_journals(receipts, 2) == 1  # worker 1 still runs; worker 3 does not
    lines = worker_journal(receipts, 0).read_text().splitlines()
    assert lines == [
        '{"open": "a", "start_wall_ns": 1}',
        '{"clo',
        '{"open": "c", "start_wall_ns": 3}',
    ]
    assert worker_journal(receipts, 1).exists() and not worker_journal(receipts, 3).exists()


def test_a_folded_journal_never_glues_its_first_line_to_a_torn_one(tmp_path: Path) -> None:
    receipts = tmp_path / "r.jsonl"
    worker_journal(receipts, 0).write_text('{"open": "a"}\n{"torn')
    worker_journal(receipts, 2).write_text('{"open": "b"}')  # no final newline either
    assert fold_journals(receipts, 1) == 1
    assert worker_journal(receipts, 0).read_text() == '{"open": "a"}\n{"torn\n{"open": "b"}\n'


def test_folding_starts_worker_0s_journal_and_drops_empty_ones(tmp_path: Path) -> None:
    receipts = tmp_path / "r.jsonl"
    worker_journal(receipts, 1).write_text('{"open": "b"}\n')
    worker_journal(receipts, 2).write_text("  \n")  # nothing in it
    other = journal_path(receipts).with_name(journal_path(receipts).name + ".bak")
    other.write_text("not a worker's\n")
    assert fold_journals(receipts, 1) == 2
    assert worker_journal(receipts, 0).read_text() == '{"open": "b"}\n'
    assert not worker_journal(receipts, 1).exists() and not worker_journal(receipts, 2).exists()
    assert other.read_text() == "not a worker's\n"  # not a worker's journal: left alone
    assert fold_journals(receipts, 1) == 0


def test_the_parent_writes_the_receipts_of_a_dead_worker_s_calls_from_its_journal(
    tmp_path: Path,
) -> None:

    receipts = tmp_path / "r.jsonl"
    config = ServeConfig(
        ProxyConfig(RelayConfig("ws://127.0.0.1:1"), secret=b"s"),
        receipts=receipts,
        workers=2,
    )
    policy = load_policy(None)
    assert recover_journal(config, policy, 1) == 0  # no journal: nothing to do
    started, wall = "2026-12-04T10:00:00.000Z", 1_796_378_400_000_000_000
    lines = [
        {"open": "k1", "started_at": started, "start_wall_ns": wall, "transport": "websocket"},
        {"set": "k1", "dialect": "twilio", "call": "c_one", "call_id_source": "wire"},
        {"set": "k1", "upstream_connect_ms": 12.5},
        {"open": "k2", "started_at": started, "start_wall_ns": wall, "call": "c_two"},
        {"close": "k2"},
        {"alive": wall + 2_000_000_000},
    ]
    worker_journal(receipts, 1).write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert recover_journal(config, policy, 1) == 1
    (written,) = read_receipts(receipts)
    assert (written.call, written.terminal, written.dialect) == ("c_one", "proxy_crashed", "twilio")
    assert written.upstream_connect_ms == 12.5 and written.duration_ms == 2000.0
    assert written.verdict is not None and written.policy == policy.hash
    assert not worker_journal(receipts, 1).exists()  # every call written: nothing left open
    assert recover_journal(config, policy, 1) == 0  # and never twice


def test_without_a_receipts_file_there_is_nothing_to_recover(tmp_path: Path) -> None:
    worker_journal(tmp_path / "r.jsonl", 1).write_text('{"open": "k1"}\n')
    assert recover_journal(_config(None), load_policy(None), 1) == 0
    assert worker_journal(tmp_path / "r.jsonl", 1).exists()  # not touched
