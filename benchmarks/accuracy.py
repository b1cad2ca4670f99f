"""How close are the proxy's figures to the truth, call after call, class by class?

Live calls over loopback: scripted load callers (voxproxy.loadgen) dial voxproxy, which
relays to in-process mock agents (voxproxy.mockagent); by default the proxies run in a
process of their own (benchmarks/proxyhost.py), as in a deployment. Truth comes from
the two ends: the caller knows when its speech truly started and ended (each clip's
edges under the truth rule, and when each sample was captured) and when each agent
sample played on its own playout timeline; the agent's log says which clip it sent
where. The caller's edges are taken at the proxy's vantage point (MEASUREMENT.md 1): a
frame this process sent late reaches the proxy late, like one delayed on the network, so
the edge moves by that frame's send lag (the table notes how far). Each turn's
time-to-first-sound and each barge-in's stop latency in the receipt is compared with
that truth. A figure the proxy withheld (null with a reason: caller_/agent_never_quiet,
caller_/agent_unanalysed, clock_lag) is counted as ``unknown``; one it should have
published and did not, as ``missed``; a published figure that belongs to no true turn,
as ``unmatched``.

Classes:

- ``clean``: the built-in scenarios without noise; raw and Twilio agents, paced and in
  bursts, 250 ms response jitter, the agents' clips in rotation (``--calls``).
- ``first_responses``: the first response of every call of the clean, speech_only and
  corpus classes, reported on its own.
- ``speech_only``: agents that send only speech (every clip cut to its first and last
  sample of speech, nothing sent between responses), the never-quiet harmonic complex
  among their responses.
- ``corpus``: agents answering with the corpus voices (espeak-ng, flite, festival; male
  and female, English and Spanish, -40..-6 dBFS), callers speaking the corpus's caller
  lines, plain turns and barge-ins.
- ``snr10``: the clean scenarios with pink and with white noise under the caller at
  10 dB SNR (no street recording is in the fixtures).
- ``babble``: the babble bed under the caller at 10 dB SNR. The goal is that no wrong
  figure is published: published, withheld and off-by-more-than-100-ms are counted.
- ``contended``: the clean class with the proxy process pinned to one CPU and a busy
  loop pinned to the same CPU, the callers and agents on another; reports the share of
  published figures inside their stated uncertainty, and how busy that CPU was. By
  default once with the loop always busy (``contended``) and once busy half of every
  10 ms (``contended_duty50``): ``--hog-duty``.

The last line printed is one JSON object: per class ``turns``, ``barge_ins``,
``ttfs_err_ms_p95``, ``ttfs_err_ms_max``, ``stop_err_ms_p95``, ``stop_err_ms_max``,
``unknown``, ``missed``, ``unmatched`` (and for babble ``published`` and
``off_gt_100ms``; for contended ``within_uncertainty`` and the uncertainty figures).

Run:  .venv/bin/python benchmarks/accuracy.py [--calls 160] [--class-calls 32]
      [--concurrency 32] [--classes clean,corpus,...] [--hog-duty 1.0,0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from proxyhost import CpuHog, SubprocessProxyHost, cpu_times  # noqa: E402

from voxproxy.analysis.vad import VadConfig  # noqa: E402
from voxproxy.audio.pcm import write_wav  # noqa: E402
from voxproxy.clips import Clip, fixtures_dir, load_corpus  # noqa: E402
from voxproxy.errors import FixtureError  # noqa: E402
from voxproxy.harness.bench import BenchAgent, BenchCall, run_bench  # noqa: E402
from voxproxy.loadgen.caller import CallRecord  # noqa: E402
from voxproxy.loadgen.results import MATCH_TOLERANCE_MS, evaluate  # noqa: E402
from voxproxy.loadgen.scenario import NoiseSpec, Scenario, builtin_names, find_scenario  # noqa: E402
from voxproxy.loadgen.truth import TurnTruth, agent_speech  # noqa: E402
from voxproxy.mockagent import CallLog, MockAgentConfig, default_responses  # noqa: E402
from voxproxy.mockagent.config import response_clip  # noqa: E402
from voxproxy.receipts.model import Receipt, TurnRecord  # noqa: E402
from voxproxy.timebase import NS_PER_MS, NS_PER_S  # noqa: E402

SECRET = b"accuracy-benchmark"
CALLER_FRAME_NS = 20_000_000  # the load callers' frame (CallerConfig.frame_ms)
NEVER_QUIET = ("caller_never_quiet", "agent_never_quiet")
# Figures the proxy says it cannot know: a direction never quiet, audio that ran too far
# ahead of real time to be analysed, its own clock readings too late, or its measurement
# shed under load.
WITHHELD = (
    *NEVER_QUIET,
    "caller_unanalysed",
    "agent_unanalysed",
    "clock_lag",
    "caller_noise",
    "agent_noise",
    "measurement_shed",
)
WRONG_MS = 100.0  # babble: a published figure off by more than this is wrong
WORST_MS = 10.0  # the three worst figures of a class are named when off by more than this
SNR_DB = 10.0
NOISY_BUILTINS = {"background_noise"}
# Scenarios put under noise (snr10, babble): the clean built-ins but the long number.
NOISE_BASES = ("normal_question", "interruption", "topic_change", "silence_after_answer")
CLASSES = ("clean", "speech_only", "corpus", "snr10", "babble", "contended")
FIRST_FROM = ("clean", "speech_only", "corpus")
HARMONIC = "synth_harmonic_trimmed"

Scenarios = tuple[tuple[Scenario, Path | None], ...]


# -- the agents -----------------------------------------------------------------------------


def agent_configs(**changes: Any) -> list[MockAgentConfig]:
    """The four agents: raw and Twilio, paced and in bursts, with response jitter."""
    out = []
    seed = 0
    for dialect in ("raw", "twilio"):
        for mode in ("paced", "burst"):
            seed += 1
            base = MockAgentConfig(
                dialect=dialect,  # type: ignore[arg-type]
                send_mode=mode,  # type: ignore[arg-type]
                delay_ms=500 + 250 * seed,
                jitter_ms=250.0,
                reaction_ms=80 + 60 * seed,
                seed=seed,
                vary_responses=True,  # every clip gets its turn across the calls
            )
            out.append(replace(base, **changes))
    return out


def bench_agents(configs: list[MockAgentConfig], calls: int) -> list[BenchAgent]:
    n = len(configs)
    return [
        BenchAgent(f"{c.dialect}/{c.send_mode}", c, calls // n + (1 if i < calls % n else 0))
        for i, c in enumerate(configs)
    ]


def corpus_agent_names() -> tuple[str, ...]:
    return tuple(c.name for c in load_corpus().values() if c.role == "agent")


# -- the scenarios --------------------------------------------------------------------------


def clean_scenarios() -> Scenarios:
    return tuple(find_scenario(n) for n in builtin_names() if n not in NOISY_BUILTINS)


def noisy_scenarios(beds: Sequence[tuple[str, str]]) -> Scenarios:
    """The noise bases with each bed (tag, clip name or WAV path) at 10 dB SNR."""
    out = []
    for name in NOISE_BASES:
        for tag, bed in beds:
            scenario, base = find_scenario(name)
            noisy = scenario.model_copy(
                update={"name": f"{name}+{tag}", "noise": NoiseSpec(clip=bed, snr_db=SNR_DB)}
            )
            out.append((noisy, base))
    return tuple(out)


def corpus_scenarios() -> Scenarios:
    """Pairs of the corpus's caller lines: a turn and another, or a turn and a barge-in."""
    directory = fixtures_dir() / "corpus"
    lines = [str(directory / f"{c.name}.wav") for c in load_corpus().values() if c.role == "caller"]
    out = []
    for i, first in enumerate(lines):
        second = lines[(i + 5) % len(lines)]
        steps: list[dict[str, Any]] = [{"say": first}]
        if i % 2:
            steps += [{"barge_in": {"after_ms": 700, "say": second}}, {"wait": "agent_end"}]
        else:
            steps += [{"wait": "agent_end"}, {"say": second}, {"wait": "agent_end"}]
        scenario = Scenario.model_validate({"name": f"corpus_{i:02d}", "steps": steps})
        out.append((scenario, None))
    return tuple(out)


def white_noise_wav(directory: Path) -> str:
    """12 s of white noise (seeded), as the bed's WAV file."""
    rng = np.random.default_rng(13)
    pcm = np.clip(rng.standard_normal(12 * 16000) * 3000.0, -32768, 32767).astype(np.int16)
    path = directory / "noise_white.wav"
    write_wav(path, pcm, 16000)
    return str(path)


# -- truth ----------------------------------------------------------------------------------
# voxproxy.loadgen.truth.turn_truths, with the clip of each response resolved as the agent
# resolved it (corpus names; clips cut to their speech).


def turn_truths(
    record: CallRecord, log: CallLog, clip_of: Callable[[str], Clip]
) -> list[tuple[TurnTruth, str, str]]:
    """Each caller turn's truth, with the agent clip that answered it and the one it
    talked over (a barge-in), or "" for none."""
    speech = agent_speech(record, log, clip_of)
    out: list[tuple[TurnTruth, str, str]] = []
    for s in record.speech:
        nxt = next((a for a in speech if a.onset_ns > s.offset_ns), None)
        ttfs = None if nxt is None else nxt.onset_ns - s.offset_ns
        stop = None
        over = None
        if s.barge_in:
            over = next((a for a in speech if a.onset_ns <= s.onset_ns < a.end_ns), None)
            if over is not None:
                stop = over.end_ns - s.onset_ns
        truth = TurnTruth(s.clip, s.onset_ns, s.offset_ns, ttfs, s.barge_in, stop)
        out.append((truth, nxt.clip if nxt else "", over.clip if over else ""))
    return out


def at_vantage(truth: TurnTruth, record: CallRecord) -> tuple[TurnTruth, float, float]:
    """The truth at the proxy's vantage point (MEASUREMENT.md 1): a caller frame sent late
    (this process's own event loop) reaches the proxy late, like one delayed on the network
    leg, so the caller's edges move by the send lag of the frames that carried them.
    Returns the moved truth and the moves (ms) of its onset and offset."""
    lags = record.pacing_lag_ns

    def lag(ns: int) -> int:
        k = (ns - record.t0_ns) // CALLER_FRAME_NS
        return lags[k] if 0 <= k < len(lags) else 0

    on, off = lag(truth.caller_onset_ns), lag(truth.caller_offset_ns - 1)
    moved = replace(
        truth,
        caller_onset_ns=truth.caller_onset_ns + on,
        caller_offset_ns=truth.caller_offset_ns + off,
        ttfs_ns=None if truth.ttfs_ns is None else truth.ttfs_ns - off,
        stop_latency_ns=None if truth.stop_latency_ns is None else truth.stop_latency_ns - on,
    )
    return moved, on / NS_PER_MS, off / NS_PER_MS


# -- comparing one call ---------------------------------------------------------------------

Status = Literal["published", "unknown", "missed"]


@dataclass(frozen=True, slots=True)
class Figure:
    kind: Literal["ttfs", "stop"]
    status: Status
    err_ms: float | None = None  # proxy - truth, published figures only
    uncertainty_ms: float | None = None
    reason: str | None = None
    first: bool = False  # the first response of its call
    moved_ms: float = 0.0  # the caller edge's move to the proxy's vantage (at_vantage)
    what: str = ""  # scenario, agent, caller clip -> agent clip: for the worst figures


@dataclass
class CallResult:
    cls: str
    label: str  # the agent
    tag: str  # the noise bed, or ""
    figures: list[Figure] = field(default_factory=list)
    unmatched: list[float] = field(default_factory=list)  # published, belonging to no true turn
    error: str | None = None
    pacing_lag_ms_p99: float | None = None
    noises: int = 0
    noises_judged: int = 0


def _started_wall_ns(receipt: Receipt) -> int:
    return round(dt.datetime.fromisoformat(receipt.started_at).timestamp() * NS_PER_S)


def _near(value: float | None, target: float) -> float | None:
    if value is None:
        return None
    d = abs(value - target)
    return d if d <= MATCH_TOLERANCE_MS else None


def _distance(truth: TurnTruth, t: TurnRecord, rel: Callable[[int], float]) -> float | None:
    """How near a receipt turn lies to a true caller turn (ms), or None if not near: by
    the caller's onset (a barge-in's onset) or offset, whichever the receipt has near
    (noise moves onsets); by the onset of the agent's answer only when the receipt has no
    caller edges (a direction that never went quiet)."""
    onset, offset = rel(truth.caller_onset_ns), rel(truth.caller_offset_ns)
    ds = [_near(t.caller_onset_ms, onset), _near(t.caller_offset_ms, offset)]
    if truth.barge_in and t.barge_in is not None:
        ds.append(_near(t.barge_in.onset_ms, onset))
    deaf = t.caller_onset_ms is None and t.caller_offset_ms is None
    if deaf and truth.ttfs_ns is not None and t.kind == "response":
        ds.append(_near(t.agent_onset_ms, rel(truth.caller_offset_ns + truth.ttfs_ns)))
    found = [d for d in ds if d is not None]
    return min(found) if found else None


def _match_all(
    truths: list[TurnTruth], receipt: Receipt, rel: Callable[[int], float]
) -> list[TurnRecord | None]:
    """Each true turn's receipt turn (or None), the nearest pairs first, each turn once."""
    pairs = []
    for i, truth in enumerate(truths):
        for t in receipt.turns:
            d = _distance(truth, t, rel)
            if d is not None:
                pairs.append((d, i, t.index, t))
    out: list[TurnRecord | None] = [None] * len(truths)
    taken: set[int] = set()
    for _d, i, index, t in sorted(pairs, key=lambda p: p[:3]):
        if out[i] is None and index not in taken:
            out[i] = t
            taken.add(index)
    return out


def compare_call(
    cls: str, call: BenchCall, config: MockAgentConfig, wall_minus_mono_ns: int, tag: str = ""
) -> CallResult:
    o = call.outcome
    out = CallResult(cls, call.label, tag)
    rec, receipt, log = o.record, o.receipt, o.agent_log
    if rec.pacing_lag_ns:
        out.pacing_lag_ms_p99 = float(np.percentile(rec.pacing_lag_ns, 99)) / NS_PER_MS
    if rec.error or receipt is None or log is None:
        out.error = rec.error or ("no receipt" if receipt is None else "no agent log")
        return out
    truths = turn_truths(rec, log, lambda name: response_clip(name, config.trim_silence))
    shift_ms = (rec.t0_ns + wall_minus_mono_ns - _started_wall_ns(receipt)) / NS_PER_MS

    def rel(ns: int) -> float:
        return (ns - rec.t0_ns) / NS_PER_MS + shift_ms

    # A direction that never went quiet has no edges: turns in it are not told apart.
    reasons = [t.reason for t in receipt.turns]
    reasons += [t.barge_in.reason for t in receipt.turns if t.barge_in is not None]
    deaf = next((r for r in reasons if r in NEVER_QUIET), None)
    moved = [at_vantage(captured, rec) for captured, _a, _o in truths]
    matched = _match_all([m[0] for m in moved], receipt, rel)
    used = {t.index for t in matched if t is not None}
    first = True
    for (truth, moved_on, moved_off), (_c, answer, talked_over), turn in zip(
        moved, truths, matched, strict=True
    ):
        where = f"{o.scenario.name}, {call.label}, call {o.index}: {truth.caller_clip}"
        if truth.ttfs_ns is not None:
            f = _ttfs_figure(truth, turn, first, deaf)
            out.figures.append(replace(f, moved_ms=moved_off, what=f"{where} -> {answer}"))
            first = False
        elif turn is not None and turn.ttfs_ms is not None:
            out.unmatched.append(turn.ttfs_ms)  # a response the agent never gave
        if truth.barge_in and truth.stop_latency_ns is not None:
            f = _stop_figure(truth, turn, deaf)
            what = f"{where} over {talked_over}"
            out.figures.append(replace(f, moved_ms=moved_on, what=what))
    for t in receipt.turns:
        if t.index in used:
            continue
        if t.ttfs_ms is not None:
            out.unmatched.append(t.ttfs_ms)
        if t.barge_in is not None and t.barge_in.stop_latency_ms is not None:
            out.unmatched.append(t.barge_in.stop_latency_ms)
    try:
        judged = evaluate(o)["noises"]
    except FixtureError:  # corpus agents: the loadgen's own truth cannot name their clips
        judged = []
    out.noises = len(judged)
    out.noises_judged = sum(1 for n in judged if n["proxy_judged_correctly"])
    return out


def _ttfs_figure(
    truth: TurnTruth, turn: TurnRecord | None, first: bool, deaf: str | None
) -> Figure:
    """``deaf``: the receipt's reason when a direction never went quiet (None: none)."""
    assert truth.ttfs_ns is not None
    if turn is not None and turn.ttfs_ms is not None:
        err = turn.ttfs_ms - truth.ttfs_ns / NS_PER_MS
        return Figure("ttfs", "published", err, turn.ttfs_uncertainty_ms, None, first)
    if turn is None and deaf is not None:
        return Figure("ttfs", "unknown", None, None, f"{deaf} (no turn of its own)", first)
    reason = "no turn" if turn is None else (turn.reason or turn.kind)
    status: Status = "unknown" if reason in WITHHELD else "missed"
    unc = None if turn is None else turn.ttfs_uncertainty_ms
    return Figure("ttfs", status, None, unc, reason, first)


def _stop_figure(truth: TurnTruth, turn: TurnRecord | None, deaf: str | None) -> Figure:
    assert truth.stop_latency_ns is not None
    b = turn.barge_in if turn is not None else None
    if b is not None and b.stop_latency_ms is not None:
        err = b.stop_latency_ms - truth.stop_latency_ns / NS_PER_MS
        return Figure("stop", "published", err, b.stop_uncertainty_ms)
    if b is None and deaf is not None:
        return Figure("stop", "unknown", reason=f"{deaf} (no barge-in of its own)")
    if b is None:
        return Figure("stop", "missed", reason="no barge-in")
    withheld = b.outcome == "unknown" or b.reason in WITHHELD
    return Figure(
        "stop", "unknown" if withheld else "missed", None, b.stop_uncertainty_ms, b.reason
    )


# -- running the classes --------------------------------------------------------------------


@dataclass
class ClassRun:
    name: str
    results: list[CallResult]
    elapsed_s: float
    notes: list[str] = field(default_factory=list)
    hog_duty: float = 0.0
    cpu_busy_pct: float | None = None  # the proxy's CPU, when pinned


async def run_class(
    name: str,
    agents: list[BenchAgent],
    scenarios: Scenarios,
    args: argparse.Namespace,
    *,
    proxy_cpu: int | None = None,
    hog_duty: float | None = None,
    bench_cpu: int | None = None,
    concurrency: int | None = None,
) -> ClassRun:
    started = time.monotonic()
    notes: list[str] = []
    host = (
        None
        if args.in_process
        else SubprocessProxyHost(cpu=proxy_cpu, max_uncertainty_ms=args.max_uncertainty_ms)
    )
    hog = CpuHog(proxy_cpu, hog_duty) if proxy_cpu is not None and hog_duty else None
    affinity = os.sched_getaffinity(0) if bench_cpu is not None else None
    before = cpu_times(proxy_cpu) if proxy_cpu is not None else None
    wall_minus_mono = time.time_ns() - time.monotonic_ns()
    try:
        if bench_cpu is not None:
            os.sched_setaffinity(0, {bench_cpu})
        if hog is not None:
            await hog.start()
        calls = await run_bench(
            agents,
            scenarios,
            secret=SECRET,
            concurrency=concurrency or args.concurrency,
            proxy_host=host,
        )
    finally:
        after = cpu_times(proxy_cpu) if proxy_cpu is not None else None
        if hog is not None:
            await hog.stop()
        if affinity is not None:
            os.sched_setaffinity(0, affinity)
    elapsed = time.monotonic() - started
    if host is not None and host.unreadable:
        notes.append(f"receipts this process could not read: {host.unreadable}")
    if host is not None and host.stats:
        s = host.stats
        notes.append(
            f"proxy process: {s['calls']} calls, {s['cpu_s']:.1f} s CPU "
            f"({100 * s['cpu_s'] / elapsed:.0f}% of a core), event-loop lag max "
            f"{s['loop_lag_ms_max']:.1f} ms"
        )
    busy = None
    if before is not None and after is not None and after[1] > before[1]:
        busy = 100.0 * (after[0] - before[0]) / (after[1] - before[1])
        hog_text = f"a busy loop ({100 * (hog_duty or 0):.0f}% duty)" if hog else "no hog"
        notes.append(f"proxy pinned to CPU {proxy_cpu} with {hog_text}: that CPU {busy:.0f}% busy")
    configs = {a.label: a.config for a in agents}
    by_name = {s.name: s for s, _ in scenarios}
    results = []
    for c in calls:
        scenario = by_name.get(c.outcome.scenario.name)
        tag = ""
        if scenario is not None and scenario.noise is not None:
            tag = Path(scenario.noise.clip).stem.removeprefix("noise_")
        results.append(compare_call(name, c, configs[c.label], wall_minus_mono, tag))
    return ClassRun(name, results, elapsed, notes, hog_duty or 0.0, busy)


async def run_all(args: argparse.Namespace, workdir: Path) -> list[ClassRun]:
    wanted = args.classes
    n = args.class_calls
    runs: list[ClassRun] = []
    if "clean" in wanted:
        agents = bench_agents(agent_configs(), args.calls)
        runs.append(await run_class("clean", agents, clean_scenarios(), args))
    if "speech_only" in wanted:
        responses = (*default_responses(), HARMONIC)
        configs = agent_configs(trim_silence=True, responses=responses)
        runs.append(
            await run_class("speech_only", bench_agents(configs, n), clean_scenarios(), args)
        )
    if "corpus" in wanted:
        configs = agent_configs(responses=corpus_agent_names())
        runs.append(await run_class("corpus", bench_agents(configs, n), corpus_scenarios(), args))
    if "snr10" in wanted:
        beds = [("pink", "noise_pink"), ("white", white_noise_wav(workdir))]
        agents = bench_agents(agent_configs(), n)
        runs.append(await run_class("snr10", agents, noisy_scenarios(beds), args))
    if "babble" in wanted:
        # Agents whose endpointing ignores the bed (else they would never answer): it
        # takes a turn only for audio within 12 dB of loud speech, not the bed 10 dB down.
        agents = bench_agents(agent_configs(caller_vad=VadConfig(floor_clamp_dbfs=-34.0)), n)
        scenarios = noisy_scenarios([("babble", "noise_babble")])
        runs.append(await run_class("babble", agents, scenarios, args))
    if "contended" in wanted:
        cpus = sorted(os.sched_getaffinity(0))
        for i, duty in enumerate(args.hog_duty):
            name = contended_name(i, duty)
            if args.in_process or len(cpus) < 2:
                why = "--in-process" if args.in_process else "only one CPU available"
                runs.append(ClassRun(name, [], 0.0, [f"not run: {why}"]))
                continue
            agents = bench_agents(agent_configs(), n)
            runs.append(
                await run_class(
                    name,
                    agents,
                    clean_scenarios(),
                    args,
                    proxy_cpu=cpus[0],
                    hog_duty=duty,
                    bench_cpu=cpus[1],
                    concurrency=args.contended_concurrency,
                )
            )
    return runs


def contended_name(i: int, duty: float) -> str:
    """``contended`` for the first hog duty, ``contended_duty50`` (and so on) after it."""
    return "contended" if i == 0 else f"contended_duty{round(100 * duty)}"


# -- summing up -----------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values else None


def _max(values: list[float]) -> float | None:
    return round(max(values), 1) if values else None


def summarize(results: list[CallResult], figures: list[Figure] | None = None) -> dict[str, Any]:
    figs = figures if figures is not None else [f for r in results for f in r.figures]
    pub = [f for f in figs if f.status == "published"]
    ttfs = [abs(f.err_ms) for f in pub if f.kind == "ttfs" and f.err_ms is not None]
    stop = [abs(f.err_ms) for f in pub if f.kind == "stop" and f.err_ms is not None]
    unc = [f.uncertainty_ms for f in pub if f.uncertainty_ms is not None]
    inside = [
        f
        for f in pub
        if f.err_ms is not None
        and f.uncertainty_ms is not None
        and abs(f.err_ms) <= f.uncertainty_ms
    ]
    unmatched = sum(len(r.unmatched) for r in results) if figures is None else 0
    lags = [r.pacing_lag_ms_p99 for r in results if r.pacing_lag_ms_p99 is not None]
    return {
        "calls": len(results),
        "failed_calls": sum(1 for r in results if r.error),
        "turns": sum(1 for f in figs if f.kind == "ttfs"),
        "barge_ins": sum(1 for f in figs if f.kind == "stop"),
        "ttfs_err_ms_p50": _pct(ttfs, 50),
        "ttfs_err_ms_p95": _pct(ttfs, 95),
        "ttfs_err_ms_max": _max(ttfs),
        "stop_err_ms_p50": _pct(stop, 50),
        "stop_err_ms_p95": _pct(stop, 95),
        "stop_err_ms_max": _max(stop),
        "published": len(pub) + unmatched,
        "unknown": sum(1 for f in figs if f.status == "unknown"),
        "missed": sum(1 for f in figs if f.status == "missed"),
        "unmatched": unmatched,
        "off_gt_100ms": sum(1 for f in pub if f.err_ms is not None and abs(f.err_ms) > WRONG_MS)
        + unmatched,
        "uncertainty_ms_p50": _pct(unc, 50),
        "uncertainty_ms_p95": _pct(unc, 95),
        "uncertainty_ms_max": _max(unc),
        "within_uncertainty": round(len(inside) / len(pub), 4) if pub else None,
        "reasons": dict(Counter(f.reason or "" for f in figs if f.status != "published")),
        "caller_pacing_lag_ms_p99": _max(lags),
        "moved_ms_p95": _pct([abs(f.moved_ms) for f in pub], 95),
        "moved_ms_max": _max([abs(f.moved_ms) for f in pub]),
        "worst": sorted(
            (f for f in pub if f.err_ms is not None), key=lambda f: -abs(f.err_ms or 0.0)
        )[:3],
        "noises": sum(r.noises for r in results),
        "noises_judged": sum(r.noises_judged for r in results),
    }


def headline(cls: str, s: dict[str, Any]) -> dict[str, Any]:
    """The class's entry of the final JSON line."""
    keys = ["calls", "turns", "barge_ins", "ttfs_err_ms_p95", "ttfs_err_ms_max"]
    keys += ["stop_err_ms_p95", "stop_err_ms_max", "unknown", "missed", "unmatched"]
    if cls == "babble":
        keys += ["published", "off_gt_100ms"]
    if cls.startswith("contended"):
        keys += ["within_uncertainty", "uncertainty_ms_p50", "uncertainty_ms_p95"]
        keys += ["uncertainty_ms_max"]
    return {k: s[k] for k in keys}


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def print_class(
    console: Any, title: str, rows: list[tuple[str, dict[str, Any]]], notes: list[str]
) -> None:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    table.add_column("", justify="left", no_wrap=True)
    for col in ("calls", "turns", "ttfs |err| p50", "p95", "max", "barge-ins"):
        table.add_column(col, justify="right")
    for col in ("stop |err| p50", "p95", "max", "unknown", "missed", "unmatched"):
        table.add_column(col, justify="right")
    table.add_column("unc. p95", justify="right")
    table.add_column("within unc.", justify="right")
    for label, s in rows:
        within = s["within_uncertainty"]
        table.add_row(
            label,
            str(s["calls"]),
            str(s["turns"]),
            _f(s["ttfs_err_ms_p50"]),
            _f(s["ttfs_err_ms_p95"]),
            _f(s["ttfs_err_ms_max"]),
            str(s["barge_ins"]),
            _f(s["stop_err_ms_p50"]),
            _f(s["stop_err_ms_p95"]),
            _f(s["stop_err_ms_max"]),
            str(s["unknown"]),
            str(s["missed"]),
            str(s["unmatched"]),
            _f(s["uncertainty_ms_p95"]),
            "—" if within is None else f"{100 * within:.1f}%",
        )
    console.print(table)
    for note in notes:
        console.print(f"  {note}")
    console.print()


def report(runs: list[ClassRun], elapsed_s: float) -> dict[str, Any]:
    from rich.console import Console

    console = Console(width=150)
    console.print(
        f"voxproxy accuracy over live calls ({elapsed_s:.0f} s): |proxy - truth| in ms per "
        "figure; unknown = withheld with a reason, missed = not published without one, "
        "unmatched = published for no true turn; unc. = the stated uncertainty\n"
    )
    out: dict[str, Any] = {}
    titles = {
        "clean": "clean: built-in scenarios, 4 agents (raw/twilio x paced/burst, 250 ms jitter)",
        "speech_only": "speech_only: agents sending only speech (clips cut to their speech, "
        "nothing between responses; the harmonic complex among them)",
        "corpus": "corpus: corpus voices answering corpus callers (3 synthesizers, en/es, "
        "-40..-6 dBFS)",
        "snr10": "snr10: pink and white noise under the caller at 10 dB SNR",
        "babble": "babble: babble bed under the caller at 10 dB SNR (goal: no wrong figure)",
    }
    firsts: list[tuple[str, dict[str, Any]]] = []
    first_figs: list[Figure] = []
    first_calls: list[CallResult] = []
    for run in runs:
        rs = run.results
        total = summarize(rs)
        rows: list[tuple[str, dict[str, Any]]] = []
        for label in sorted({r.label for r in rs}):
            rows.append((label, summarize([r for r in rs if r.label == label])))
        for tag in sorted({r.tag for r in rs if r.tag}):
            rows.append((f"noise: {tag}", summarize([r for r in rs if r.tag == tag])))
        rows.append(("all", total))
        notes = [f"{total['calls']} calls in {run.elapsed_s:.0f} s", *run.notes]
        if total["failed_calls"]:
            errors = Counter(r.error for r in rs if r.error)
            notes.append(f"calls without a result: {dict(errors)}")
        if total["reasons"]:
            notes.append(f"not published, by reason: {total['reasons']}")
        if total["noises"]:
            notes.append(
                f"noise-only interruptions judged correctly: {total['noises_judged']} "
                f"of {total['noises']}"
            )
        if total["caller_pacing_lag_ms_p99"] is not None:
            notes.append(
                "callers' own send lag (truth is taken at the deadline), worst call p99: "
                f"{total['caller_pacing_lag_ms_p99']:.1f} ms"
            )
        if total["moved_ms_max"]:
            notes.append(
                "truth moved to the proxy's vantage by the callers' late sends: "
                f"p95 {total['moved_ms_p95']:.1f} ms, max {total['moved_ms_max']:.1f} ms"
            )
        worst = [f for f in total["worst"] if abs(f.err_ms) > WORST_MS]
        if worst:
            notes.append("worst figures (proxy - truth, the stated uncertainty):")
        for f in worst:
            unc = "—" if f.uncertainty_ms is None else f"{f.uncertainty_ms:.1f}"
            notes.append(f"  {f.kind} {f.err_ms:+.1f} ms ({unc}): {f.what}")
        if run.name == "babble":
            notes.append(
                f"published {total['published']}, withheld {total['unknown']}, off by more "
                f"than {WRONG_MS:.0f} ms (or for no true turn): {total['off_gt_100ms']}"
            )
        title = titles.get(run.name, run.name)
        if run.name.startswith("contended"):
            title = (
                f"{run.name}: the clean class, proxy pinned to a CPU shared with a busy loop "
                f"({100 * run.hog_duty:.0f}% duty)"
            )
        print_class(console, title, rows, notes)
        out[run.name] = headline(run.name, total)
        if run.cpu_busy_pct is not None:
            out[run.name]["proxy_cpu_busy_pct"] = round(run.cpu_busy_pct, 1)
        if run.name in FIRST_FROM:
            figs = [f for r in rs for f in r.figures if f.first]
            firsts.append((run.name, summarize(rs, figs)))
            first_figs += figs
            first_calls += rs
    if firsts:
        total = summarize(first_calls, first_figs)
        print_class(
            console,
            "first_responses: the first response of each call (from the classes below)",
            [*firsts, ("all", total)],
            [],
        )
        ordered = {"clean": out.pop("clean")} if "clean" in out else {}
        ordered["first_responses"] = headline("first_responses", total)
        out = {**ordered, **out}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=160, help="calls of the clean class")
    parser.add_argument("--class-calls", type=int, default=32, help="calls of each other class")
    parser.add_argument("--concurrency", type=int, default=32, help="calls at once")
    parser.add_argument(
        "--contended-concurrency",
        type=int,
        default=16,
        help="calls at once in the contended runs (the callers and agents then have one "
        "CPU to themselves: fewer keep their own clock readings on time)",
    )
    parser.add_argument(
        "--classes",
        type=lambda s: [c.strip() for c in s.split(",") if c.strip()],
        default=list(CLASSES),
        help=f"comma-separated subset of {','.join(CLASSES)}",
    )
    parser.add_argument(
        "--hog-duty",
        type=lambda s: [min(1.0, max(0.05, float(x))) for x in s.split(",") if x.strip()],
        default=[1.0, 0.5],
        help="contended: the hog's busy share (0-1), one contended run for each "
        "(comma-separated; the first is reported as `contended`)",
    )
    parser.add_argument("--max-uncertainty-ms", type=float, default=50.0)
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run the proxies in this process (as before); no contended class",
    )
    args = parser.parse_args()
    unknown = [c for c in args.classes if c not in CLASSES]
    if unknown:
        parser.error(f"unknown classes {unknown}; have {', '.join(CLASSES)}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="voxproxy-accuracy-") as tmp:
        try:
            import uvloop

            runs = uvloop.run(run_all(args, Path(tmp)))
        except ImportError:
            runs = asyncio.run(run_all(args, Path(tmp)))
    out = report(runs, time.monotonic() - started)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
