"""Sharded load runs (``voxproxy/loadgen/shard.py``): the split, the start barrier's
time format, the shard file, the merge's checks, and end to end over loopback: one
process, two shard processes merged, and ``--workers 2``, all against one mock agent."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.receipt_samples import sample_receipt

from voxproxy.cli import main
from voxproxy.core.errors import ConfigError
from voxproxy.loadgen.caller import AgentChunk, CallRecord, SpeechTruth
from voxproxy.loadgen.runner import LoadPlan, call_id
from voxproxy.loadgen.scenario import find_scenario
from voxproxy.loadgen.shard import (
    SHARD_FILE,
    Shard,
    ShardResult,
    load_shard,
    merge_shards,
    parse_start_at,
    save_shard,
)
from voxproxy.mockagent import MockAgent, MockAgentConfig

# --- the split ----------------------------------------------------------------------


def test_shards_partition_the_calls_and_share_the_concurrency() -> None:
    for n in range(1, 6):
        for calls in (1, 7, 20):
            parts = [Shard(k, n).indices(calls) for k in range(n)]
            flat = sorted(i for p in parts for i in p)
            assert flat == list(range(calls)), (n, calls)  # every call once
        for total in (n, 10, 33):
            assert sum(Shard(k, n).concurrency(total) for k in range(n)) == total
    assert Shard(1, 3).indices(10) == [1, 4, 7]
    assert Shard(2, 3).concurrency(1) == 1  # never zero


@pytest.mark.parametrize("text", ["1", "2/2", "-1/2", "a/b", "0/0", "1/2/3"])
def test_a_bad_shard_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(ConfigError, match="--shard"):
        Shard.parse(text)


def test_start_at_reads_iso_times_with_a_zone_and_unix_seconds() -> None:
    noon = datetime(2026, 12, 1, 12, 0, tzinfo=UTC).timestamp()
    assert parse_start_at("2026-12-01T12:00:00Z") == noon
    assert parse_start_at("2026-12-01T13:00:00+01:00") == noon
    assert parse_start_at(str(noon)) == noon
    with pytest.raises(ConfigError, match="no time zone"):
        parse_start_at("2026-12-01T12:00:00")
    with pytest.raises(ConfigError, match="ISO 8601"):
        parse_start_at("tomorrow")


# --- the shard file and the merge's checks ------------------------------------------


def _plan(run_id: str = "00000000000000000abc", calls: int = 5) -> LoadPlan:
    return LoadPlan(
        target="ws://127.0.0.1:9/",
        dialect="twilio",
        scenarios=(find_scenario("normal_question"), find_scenario("interruption")),
        calls=calls,
        concurrency=4,
        run_id=run_id,
        seed=7,
    )


def _record(i: int) -> CallRecord:
    return CallRecord(
        t0_ns=1_000 * i,
        speech=[SpeechTruth("caller_yes", 2_000 + i, 900_000 + i, False, "yes")],
        agent_chunks=[AgentChunk(0, 160, 1_500_000 + i, 1_400_000 + i)],
        agent_rate_hz=8000,
        agent_spurts=[(1_500_000 + i, 1_600_000)],
        steps=[("say", 1, 2)],
        transcripts=[(3, "user", "yes", True)],
        pacing_lag_ns=[10, 20 + i],
    )


def _shard(plan: LoadPlan, k: int, n: int) -> ShardResult:
    recs = [(i, call_id(plan, i), _record(i)) for i in Shard(k, n).indices(plan.calls)]
    return ShardResult(plan, Shard(k, n), recs, started_at=100.0 + k)


def test_a_shard_file_keeps_every_record_and_the_plan(tmp_path: Path) -> None:
    plan = _plan()
    result = _shard(plan, 1, 2)
    result.receipts = {3: sample_receipt()}  # the proxy's receipt of call 3, when matched
    save_shard(tmp_path / "s1", result)
    back = load_shard(tmp_path / "s1")
    assert back.records == result.records
    assert back.receipts == result.receipts
    assert merge_shards([_shard(plan, 0, 2), back]).receipts == {3: sample_receipt()}
    assert back.shard == Shard(1, 2)
    assert back.fingerprint == result.fingerprint
    assert back.plan.scenarios == plan.scenarios
    assert (back.plan.run_id, back.plan.calls, back.plan.seed) == ("0" * 17 + "abc", 5, 7)
    # A plan edited after the fact does not pass for the original.
    doc_path = tmp_path / "s1" / SHARD_FILE
    import gzip

    doc = json.loads(gzip.decompress(doc_path.read_bytes()))
    doc["plan"]["calls"] = 6
    doc_path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    with pytest.raises(ConfigError, match="fingerprint"):
        load_shard(tmp_path / "s1")


def test_merging_needs_every_shard_of_one_run_once() -> None:
    plan = _plan()
    s0, s1, s2 = (_shard(plan, k, 3) for k in range(3))
    merged = merge_shards([s2, s0, s1])
    assert [i for i, _, _ in merged.records] == list(range(plan.calls))
    assert merged.records == sorted(s0.records + s1.records + s2.records, key=lambda r: r[0])
    assert merged.start_spread_s == 2.0
    assert merged.late == []
    assert merge_shards([s0, dataclasses.replace(s1, late_s=12.0), s2]).late == [("1/3", 12.0)]
    with pytest.raises(ConfigError, match=r"missing shard\(s\) 1/3"):
        merge_shards([s0, s2])
    with pytest.raises(ConfigError, match="given twice"):
        merge_shards([s0, s1, s1, s2])
    other = _shard(_plan(run_id="00000000000000000def"), 1, 3)
    with pytest.raises(ConfigError, match="another run"):
        merge_shards([s0, other, s2])
    cut = dataclasses.replace(s1, records=s1.records[:-1])
    with pytest.raises(ConfigError, match="not those of shard 1/3"):
        merge_shards([s0, cut, s2])


# --- end to end: one process, two shard processes, --workers 2 ----------------------

RUN_ID = "5ad0000000000000e2e0"
CALLS = 4


async def _voxproxy(*args: str, cwd: Path) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "voxproxy.cli",
        *args,
        cwd=cwd,
        env=os.environ.copy(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=240)
    text = out.decode(errors="replace")
    assert proc.returncode == 0, text
    return text


def _results(d: Path) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = json.loads((d / "results.json").read_text())["calls"]
    return calls


def _deterministic(r: dict[str, Any]) -> tuple[Any, ...]:
    """What does not depend on scheduling: which call played which scenario, its turns
    (clip, barge-in or not, answered or not, barge-in stopped or not), the first
    utterance's true extent (placed by the script at a fixed sample position), its noises
    and errors. The caller's measured times (ttfs, stop latency) carry each run's
    scheduling jitter (a few ms), so they are compared within a run, not across runs."""
    turns = tuple(
        (
            t["turn"],
            t["clip"],
            t["barge_in"],
            t["truth"]["ttfs_ms"] is not None,
            t["truth"]["stop_latency_ms"] is not None,
        )
        for t in r["turns"]
    )
    first = r["turns"][0]["truth"]
    return (
        r["scenario"],
        r["index"],
        r["dialect"],
        r["error"],
        turns,
        (first["caller_onset_ms"], first["caller_offset_ms"]),
        len(r["noises"]),
        r["no_response"],
    )


def _stats(values: list[float]) -> dict[str, float]:
    a = np.array(values, dtype=np.float64)
    return {f"p{q}": round(float(np.percentile(a, q)), 1) for q in (50, 90, 95, 99)} | {
        "max": round(float(a.max()), 1)
    }


@pytest.mark.slow
async def test_two_shard_processes_merge_to_the_single_run(tmp_path: Path) -> None:
    agent = MockAgent(MockAgentConfig(dialect="twilio", send_mode="burst", delay_ms=600, seed=3))
    await agent.start()
    common = [
        "load",
        "normal_question",
        "interruption",
        "--target",
        agent.url,
        "--dialect",
        "twilio",
        "--calls",
        str(CALLS),
        "--concurrency",
        str(CALLS),
        "--run-id",
        RUN_ID,
    ]
    try:
        # The same calls three ways, all at once (they share only the agent, which answers
        # each call on its own; what is compared across the runs below does not depend on
        # scheduling): as one process, as two shard processes behind one start barrier,
        # and as --workers 2, merged by the command itself.
        start_at = f"{time.time() + 8:.3f}"
        await asyncio.gather(
            _voxproxy(*common, "--out", "single", cwd=tmp_path),
            *(
                _voxproxy(
                    *common,
                    "--shard",
                    f"{k}/2",
                    "--start-at",
                    start_at,
                    "--out",
                    f"s{k}",
                    cwd=tmp_path,
                )
                for k in range(2)
            ),
            _voxproxy(*common, "--workers", "2", "--out", "workers", cwd=tmp_path),
        )
    finally:
        await agent.stop()
    merged_dir = tmp_path / "merged"
    code = await asyncio.to_thread(
        main,
        ["load", "merge", str(tmp_path / "s0"), str(tmp_path / "s1"), "--out", str(merged_dir)],
    )
    assert code == 0

    single, merged, workers = (_results(tmp_path / d) for d in ("single", "merged", "workers"))
    shard_own = {r["index"]: r for k in range(2) for r in _results(tmp_path / f"s{k}")}
    # Shard k played the calls i with i mod 2 = k, with the call ids a single run gives.
    for k in range(2):
        s = load_shard(tmp_path / f"s{k}")
        assert [i for i, _, _ in s.records] == [i for i in range(CALLS) if i % 2 == k]
        plan = dataclasses.replace(s.plan, run_id=RUN_ID)
        assert [cid for _, cid, _ in s.records] == [call_id(plan, i) for i, _, _ in s.records]
    # Every call once, in order, in all three runs.
    for run in (single, merged, workers):
        assert [r["index"] for r in run] == list(range(CALLS))
    # 1. Merging is exact: each merged per-call entry is the one its shard wrote itself
    #    (re-judged from the stored records, every measured time to the 0.1 ms) ...
    assert merged == [shard_own[i] for i in range(CALLS)]
    # ... and the merged percentiles are those of every call's figures together, not a
    #    combination of the shards' percentiles.
    summary = json.loads((merged_dir / "summary.json").read_text())
    ttfs = [t["truth"]["ttfs_ms"] for r in shard_own.values() for t in r["turns"]]
    stops = [
        t["truth"]["stop_latency_ms"]
        for r in shard_own.values()
        for t in r["turns"]
        if t["barge_in"]
    ]
    assert None not in ttfs and None not in stops
    for key, values in (("ttfs_ms", ttfs), ("stop_latency_ms", stops)):
        got = {q: summary["all"][key][q] for q in ("p50", "p90", "p95", "p99", "max")}
        assert got == _stats(values), key
        assert summary["all"][key]["n"] == len(values)
    # 2. Against the same calls run as one process (and as --workers 2): the figures that
    #    do not depend on scheduling are equal call by call, and so are the counts.
    assert [_deterministic(r) for r in merged] == [_deterministic(r) for r in single]
    assert [_deterministic(r) for r in workers] == [_deterministic(r) for r in single]
    single_summary = json.loads((tmp_path / "single" / "summary.json").read_text())
    workers_summary = json.loads((tmp_path / "workers" / "summary.json").read_text())
    for s in (summary, workers_summary):
        for key in ("calls", "turns", "barge_ins", "missed_responses", "errors"):
            assert s["all"][key] == single_summary["all"][key], key
        assert s["all"]["ttfs_ms"]["n"] == single_summary["all"]["ttfs_ms"]["n"]
    assert (merged_dir / "report.html").read_text().startswith("<!doctype html>")
