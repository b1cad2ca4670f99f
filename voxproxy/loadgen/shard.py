"""Sharded load runs: one plan split over processes or machines, merged exactly.

A load plan's calls are numbered ``0 … calls-1``; call ``i`` plays scenario
``i mod len(scenarios)`` with seed ``seed + i`` and call id ``call_id(plan, i)``.
Shard ``K/N`` plays the calls ``i ≡ K (mod N)`` with its share of the concurrency,
so N shards of one plan play exactly the calls one run would, with the same
seeds and ids (the run id is given, or derived from the plan and the start time,
so every shard derives the same one).

Every shard keeps its per-call records (the caller's raw timings, not only their
percentiles) in ``shard.json.gz``; ``merge_shards`` checks that the shards belong
to one plan and cover every call once, and hands back the records of the whole
run. Judging them and writing ``results.json``/``summary.json``/``report.html``
then goes through the same code as a single run, so the merged percentiles are
exact (they are computed over every call, never averaged across shards).

``--start-at`` is a common start barrier on the wall clock: every shard prepares
(scenarios, clips), then waits for that time. ``play_workers`` runs the shards of
one plan as local processes (``voxproxy load --workers N``) behind the same
barrier and merges them in memory; :func:`play` plays a plan on this loop, or over
worker processes that way.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import hashlib
import math
import multiprocessing
import os
import queue as queue_mod
import re
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from pydantic import TypeAdapter

from voxproxy.core.errors import ConfigError
from voxproxy.core.receipt import Receipt
from voxproxy.loadgen.caller import CallRecord
from voxproxy.loadgen.progress import CallDone
from voxproxy.loadgen.runner import LoadPlan, run_calls
from voxproxy.loadgen.scenario import Scenario

SHARD_FILE = "shard.json.gz"
FORMAT = 1
Records = list[tuple[int, str, CallRecord]]

_RECORD = TypeAdapter(CallRecord)


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (written ``K/N``, K from 0)."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if m is None:
            raise ConfigError(f"--shard wants K/N (e.g. 0/4, K counted from 0), got {text!r}")
        k, n = int(m.group(1)), int(m.group(2))
        if n < 1 or k >= n:
            raise ConfigError(f"--shard {text}: K must be in 0…N-1 and N at least 1")
        return cls(k, n)

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    def indices(self, calls: int) -> list[int]:
        """The calls of a ``calls``-call plan this shard plays."""
        return list(range(self.index, calls, self.count))

    def concurrency(self, total: int) -> int:
        """This shard's share of ``total`` calls at once: the shares add up to it when
        ``total`` ≥ N; each shard plays at least one call at a time."""
        share = total // self.count + (1 if self.index < total % self.count else 0)
        return max(1, share)


def parse_start_at(text: str) -> float:
    """A wall-clock time (ISO 8601 with a zone, e.g. 2026-12-01T12:00:00Z, or Unix
    seconds) as Unix seconds."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ConfigError(
            f"--start-at wants an ISO 8601 time with a zone (2026-12-01T12:00:00Z) or Unix "
            f"seconds, got {text!r}"
        ) from None
    if when.tzinfo is None:
        raise ConfigError(
            f"--start-at {text!r} has no time zone: add Z (UTC) or an offset, so every shard "
            "reads the same instant"
        )
    return when.timestamp()


def _scenario_dump(plan: LoadPlan) -> list[dict[str, Any]]:
    return [
        {"scenario": s.model_dump(mode="json", exclude_unset=True), "base": str(b) if b else None}
        for s, b in plan.scenarios
    ]


def _plan_doc(plan: LoadPlan, headers_key: str, headers: list[Any]) -> dict[str, Any]:
    """The plan's fields, its headers as ``headers_key``: ``headers``."""
    return {
        "target": plan.target,
        "dialect": plan.dialect,
        "transport": plan.transport,
        "signaling": plan.signaling,
        "scenarios": _scenario_dump(plan),
        "calls": plan.calls,
        "concurrency": plan.concurrency,
        "sample_rate_hz": plan.sample_rate_hz,
        headers_key: headers,
        "seed": plan.seed,
        "run_id": plan.run_id,
        "tag_path": plan.tag_path,
        "tag_scenario": plan.tag_scenario,
    }


def plan_fingerprint(plan: LoadPlan) -> str:
    """What makes two shards parts of one run (headers enter as a hash only)."""
    what = _plan_doc(plan, "headers", [list(h) for h in plan.headers])
    return hashlib.sha256(orjson.dumps(what, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def derived_run_id(plan: LoadPlan, start_at: float | None) -> str:
    """A run id every shard of one invocation derives alike (20 hex digits, as call ids
    need): the plan's fingerprint and the start time."""
    base = plan_fingerprint(dataclasses.replace(plan, run_id=""))
    return hashlib.sha256(f"{base}:{start_at!r}".encode()).hexdigest()[:20]


def check_run_id(text: str) -> str:
    if not re.fullmatch(r"[0-9a-fA-F]{1,20}", text):
        raise ConfigError(f"--run-id wants 1 to 20 hex digits (they go into call ids): {text!r}")
    return text.lower().rjust(20, "0")


async def wait_until(start_at: float, say: Callable[[str], None] | None = None) -> float:
    """Sleep until the wall-clock time ``start_at``; returns how late we are (s, ≥ 0)."""
    ahead = start_at - time.time()
    if ahead > 0:
        if say is not None and ahead > 1:
            say(f"waiting {ahead:.0f} s for the common start ({_iso(start_at)})")
        # Coarse sleep, then a short final one against the wall clock.
        while (ahead := start_at - time.time()) > 0:
            await asyncio.sleep(min(ahead, 1.0))
        return 0.0
    late = -ahead
    if say is not None and late > 1:
        say(f"the common start ({_iso(start_at)}) passed {late:.0f} s ago; starting now")
    return late


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


@dataclass
class ShardResult:
    plan: LoadPlan
    shard: Shard
    records: Records
    # The proxy's receipt of each call, by call index, when the shard matched them.
    receipts: dict[int, Receipt] = dataclasses.field(default_factory=dict)
    started_at: float | None = None  # wall clock when its calls began
    late_s: float = 0.0  # how far after --start-at that was
    source: str = ""  # where it was read from (for error messages)
    fingerprint: str = ""  # of the plan as run (with its headers); computed when empty

    def __post_init__(self) -> None:
        if not self.fingerprint:
            self.fingerprint = plan_fingerprint(self.plan)


async def run_shard(
    plan: LoadPlan,
    shard: Shard,
    start_at: float | None = None,
    progress: Callable[[CallDone], None] | None = None,
    say: Callable[[str], None] | None = None,
    into: Records | None = None,
) -> ShardResult:
    """Play this shard's calls of ``plan`` (after ``start_at``, when given); ``into``
    collects the finished calls as they finish (see ``run_calls``)."""
    sub = dataclasses.replace(plan, concurrency=shard.concurrency(plan.concurrency))
    late = await wait_until(start_at, say) if start_at is not None else 0.0
    started = time.time()
    records = await run_calls(sub, shard.indices(plan.calls), progress, into)
    return ShardResult(plan, shard, records, started_at=started, late_s=late)


def save_shard(out_dir: Path, result: ShardResult) -> Path:
    """Write ``shard.json.gz`` (the plan, and every call's raw record) to ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = result.plan
    doc = {
        "format": FORMAT,
        "shard": {"index": result.shard.index, "count": result.shard.count},
        "fingerprint": result.fingerprint,
        # The header values may be credentials: their names only.
        "plan": _plan_doc(plan, "header_names", [name for name, _ in plan.headers]),
        "started_at": result.started_at,
        "late_s": result.late_s,
        "calls": [
            {
                "index": index,
                "call_id": cid,
                "record": _RECORD.dump_python(
                    dataclasses.replace(record, messages_sent=[], messages_received=[]),
                    mode="json",
                ),
                # As the receipts file has it (voxproxy.receipts.writer), one JSON line.
                "receipt": (
                    result.receipts[index].to_json_line() if index in result.receipts else None
                ),
            }
            for index, cid, record in result.records
        ],
    }
    path = out_dir / SHARD_FILE
    tmp = path.with_suffix(".tmp")
    with gzip.open(tmp, "wb", compresslevel=5) as f:
        f.write(orjson.dumps(doc))
    tmp.replace(path)
    return path


def load_shard(where: Path) -> ShardResult:
    """Read a shard written by ``save_shard`` (its file, or the directory holding it)."""
    path = where / SHARD_FILE if where.is_dir() else where
    if not path.exists():
        raise ConfigError(f"{where}: no {SHARD_FILE} (was it written by voxproxy load --shard?)")
    try:
        with gzip.open(path, "rb") as f:
            doc = orjson.loads(f.read())
    except (OSError, orjson.JSONDecodeError, EOFError) as exc:
        raise ConfigError(f"{path}: not a readable shard file ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ConfigError(f"{path}: unknown shard format (want {FORMAT})")
    plan = load_plan_only(doc)
    records: Records = []
    receipts: dict[int, Receipt] = {}
    for c in doc["calls"]:
        records.append((c["index"], c["call_id"], _RECORD.validate_python(c["record"])))
        if c["receipt"] is not None:
            receipts[c["index"]] = Receipt.model_validate_json(c["receipt"])
    s = doc["shard"]
    result = ShardResult(
        plan,
        Shard(s["index"], s["count"]),
        records,
        receipts,
        started_at=doc["started_at"],
        late_s=doc["late_s"],
        source=str(where),
        fingerprint=str(doc["fingerprint"]),
    )
    # Header values are not stored, so the fingerprint can be checked only without headers.
    if not doc["plan"]["header_names"] and plan_fingerprint(plan) != result.fingerprint:
        raise ConfigError(f"{path}: the plan does not match its fingerprint (file edited?)")
    return result


def load_plan_only(doc: dict[str, Any]) -> LoadPlan:
    """The plan a shard file records (without header values)."""
    p = doc["plan"]
    return LoadPlan(
        target=p["target"],
        dialect=p["dialect"],
        scenarios=tuple(
            (Scenario.model_validate(s["scenario"]), Path(s["base"]) if s["base"] else None)
            for s in p["scenarios"]
        ),
        calls=p["calls"],
        concurrency=p["concurrency"],
        sample_rate_hz=p["sample_rate_hz"],
        tag_path=p["tag_path"],
        tag_scenario=p["tag_scenario"],
        run_id=p["run_id"],
        seed=p["seed"],
        transport=p["transport"],
        signaling=p["signaling"],
    )


@dataclass
class Merged:
    plan: LoadPlan
    records: Records
    receipts: dict[int, Receipt]
    shards: int
    start_spread_s: float  # latest minus earliest shard start (the barrier's spread)
    # Shards that began more than a second after the common start: (K/N, seconds late).
    late: list[tuple[str, float]] = dataclasses.field(default_factory=list)


def merge_shards(shards: list[ShardResult]) -> Merged:
    """The whole run from its shards: they must belong to one plan and together play
    every call of it exactly once."""
    if not shards:
        raise ConfigError("load merge: no shards given")
    first = shards[0]
    for s in shards[1:]:
        if s.fingerprint != first.fingerprint or s.shard.count != first.shard.count:
            raise ConfigError(
                f"{s.source or 'shard ' + s.shard.label} belongs to another run than "
                f"{first.source or 'shard ' + first.shard.label} (run ids {s.plan.run_id} and "
                f"{first.plan.run_id}, or a different plan)"
            )
    n = first.shard.count
    seen: dict[int, ShardResult] = {}
    for s in shards:
        if s.shard.index in seen:
            raise ConfigError(
                f"shard {s.shard.label} given twice ({seen[s.shard.index].source or '?'} and "
                f"{s.source or '?'})"
            )
        seen[s.shard.index] = s
    missing = [f"{k}/{n}" for k in range(n) if k not in seen]
    if missing:
        raise ConfigError(f"load merge: missing shard(s) {', '.join(missing)}")
    records: Records = []
    receipts: dict[int, Receipt] = {}
    for s in shards:
        if sorted(i for i, _, _ in s.records) != s.shard.indices(s.plan.calls):
            raise ConfigError(
                f"{s.source or 'shard ' + s.shard.label}: its calls are not those of shard "
                f"{s.shard.label} (an interrupted run?)"
            )
        records.extend(s.records)
        receipts.update(s.receipts)
    records.sort(key=lambda r: r[0])
    starts = [s.started_at for s in shards if s.started_at is not None]
    spread = max(starts) - min(starts) if starts else math.nan
    late = [(s.shard.label, s.late_s) for s in sorted(shards, key=lambda s: s.shard.index)]
    return Merged(first.plan, records, receipts, n, spread, [x for x in late if x[1] > 1.0])


# --- local worker processes (voxproxy load --workers N) ---------------------------------


def _worker_main(
    plan: LoadPlan,
    shard: Shard,
    messages: Any,
    go: Any,
    start_at: Any,
) -> None:
    """One worker process: prepare, report ready, wait for the common start, play.
    On SIGINT it stops its calls and reports the ones that finished."""

    def progress(call: CallDone) -> None:
        messages.put(("calls", shard.index, call))

    async def main() -> Records:
        messages.put(("ready", shard.index, None))
        loop = asyncio.get_running_loop()
        finished: Records = []
        task = asyncio.ensure_future(loop.run_in_executor(None, go.wait))
        loop.add_signal_handler(signal.SIGINT, lambda: task.cancel())
        try:
            await task
            task = asyncio.ensure_future(
                run_shard(plan, shard, float(start_at.value), progress, into=finished)
            )
            return list((await task).records)
        except asyncio.CancelledError:
            return sorted(finished, key=lambda r: r[0])

    try:
        try:
            import uvloop

            records = uvloop.run(main())
        except ImportError:
            records = asyncio.run(main())
        messages.put(("done", shard.index, records))
    except KeyboardInterrupt:
        pass
    except Exception as exc:
        messages.put(("error", shard.index, f"{type(exc).__name__}: {exc}"))


def play_workers(
    plan: LoadPlan,
    workers: int,
    progress: Callable[[CallDone], None] | None = None,
    ready_timeout_s: float = 120.0,
    stop: threading.Event | None = None,
) -> Records:
    """Every call of ``plan``, over ``workers`` local processes (shard ``k/workers`` each).

    They start together: each reports ready once imported and prepared, then all wait
    for one wall-clock time shortly after the last is ready. Progress counts calls
    finished in any worker. Returns the merged records, by call index. When ``stop`` is
    set, each worker is interrupted (SIGINT) and the calls they finished are returned."""
    ctx = multiprocessing.get_context("spawn")
    messages = ctx.Queue()
    go = ctx.Event()
    start_at = ctx.Value("d", 0.0)
    shards = [Shard(k, workers) for k in range(workers)]
    procs = [
        ctx.Process(
            target=_worker_main,
            args=(plan, s, messages, go, start_at),
            name=f"voxproxy-load-{s.index}",
            daemon=True,
        )
        for s in shards
    ]
    for p in procs:
        p.start()
    ready: set[int] = set()
    done: dict[int, Records] = {}
    deadline = time.monotonic() + ready_timeout_s
    stopping = False
    try:
        while len(done) < workers:
            if stop is not None and stop.is_set() and not stopping:
                stopping = True
                for p in procs:
                    if p.is_alive() and p.pid is not None:
                        os.kill(p.pid, signal.SIGINT)
            try:
                kind, k, payload = messages.get(timeout=0.2 if stop is not None else 0.5)
            except queue_mod.Empty:
                for s, p in zip(shards, procs, strict=True):
                    if s.index not in done and not p.is_alive() and stopping:
                        done[s.index] = []  # interrupted before it could report
                    elif s.index not in done and not p.is_alive():
                        raise ConfigError(
                            f"load worker {s.label} exited (status {p.exitcode}) before it "
                            "finished its calls"
                        ) from None
                if not go.is_set() and time.monotonic() > deadline:
                    raise ConfigError(
                        f"load workers not ready after {ready_timeout_s:.0f} s "
                        f"({len(ready)} of {workers})"
                    ) from None
                continue
            if kind == "ready":
                ready.add(k)
                if len(ready) == workers:
                    start_at.value = time.time() + 0.1
                    go.set()
            elif kind == "calls":
                if progress is not None:
                    progress(payload)
            elif kind == "done":
                done[k] = payload
            elif kind == "error":
                raise ConfigError(f"load worker {k}/{workers} failed: {payload}")
    finally:
        for p in procs:
            if p.is_alive() and len(done) < workers:
                p.terminate()
        for p in procs:
            p.join(timeout=10)
    if stopping:  # an interrupted run: the calls that finished, in no shard's full set
        return sorted((r for k in sorted(done) for r in done[k]), key=lambda r: r[0])
    merged = merge_shards([ShardResult(plan, s, done[s.index]) for s in shards])
    return merged.records


async def play(
    plan: LoadPlan,
    workers: int = 1,
    progress: Callable[[CallDone], None] | None = None,
    into: Records | None = None,
    stop: threading.Event | None = None,
) -> Records:
    """All calls of the plan, on this loop or spread over ``workers`` processes.

    To interrupt: on one loop, cancel this and read ``into``; with workers, set ``stop``
    and this returns the calls the workers finished."""
    # No more workers than calls, nor than calls at once (each worker plays at least one).
    workers = min(workers, plan.calls, plan.concurrency)
    if workers <= 1:
        return await run_calls(plan, list(range(plan.calls)), progress, into)
    # Shard k/workers of the plan in each process, started together, merged by call index.
    return await asyncio.to_thread(play_workers, plan, workers, progress, stop=stop)
