"""How close are the proxy's figures to the truth, call after call, class by class?

Live calls over loopback: scripted load callers (voxproxy.loadgen) dial voxproxy, which
relays to in-process mock agents (voxproxy.mockagent); by default the proxies run in a
process of their own (benchmarks/proxyhost.py), as in a deployment. Truth comes from
the two ends: the caller knows when its speech truly started and ended (each clip's
edges under the truth rule, and when each sample was captured) and when each agent
sample played on its own playout timeline; the agent's log says which clip it sent
where. The caller's edges are taken at the proxy's vantage point (MEASUREMENT.md 1): a
frame this process sent late reaches the proxy late, like one delayed on the network, so
the edge moves by that frame's send lag (the table notes how far). So are the agent's
edges: the caller hears the agent after the proxy forwarded it, and on a busy machine that
forwarding runs late, so the agent's audio is placed on the playout model from when each
message reached the proxy's host, between the agent's clock readings around its write
(``accuracy_compare.agent_vantage``; the table notes how far that moved them). Each turn's
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
- ``snr10``: the clean scenarios with steady noise under the caller at 10 dB SNR: pink
  (the fixture), white, brown and a street-like bed whose level drifts by up to ~8 dB
  over seconds (``tests/support/noise.py``; no street recording is in the fixtures). The
  truth is what a listener hears over the bed (MEASUREMENT.md 2). Goal: 90% of figures
  published, p95 within 20 ms.
- ``snr0``: the same beds at 0 dB SNR. Goal: each figure withheld with a reason or
  within 30 ms (``published`` and ``within_30ms`` in the JSON).
- ``babble``: the babble bed under the caller at 10 dB SNR. The goal is that no wrong
  figure is published: published, withheld and off-by-more-than-100-ms are counted.
- ``contended``: the clean class with the proxy process pinned to one CPU and a busy
  loop pinned to the same CPU, the callers and agents on another; reports the share of
  published figures inside their stated uncertainty, and how busy that CPU was. By
  default once with the loop always busy (``contended``) and once busy half of every
  10 ms (``contended_duty50``): ``--hog-duty``.
- ``busy``: the clean class while the whole machine is busy (``--busy-calls``, 96):
  ``--busy-hogs`` (2) busy loops, pinned to no CPU, beside the proxy process, the callers
  and the agents (started with the class, killed after it). Goals (issue 36): 95% of
  figures published, ttfs and stop p95 within 10 ms, 99% inside the stated uncertainty,
  which is 10 ms or less at the 95th percentile.

The last line printed is one JSON object: per class ``turns``, ``barge_ins``,
``ttfs_err_ms_p95``, ``ttfs_err_ms_max``, ``stop_err_ms_p95``, ``stop_err_ms_max``,
``unknown``, ``missed``, ``unmatched`` (and for babble ``published`` and
``off_gt_100ms``; for contended and busy ``within_uncertainty`` and the uncertainty
figures; for busy ``published_share``).

Run:  .venv/bin/python benchmarks/accuracy.py [--calls 160] [--class-calls 32]
      [--concurrency 32] [--classes clean,corpus,...] [--hog-duty 1.0,0.5]
      [--busy-hogs 2] [--busy-calls 96]
"""

from __future__ import annotations

import argparse
import copyreg
import dataclasses
import json
import os
import pickle
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))  # support.noise: the tests' noise beds

import record  # noqa: E402
from accuracy_compare import CallResult, compare_call  # noqa: E402
from accuracy_report import ClassRun, report  # noqa: E402
from proxyhost import CpuHog, SubprocessProxyHost, cpu_times  # noqa: E402
from support.noise import noise_bed  # noqa: E402

from voxproxy.clips import fixtures_dir, load_corpus, write_wav  # noqa: E402
from voxproxy.core.analysis.vad import VadConfig  # noqa: E402
from voxproxy.core.analysis.vadconfig import Spurt  # noqa: E402
from voxproxy.harness.bench import BenchAgent, run_bench  # noqa: E402
from voxproxy.loadgen.scenario import NoiseSpec, Scenario, builtin_names, find_scenario  # noqa: E402
from voxproxy.mockagent import MockAgentConfig, default_responses  # noqa: E402
from voxproxy.proxy.server import run_loop  # noqa: E402

SECRET = b"accuracy-benchmark"
SNR_DB = 10.0
NOISY_BUILTINS = {"background_noise"}
# Scenarios put under noise (snr10, babble): the clean built-ins but the long number.
NOISE_BASES = ("normal_question", "interruption", "topic_change", "silence_after_answer")
CLASSES = ("clean", "speech_only", "corpus", "snr10", "snr0", "babble", "contended", "busy")
STEADY_BEDS = ("pink", "white", "brown", "street")
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


def noisy_scenarios(beds: Sequence[tuple[str, str]], snr_db: float = SNR_DB) -> Scenarios:
    """The noise bases with each bed (tag, clip name or WAV path) at ``snr_db``."""
    out = []
    for name in NOISE_BASES:
        for tag, bed in beds:
            scenario, base = find_scenario(name)
            noisy = scenario.model_copy(
                update={"name": f"{name}+{tag}", "noise": NoiseSpec(clip=bed, snr_db=snr_db)}
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


def steady_beds(directory: Path) -> list[tuple[str, str]]:
    """The steady beds (tag, clip name or WAV path): the pink fixture, the white noise
    above, and 12 s of brown and of street-like noise (``tests/support/noise.py``, seeded)."""
    beds = [("pink", "noise_pink"), ("white", white_noise_wav(directory))]
    for kind in ("brown", "street"):
        bed = noise_bed(kind, 12 * 16000, 16000, seed=13) * 3000.0
        path = directory / f"noise_{kind}.wav"
        write_wav(path, np.clip(np.round(bed), -32768, 32767).astype(np.int16), 16000)
        beds.append((kind, str(path)))
    return beds


# -- running the classes --------------------------------------------------------------------


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
    free_hogs: int = 0,
) -> ClassRun:
    """Run one class's calls and compare them. ``proxy_cpu`` pins the proxy process (with
    a busy loop of ``hog_duty`` beside it, the callers and agents on ``bench_cpu``);
    ``free_hogs`` busy loops pinned to no CPU share the machine with all of them."""
    started = time.monotonic()
    notes: list[str] = []
    host = (
        None
        if args.in_process
        else SubprocessProxyHost(cpu=proxy_cpu, max_uncertainty_ms=args.max_uncertainty_ms)
    )
    hog = CpuHog(proxy_cpu, hog_duty) if proxy_cpu is not None and hog_duty else None
    free = [CpuHog(None) for _ in range(free_hogs)]
    load_before = os.getloadavg()[0]
    affinity = os.sched_getaffinity(0) if bench_cpu is not None else None
    before = cpu_times(proxy_cpu) if proxy_cpu is not None else None
    wall_minus_mono = time.time_ns() - time.monotonic_ns()
    try:
        if bench_cpu is not None:
            os.sched_setaffinity(0, {bench_cpu})
        if hog is not None:
            await hog.start()
        for h in free:
            await h.start()
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
        for h in free:
            await h.stop()
        load_after = os.getloadavg()[0]
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
    if free:
        notes.append(
            f"{len(free)} busy loops pinned to no CPU beside the proxy, callers and agents "
            f"({os.cpu_count()} CPUs; load average {load_before:.1f} before, "
            f"{load_after:.1f} after)"
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
        result = compare_call(name, c, configs[c.label], wall_minus_mono, tag)
        results.append(result)
        if args.keep_outliers is not None and outside(result):
            keep_call(args.keep_outliers, name, len(results), c, result)
    return ClassRun(name, results, elapsed, notes, hog_duty or 0.0, busy)


def outside(result: CallResult) -> bool:
    """A figure of the call was published farther from the truth than its uncertainty."""
    return any(
        f.status == "published"
        and f.err_ms is not None
        and f.uncertainty_ms is not None
        and abs(f.err_ms) > f.uncertainty_ms
        for f in result.figures
    )


def keep_call(directory: Path, cls: str, n: int, call: Any, result: CallResult) -> Path:
    """Keep what is known of a call with a figure outside its uncertainty, to study it:
    the caller's record (what it sent and played, with times), the receipt, the agent's
    log and the figures. A pickle: load it with this checkout's voxproxy."""
    directory.mkdir(parents=True, exist_ok=True)
    # A frozen dataclass compiled by mypyc (the agent log's Spurts) cannot be unpickled
    # field by field: it is rebuilt from its fields through its constructor instead.
    names = [f.name for f in dataclasses.fields(Spurt)]
    copyreg.pickle(Spurt, lambda s: (Spurt, tuple(getattr(s, name) for name in names)))
    path = directory / f"{cls}-{n:03d}.pickle"
    keep = {"class": cls, "agent": call.label, "outcome": call.outcome, "figures": result.figures}
    with path.open("wb") as fh:
        pickle.dump(keep, fh)
    print(f"kept {path}: a figure outside its uncertainty", file=sys.stderr, flush=True)
    return path


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
    for cls, snr in (("snr10", SNR_DB), ("snr0", 0.0)):
        if cls in wanted:
            beds = [b for b in steady_beds(workdir) if b[0] in args.beds]
            agents = bench_agents(agent_configs(), n)
            runs.append(await run_class(cls, agents, noisy_scenarios(beds, snr), args))
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
    if "busy" in wanted:
        agents = bench_agents(agent_configs(), args.busy_calls)
        runs.append(
            await run_class(
                "busy",
                agents,
                clean_scenarios(),
                args,
                concurrency=args.contended_concurrency,
                free_hogs=args.busy_hogs,
            )
        )
    return runs


def dump_figures(path: Path, runs: list[ClassRun]) -> None:
    """Every figure of every class, one JSON object a line (``--dump``)."""
    with path.open("w") as fh:
        for run in runs:
            for result in run.results:
                for f in result.figures:
                    row = {"class": run.name, "agent": result.label, "tag": result.tag}
                    row |= dataclasses.asdict(f)
                    fh.write(json.dumps(row) + "\n")


def contended_name(i: int, duty: float) -> str:
    """``contended`` for the first hog duty, ``contended_duty50`` (and so on) after it."""
    return "contended" if i == 0 else f"contended_duty{round(100 * duty)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=160, help="calls of the clean class")
    parser.add_argument("--class-calls", type=int, default=32, help="calls of each other class")
    parser.add_argument("--concurrency", type=int, default=32, help="calls at once")
    parser.add_argument(
        "--contended-concurrency",
        type=int,
        default=16,
        help="calls at once in the contended and busy runs (the callers and agents then "
        "share fewer CPUs: fewer keep their own clock readings on time)",
    )
    parser.add_argument(
        "--busy-hogs", type=int, default=2, help="busy: CPU-bound processes beside the calls"
    )
    # 96 busy calls give about 26 barge-ins: a stop p95 that is not simply the largest.
    parser.add_argument("--busy-calls", type=int, default=96, help="calls of the busy class")
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
    parser.add_argument(
        "--beds",
        type=lambda s: [c.strip() for c in s.split(",") if c.strip()],
        default=list(STEADY_BEDS),
        help=f"snr10, snr0: comma-separated subset of {','.join(STEADY_BEDS)}",
    )
    parser.add_argument("--max-uncertainty-ms", type=float, default=50.0)
    parser.add_argument(
        "--keep-outliers",
        type=Path,
        metavar="DIR",
        help="keep each call with a figure outside its uncertainty here (a pickle of its "
        "caller record, receipt, agent log and figures)",
    )
    parser.add_argument(
        "--dump",
        type=Path,
        metavar="FILE",
        help="write every figure (class, agent, kind, status, error, stated uncertainty, "
        "reason, what) to FILE as JSON lines, to study the spread behind the table",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run the proxies in this process (as before); no contended class",
    )
    record.add_flag(parser)
    args = parser.parse_args()
    unknown = [c for c in args.classes if c not in CLASSES]
    if unknown:
        parser.error(f"unknown classes {unknown}; have {', '.join(CLASSES)}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="voxproxy-accuracy-") as tmp:
        runs = run_loop(run_all(args, Path(tmp)))  # on uvloop when it is installed
    if args.dump is not None:
        dump_figures(args.dump, runs)
    out = report(runs, time.monotonic() - started)
    record.finish("accuracy", out, args)


if __name__ == "__main__":
    main()
