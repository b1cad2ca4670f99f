"""``voxproxy analyze`` behind its parser: jobs from the paths, the batch, the outputs.

The receipts go to one JSON-lines file in the order the recordings were given (a folder's
sorted), the report beside it, a table of the calls to stdout, one line per skipped file
to stderr; OTLP export (spans, metrics, receipt log records, as the proxy exports them)
when asked. Exit status: 0, or 1 when any recording was skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import sys
from collections.abc import Sequence
from pathlib import Path

from voxproxy.core.errors import ConfigError
from voxproxy.core.receipt import Receipt
from voxproxy.recordings.batch import Job, Options, Outcome, run_batch, source_suffixes
from voxproxy.recordings.files import parse_channels, recordings_in


def jobs_of(paths: Sequence[str], pairs: Sequence[Sequence[str]], channels: str) -> list[Job]:
    """One job per recording: each file (or each audio file of a folder), each pair."""
    try:
        roles = parse_channels(channels)
    except ValueError as exc:
        raise ConfigError(f"--channels: {exc}") from None
    jobs = [Job((str(p),), roles) for p in recordings_in(list(paths), source_suffixes())]
    for caller, agent, offset in pairs:
        try:
            offset_ms = float(offset)
        except ValueError:
            raise ConfigError(f"--pair {caller} {agent} {offset}: OFFSET_MS is no number") from None
        jobs.append(Job((caller, agent), roles, offset_ms))
    return jobs


def _table(outcomes: Sequence[Outcome], receipts: dict[int, Receipt]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def ms(x: float | None) -> str:
        return "—" if x is None else f"{x:.0f} ms"

    ok = len(receipts)
    table = Table(title=f"{ok} of {len(outcomes)} recording(s) measured", title_justify="left")
    numeric = ("length", "turns", "ttfs p50", "ttfs max", "stopped", "stop max")
    for col in ("recording", *numeric, "echo", "verdict", "gate"):
        table.add_column(col, justify="right" if col in numeric else "left", no_wrap=True)
    for i, o in enumerate(outcomes):
        r = receipts.get(i)
        if r is None:
            continue
        s = r.summary
        echo = r.recording.echo if r.recording is not None else None
        echo_text = (
            "—" if echo is None or echo.leak_db is None else f"{echo.leak_db:.0f} dB {echo.action}"
        )
        v = r.verdict
        verdict = (
            Text("—") if v is None else Text(v.verdict, "green" if v.verdict == "pass" else "red")
        )
        table.add_row(
            Text(Path(o.job.paths[0]).name + (" +1" if len(o.job.paths) > 1 else "")),
            f"{r.duration_ms / 1000:.1f} s",
            str(s.turns),
            ms(s.ttfs_ms_median),
            ms(s.ttfs_ms_max),
            f"{s.barge_ins_stopped}/{s.barge_ins}",
            ms(s.stop_latency_ms_max),
            echo_text,
            verdict,
            Text((v.gate or "") if v is not None else ""),
        )
    # A terminal's own width; piped, wide enough for a row on one line (rich's 80 is not).
    Console(width=None if sys.stdout.isatty() else 170).print(table)


def _export_otlp(receipts: Sequence[Receipt]) -> None:
    from voxproxy.core.timebase import EpochAnchor
    from voxproxy.telemetry import CallTimes, TelemetryConfig, make_telemetry

    # Its own service name (unless OTEL_SERVICE_NAME says), so that a recording's figures
    # never mix with the live proxy's in the same dashboards.
    telemetry = make_telemetry(TelemetryConfig(otlp=True, service_name="voxproxy-analyze"))
    for r in receipts:
        wall = int(_dt.datetime.fromisoformat(r.started_at).timestamp() * 1e9)
        end = round(r.duration_ms * 1e6)
        telemetry.on_receipt(r, None, CallTimes(EpochAnchor(mono_ns=0, wall_ns=wall), 0, end))
    asyncio.run(telemetry.aclose())


def run_analyze(args: argparse.Namespace) -> int:
    from voxproxy.clock import new_secret
    from voxproxy.receipts.policy import load_policy
    from voxproxy.recordings.player import CallView, read_truth, write_player_report

    jobs = jobs_of(args.paths, args.pair, args.channels)
    if not jobs:
        raise ConfigError("nothing to analyse: give recordings, folders of them, or --pair")
    out = Path(args.receipts)
    if out.is_dir():
        raise ConfigError(f"--receipts {out}: a directory; give the file to write")
    out.parent.mkdir(parents=True, exist_ok=True)
    report = None if args.report == "none" else Path(args.report or out.parent / "report.html")
    options = Options(
        secret=args.secret.encode() if args.secret else new_secret(),
        policy=load_policy(args.policy),
    )
    outcomes = _run(jobs, options, args.jobs, progress=not args.no_progress)
    receipts: dict[int, Receipt] = {}
    failures: list[tuple[str, str]] = []
    for i, o in enumerate(outcomes):
        r = o.receipt
        if r is None:
            failures.append((" + ".join(Path(p).name for p in o.job.paths), o.error or "failed"))
            print(f"voxproxy analyze: skipped {o.job.label}: {o.error}", file=sys.stderr)
        else:
            receipts[i] = r
    with open(out, "w", encoding="utf-8") as fh:
        for i in sorted(receipts):
            fh.write(receipts[i].to_json_line())
    _table(outcomes, receipts)
    if report is not None:
        views = []
        for i, r in receipts.items():
            job = outcomes[i].job
            starts = (
                (0.0,)
                if len(job.paths) == 1
                else (max(0.0, -job.offset_ms), max(0.0, job.offset_ms))
            )
            # A capture is no audio file a page can play: its timeline alone.
            files = [] if r.source == "capture" else list(zip(job.paths, starts, strict=True))
            views.append(
                CallView(
                    " + ".join(Path(p).name for p in job.paths), r, files, read_truth(job.paths[0])
                )
            )
        write_player_report(report, views, failures)
    if args.otel or _otlp_requested():
        _export_otlp(list(receipts.values()))
    audio = sum(o.audio_s for o in outcomes)
    cpu = sum(o.cpu_s for o in outcomes)
    print(
        f"{len(receipts)} receipt(s) -> {out}"
        + (f", report -> {report}" if report is not None else "")
        + (f"; {len(failures)} skipped" if failures else "")
        + (
            f"; {audio:.0f} s of audio in {cpu:.1f} s of CPU ({audio / cpu:.0f}x real time)"
            if cpu > 0
            else ""
        ),
        file=sys.stderr,
    )
    return 1 if failures else 0


def _otlp_requested() -> bool:
    from voxproxy.telemetry import otlp_requested

    return otlp_requested()


def _run(
    jobs: list[Job], options: Options, workers: int | None, *, progress: bool
) -> list[Outcome]:
    if not progress:
        return run_batch(jobs, options, workers=workers)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("analysing"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task("recordings", total=len(jobs))
        return run_batch(jobs, options, workers=workers, on_done=lambda _o: bar.advance(task))
