"""Sharded load from the command line: ``voxproxy load --shard K/N --start-at T`` and
``voxproxy load merge DIR...`` (the work is in :mod:`voxproxy.loadgen.shard`).

``voxproxy load merge`` is parsed as the ``load-merge`` subcommand (``voxproxy.cli``
rewrites the two words), since ``voxproxy load`` itself takes scenario names.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from voxproxy.loadgen.caller import CallRecord
    from voxproxy.loadgen.results import CallOutcome
    from voxproxy.loadgen.runner import LoadPlan
    from voxproxy.loadgen.shard import Shard, ShardResult


def add_shard_arguments(p: Any) -> None:
    """``voxproxy load``'s flags for sharded runs."""
    p.add_argument(
        "--shard",
        default=None,
        metavar="K/N",
        help="play only shard K of N (K from 0) of the calls: calls i with i mod N = K, with "
        "the seeds and call ids a single run would give them, and 1/N of --concurrency; also "
        "writes shard.json.gz (every call's record) for `voxproxy load merge`. A shard "
        "exits 0 once its calls are played; the merge exits 1 when an expectation fails",
    )
    p.add_argument(
        "--start-at",
        default=None,
        metavar="TIME",
        help="common start barrier: prepare, then wait for this wall-clock time "
        "(ISO 8601 with a zone, e.g. 2026-12-01T12:00:00Z, or Unix seconds)",
    )
    p.add_argument(
        "--run-id",
        default=None,
        metavar="HEX",
        help="the run's id (up to 20 hex digits; it goes into every call id). Shards of one "
        "run need the same one; by default it is derived from the plan and --start-at",
    )


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "load-merge",
        help="merge the shards of a sharded load run (also spelled `voxproxy load merge`)",
        description="Combine the output directories of `voxproxy load --shard K/N` runs into "
        "one results.json, summary.json and report.html, computed from every call's record "
        "(exact percentiles, as if one process had played every call). Checks that the "
        "shards belong to one run and that none is missing. Exits 1 when an expectation "
        "fails, like `voxproxy load`.",
    )
    p.add_argument("dirs", nargs="+", metavar="DIR", help="shard output directories")
    p.add_argument("--out", default="voxproxy-load", help="output directory")
    p.add_argument(
        "--proxy-receipts",
        default=None,
        help="the target voxproxy's receipts file: match its figures now (instead of the "
        "receipts each shard matched, if any)",
    )
    p.add_argument("--proxy-secret", default=None, help="the target voxproxy's --secret")
    p.add_argument("--transcript-policy", default=None, metavar="YAML")
    p.add_argument("--transcript-terms", action="append", default=[], metavar="YAML")
    p.set_defaults(func=_merge_cmd)


def rewrite_argv(argv: list[str]) -> list[str]:
    """``load merge ...`` → ``load-merge ...``."""
    if argv[:2] == ["load", "merge"]:
        return ["load-merge", *argv[2:]]
    return argv


def _say(text: str) -> None:
    print(f"voxproxy load: {text}", file=sys.stderr, flush=True)


@dataclass
class Sharding:
    """A sharded (or barrier-started) run's setup, made from ``voxproxy load``'s flags."""

    plan: LoadPlan
    shard: Shard | None
    start_at: float | None
    result: ShardResult | None = None

    async def play(
        self, progress: Callable[[Any], None] | None = None, into: list[Any] | None = None
    ) -> list[Any]:
        from voxproxy.loadgen.shard import Shard, run_shard

        shard = self.shard or Shard(0, 1)
        self.result = await run_shard(self.plan, shard, self.start_at, progress, _say, into)
        return list(self.result.records)

    @property
    def calls(self) -> int:
        """Calls this process plays."""
        return len(self.shard.indices(self.plan.calls)) if self.shard else self.plan.calls

    def view(self) -> LoadPlan:
        """The plan as this shard's own results describe it (its calls, its concurrency)."""
        if self.shard is None:
            return self.plan
        return dataclasses.replace(
            self.plan,
            calls=self.calls,
            concurrency=self.shard.concurrency(self.plan.concurrency),
        )

    def save(self, out: Path, calls: list[CallOutcome]) -> None:
        from voxproxy.loadgen.shard import save_shard

        if self.shard is None or self.result is None:
            return
        self.result.receipts = {c.index: c.receipt for c in calls if c.receipt is not None}
        path = save_shard(out, self.result)
        _say(f"shard {self.shard.label}: per-call records in {path} (for `voxproxy load merge`)")


def sharding(args: argparse.Namespace, plan: LoadPlan) -> Sharding | None:
    """None for an ordinary run; else the shard, the start time and the plan with its run id."""
    from voxproxy.core.errors import ConfigError
    from voxproxy.loadgen.shard import Shard, check_run_id, derived_run_id, parse_start_at

    shard = Shard.parse(args.shard) if args.shard is not None else None
    start_at = parse_start_at(args.start_at) if args.start_at is not None else None
    if args.run_id is not None:
        plan = dataclasses.replace(plan, run_id=check_run_id(args.run_id))
    if shard is None and start_at is None:
        return Sharding(plan, None, None) if args.run_id is not None else None
    if shard is not None and args.workers > 1:
        raise ConfigError("--shard and --workers do not go together: run one shard per process")
    if shard is not None and shard.count > 1 and start_at is None and args.run_id is None:
        raise ConfigError(
            "--shard K/N needs --start-at or --run-id, so that every shard derives the same "
            "run id (and call ids)"
        )
    if args.run_id is None:
        plan = dataclasses.replace(plan, run_id=derived_run_id(plan, start_at))
    return Sharding(plan, shard, start_at)


def _merge_cmd(args: argparse.Namespace) -> int:
    from voxproxy.core.errors import ConfigError
    from voxproxy.loadgen.runner import outcomes, print_summary, receipts_by_call, write_results
    from voxproxy.loadgen.shard import load_shard, merge_shards
    from voxproxy.transcripts.score import Scoring

    if bool(args.proxy_receipts) != bool(args.proxy_secret):
        raise ConfigError("--proxy-receipts and --proxy-secret go together")
    started = time.monotonic()
    merged = merge_shards([load_shard(Path(d)) for d in args.dirs])
    scoring = Scoring.load(args.transcript_policy, args.transcript_terms)
    records: list[tuple[int, str, CallRecord]] = merged.records
    if args.proxy_receipts:
        secret = args.proxy_secret.encode()
        calls = outcomes(
            merged.plan, records, receipts_by_call(Path(args.proxy_receipts), secret), secret
        )
    else:
        calls = outcomes(merged.plan, records)
        for c in calls:
            c.receipt = merged.receipts.get(c.index)
    for label, late_s in merged.late:
        _say(
            f"shard {label} began {late_s:.0f} s after --start-at: its calls ran later than the "
            "others', so the run's concurrency was lower than planned for a while"
        )
    out = Path(args.out)
    _results, summary = write_results(out, merged.plan, calls, scoring)
    print_summary(summary)
    failed = summary["all"]["failed_calls"]
    spread = (
        f", shard starts {merged.start_spread_s * 1000:.0f} ms apart"
        if merged.start_spread_s == merged.start_spread_s
        else ""
    )
    print(
        f"{merged.plan.calls} calls from {merged.shards} shards (run {merged.plan.run_id}"
        f"{spread}) merged in {time.monotonic() - started:.0f} s; {failed} failed an "
        f"expectation. Results: {out / 'results.json'}, {out / 'summary.json'}, "
        f"{out / 'report.html'}"
    )
    return 1 if failed else 0
