"""Running many scripted calls at once, and writing their results.

``run_calls`` plays ``calls`` scripted callers against a target, at most
``concurrency`` at a time on one event loop; ``run_load`` adds worker processes
(``workers``), collects the proxy's receipts when the target is a voxproxy,
judges every call and writes ``results.json``, ``summary.json`` and
``report.html`` to the output directory.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voxproxy.core.ids import keyed_hash
from voxproxy.core.receipt import Receipt
from voxproxy.loadgen.arrivals import DROPPED
from voxproxy.loadgen.caller import CallerConfig, CallRecord, ScriptedCaller
from voxproxy.loadgen.progress import CallDone
from voxproxy.loadgen.results import (
    CallOutcome,
    evaluate,
    overload_warning,
    problem_lines,
    summarize,
)
from voxproxy.loadgen.scenario import Scenario
from voxproxy.loadgen.steps import prepare_heard_truth
from voxproxy.receipts.writer import read_receipts
from voxproxy.simcall.log import CallLog
from voxproxy.transcripts.score import Scoring


@dataclass(frozen=True)
class LoadPlan:
    target: str
    dialect: str
    scenarios: tuple[tuple[Scenario, Path | None], ...]
    calls: int = 1
    concurrency: int = 10
    sample_rate_hz: int = 16000
    headers: tuple[tuple[str, str], ...] = ()
    tag_path: bool = False  # append /<call id> to the target URL (in-process runs)
    # With tag_path, put the scenario's name before the call id (/<scenario>/<call id>): the
    # outcome testbench's mock agent picks its task script by it (voxproxy.mockagent.task).
    tag_scenario: bool = False
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:20])
    seed: int = 0
    ramp_ms: float = 20.0  # stagger call starts by this much
    # "webrtc": each call is a WebRTC caller (voxproxy.loadgen.webrtc) offering to ``target``
    # (an http(s) signaling URL) with ``signaling`` ("whip" or "pipecat").
    transport: str = "websocket"
    signaling: str = "whip"
    # twilio/telnyx: the start message's custom parameters, (NAME, VALUE) pairs
    custom_parameters: tuple[tuple[str, str], ...] = ()
    # The open model (voxproxy.loadgen.arrivals): call i starts arrivals[i] s after the
    # run's start, ``concurrency`` is the most in flight. None: ``concurrency`` at a time.
    arrivals: tuple[float, ...] | None = None


def call_id(plan: LoadPlan, index: int) -> str:
    """A Twilio-shaped call id (CA + 32 hex digits), unique per run and call."""
    return f"CA{plan.run_id[:20]}{index:012x}"


def _url(plan: LoadPlan, cid: str, scenario: str | None = None) -> str:
    if not plan.tag_path:
        return plan.target
    base, sep, query = plan.target.partition("?")
    name = f"{scenario}/" if plan.tag_scenario and scenario else ""
    return f"{base.rstrip('/')}/{name}{cid}" + (sep + query if sep else "")


Progress = Callable[[CallDone], None]
Records = list[tuple[int, str, CallRecord]]


def prepare_scenarios(scenarios: tuple[tuple[Scenario, Path | None], ...]) -> None:
    """What the scenarios' callers would otherwise compute on their clocks, now: the level
    of every clip said, and its edges at the wires' rates (``steps.prepare_heard_truth``;
    the first reading imports scipy, over a second). Call it before anything in this
    process keeps time (a proxy in the same loop counts the wait as its own lag)."""
    for scenario, base in scenarios:
        prepare_heard_truth(scenario.caller_steps(base))


async def run_calls(
    plan: LoadPlan,
    indices: list[int],
    progress: Progress | None = None,
    into: Records | None = None,
) -> Records:
    """Play the calls ``indices`` of ``plan``; returns (index, call id, record) each.

    ``into``: the list the finished calls are appended to as they finish (what is
    left of an interrupted run: calls cancelled in flight are not in it)."""
    sem = asyncio.Semaphore(max(1, plan.concurrency))
    out: Records = into if into is not None else []
    prepare_scenarios(plan.scenarios)

    async def one(k: int, index: int) -> None:
        await asyncio.sleep(k * plan.ramp_ms / 1000 if k < plan.concurrency else 0)
        async with sem:
            await call(index)

    loop = asyncio.get_running_loop()
    t_start = loop.time()
    in_flight = 0

    async def arriving(index: int) -> None:  # the open model: on the schedule, or dropped
        nonlocal in_flight
        assert plan.arrivals is not None
        await asyncio.sleep(max(0.0, t_start + plan.arrivals[index] - loop.time()))
        if in_flight >= plan.concurrency:
            out.append((index, call_id(plan, index), CallRecord(error=DROPPED)))
            if progress is not None:
                progress(CallDone(0.0, True, index, dropped=True))
            return
        in_flight += 1
        try:
            await call(index)
        finally:
            in_flight -= 1

    async def call(index: int) -> None:
        started = time.monotonic()
        scenario, base = plan.scenarios[index % len(plan.scenarios)]
        cid = call_id(plan, index)
        config = CallerConfig(
            url=_url(plan, cid, scenario.name),
            dialect=plan.dialect,  # type: ignore[arg-type]
            sample_rate_hz=plan.sample_rate_hz,
            headers=dict(plan.headers),
            call_id=cid,
            noise_bed=scenario.noise_bed(base),
            keep_messages=False,
            seed=plan.seed + index,
            custom_parameters=plan.custom_parameters,
        )
        if plan.transport == "webrtc":
            from voxproxy.loadgen.webrtc import WebRtcCaller, WebRtcCallerConfig

            wconfig = WebRtcCallerConfig(
                url=plan.target,
                signaling=plan.signaling,  # type: ignore[arg-type]
                headers=dict(plan.headers),
                noise_bed=config.noise_bed,
                seed=config.seed,
                keep_arrivals=False,
            )
            record = await WebRtcCaller(wconfig, scenario.caller_steps(base)).run()
        else:
            record = await ScriptedCaller(config, scenario.caller_steps(base)).run()
        out.append((index, cid, record))
        if progress is not None:
            progress(CallDone(time.monotonic() - started, record.error is not None, index))

    if plan.arrivals is not None:
        await asyncio.gather(*(arriving(i) for i in indices))
    else:
        await asyncio.gather(*(one(k, i) for k, i in enumerate(indices)))
    out.sort(key=lambda x: x[0])
    return out


def receipts_by_call(path: Path, secret: bytes) -> dict[str, Receipt]:
    """The proxy's receipts in ``path``, keyed by the raw call id's keyed hash."""
    if not path.exists():
        return {}
    return {r.call: r for r in read_receipts(path)}


def outcomes(
    plan: LoadPlan,
    records: list[tuple[int, str, CallRecord]],
    receipts: dict[str, Receipt] | None = None,
    secret: bytes | None = None,
    agent_logs: Callable[[str], CallLog | None] | None = None,
) -> list[CallOutcome]:
    out = []
    for index, cid, record in records:
        scenario, _base = plan.scenarios[index % len(plan.scenarios)]
        receipt = None
        if receipts is not None and secret is not None:
            receipt = receipts.get(keyed_hash(secret, cid, "c_"))
        out.append(
            CallOutcome(
                scenario=scenario,
                index=index,
                call_id=cid,
                dialect=plan.dialect,
                record=record,
                receipt=receipt,
                agent_log=agent_logs(cid) if agent_logs is not None else None,
            )
        )
    return out


def write_results(
    out_dir: Path,
    plan: LoadPlan,
    calls: list[CallOutcome],
    scoring: Scoring | None = None,
    interrupted: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Judge every call; write results.json, summary.json and report.html.

    Returns the per-call results and the summary. ``scoring``: how the agent's
    transcripts are scored (None: the defaults). ``interrupted``: the run was stopped
    and ``calls`` are the ones that finished (said in the run's metadata and report)."""
    from voxproxy.loadgen.report import write_report
    from voxproxy.transcripts.loadrun import default_scoring

    out_dir.mkdir(parents=True, exist_ok=True)
    scoring = scoring or default_scoring()
    results = [evaluate(c, scoring) for c in calls]
    summary = summarize(results)
    meta = {
        "target": plan.target,
        "dialect": plan.dialect,
        "calls": plan.calls,
        "concurrency": plan.concurrency,
        "scenarios": [s.name for s, _ in plan.scenarios],
        "run_id": plan.run_id,
        "transcript_scoring": scoring.labels,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if plan.arrivals is not None:  # the open model: when the calls were due
        meta["arrivals_over_s"] = round(plan.arrivals[-1], 3)
    if interrupted:
        meta["interrupted"] = True
        meta["finished_calls"] = len(calls)
    (out_dir / "results.json").write_text(
        json.dumps({"run": meta, "calls": results}, indent=1) + "\n"
    )
    (out_dir / "summary.json").write_text(json.dumps({"run": meta, **summary}, indent=1) + "\n")
    write_report(out_dir / "report.html", meta, results, summary, calls)
    return results, summary


NO_TERMINAL_COLUMNS = 150  # the summary table's width when it goes to a file or a pipe


def print_summary(summary: dict[str, Any], file: Any = None, width: int | None = None) -> None:
    """The run's table, fitted to the terminal (``width``: its columns, when known)."""
    from rich.console import Console
    from rich.table import Table

    out = file or sys.stdout
    if width is None:
        probe = Console(file=out)
        width = probe.width
        if not probe.is_terminal and "COLUMNS" not in os.environ:
            width = NO_TERMINAL_COLUMNS  # a log file or a pipe: nothing to fit, no wrapping
    console = Console(file=out, width=width)
    for line in problem_lines(summary):  # the cause in front, not only in results.json
        console.print(line, style="bold red", markup=False, highlight=False, soft_wrap=True)
    table = Table(title="load run: ground truth at the caller (and the proxy's error, if any)")
    for col in (
        "scenario",
        "calls",
        "failed",
        "turns",
        "ttfs p50",
        "ttfs p95",
        "ttfs max",
        "stop p50",
        "stop p95",
        "barge-ins stopped",
        "missed",
        "reprompts",
        "false barge-ins",
        "proxy err p95",
    ):
        if col == "scenario":  # names fold onto a second line, never cut to "norma…"
            table.add_column(col, justify="left", overflow="fold")
        else:
            table.add_column(col, justify="right", overflow="fold")

    def f(x: Any) -> str:
        return "—" if x is None else f"{x:.0f}"

    for name, s in summary.items():
        if name == "all":
            continue
        err = s["proxy_ttfs_abs_error_ms"]["p95"]
        table.add_row(
            name,
            str(s["calls"]),
            str(s["failed_calls"]),
            str(s["turns"]),
            f(s["ttfs_ms"]["p50"]),
            f(s["ttfs_ms"]["p95"]),
            f(s["ttfs_ms"]["max"]),
            f(s["stop_latency_ms"]["p50"]),
            f(s["stop_latency_ms"]["p95"]),
            f"{s['barge_ins']['stopped']}/{s['barge_ins']['total']}",
            str(s["missed_responses"]),
            str(s["reprompts"]),
            str(s["false_barge_ins"]),
            "—" if err is None else f"{err:.1f}",
        )
    console.print(table)
    warning = overload_warning(summary)
    if warning is not None:
        console.print(warning, style="bold red", markup=False, highlight=False)
