"""``voxproxy analyze`` on recordings with known edges: how close, how fast, how it scales.

Accuracy: scripted calls (``support.scripted.recording``) with the corpus's voices
(espeak-ng, flite, festival; male and female, English and Spanish, -40 to -6 dBFS),
turns answered after 150-1500 ms and barge-ins the agent stops 60-400 ms later, written
as dual-channel WAV files four ways: 8 kHz μ-law and 16 kHz 16-bit PCM, each without
and with the agent leaking into the caller's channel at -20 dB, 120 ms late (echo).
Each file goes through the same path as the command (read, echo, the core, the
verdict: ``voxproxy.recordings.batch.analyze_one``) and each turn's ttfs and each
barge-in's stop latency is compared with the truth. ``unknown``: a figure withheld with
a reason; ``missed``: a response not measured or a barge-in not found; ``outside``: a
published figure further from the truth than its stated uncertainty.

Speed: one recording of ``--hour-s`` seconds of 8 kHz μ-law stereo (calls laid end to
end), analysed in this process: CPU seconds and times real time (the goal: 200x on one
core, an hour in under 18 s, with the compiled core: ``make native``). Scaling: a folder
of ``--scale-calls`` calls analysed with 1 worker and with ``--workers``: the CPU each
worker took (the busiest one's is the wall time on idle cores) and the wall time, which
on a shared machine says as much about the other processes as about the batch.

Run:  PYTHONPATH=. .venv/bin/python benchmarks/analyze.py [--calls 12] [--hour-s 3600]
Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # support.*: the helpers tests and benchmarks share

import benchkit  # noqa: E402
import record  # noqa: E402
from support.scripted.recording import (  # noqa: E402
    RecordingScore,
    recording_plans,
    recording_tracks,
    render_recording,
)

from voxproxy import native  # noqa: E402
from voxproxy.clips import load_corpus  # noqa: E402
from voxproxy.clock import new_secret  # noqa: E402
from voxproxy.receipts.policy import load_policy  # noqa: E402
from voxproxy.recordings.batch import Job, Options, analyze_one, run_batch  # noqa: E402
from voxproxy.recordings.wavfile import wav_bytes  # noqa: E402

CLASSES = {
    "8k_ulaw": (8000, "ulaw", None),
    "8k_ulaw_echo": (8000, "ulaw", -20.0),
    "16k_pcm": (16000, "pcm_s16le", None),
    "16k_pcm_echo": (16000, "pcm_s16le", -20.0),
}


def _speech(role: str) -> list:  # type: ignore[type-arg]
    return [c for c in load_corpus().values() if c.role == role and c.kind == "speech"]


def accuracy(calls: int, seed: int, folder: Path, options: Options) -> list[dict[str, object]]:
    plans = recording_plans(calls, seed, _speech("caller"), _speech("agent"))
    rendered = [render_recording(p) for p in plans]
    rows = []
    for name, (rate, encoding, echo) in CLASSES.items():
        score = RecordingScore()
        for k, rec in enumerate(rendered):
            path = folder / f"{name}_{k}.wav"
            path.write_bytes(
                wav_bytes(list(recording_tracks(rec, rate, echo_db=echo)), rate, encoding)
            )
            out = analyze_one(Job((str(path),)), options)
            receipt = out.receipt
            if receipt is None:
                score.problems.append(f"{path.name}: {out.error}")
                continue
            score.add(path.name, rec.truth, receipt)
        t95, tmax = score.stats(score.ttfs)
        s95, smax = score.stats(score.stop)
        rows.append(
            {
                "class": name,
                "calls": calls,
                "ttfs_n": len(score.ttfs),
                "ttfs_err_ms_p95": t95,
                "ttfs_err_ms_max": tmax,
                "stop_n": len(score.stop),
                "stop_err_ms_p95": s95,
                "stop_err_ms_max": smax,
                "unknown": len(score.unknown),
                "missed": len(score.problems),
                "outside_uncertainty": len(score.outside),
                "notes": score.problems + score.outside + score.unknown,
            }
        )
    return rows


def long_recording(seconds: float, seed: int, folder: Path) -> Path:
    """Calls laid end to end until ``seconds`` of 8 kHz μ-law stereo."""
    callers, agents = _speech("caller"), _speech("agent")
    caller_parts, agent_parts, total = [], [], 0
    k = 0
    while total < seconds * 8000:
        rec = render_recording(recording_plans(1, seed + k, callers, agents, turns=8)[0])
        c, a = recording_tracks(rec, 8000)
        caller_parts.append(c)
        agent_parts.append(a)
        total += c.size
        k += 1
    caller = np.concatenate(caller_parts)[: int(seconds * 8000)]
    agent = np.concatenate(agent_parts)[: int(seconds * 8000)]
    path = folder / "long.wav"
    path.write_bytes(wav_bytes([caller, agent], 8000, "ulaw"))
    return path


def _ms(x: object) -> str:
    return "—" if x is None else f"{x} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--calls", type=int, default=12, help="calls per accuracy class")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--hour-s", type=float, default=3600.0, help="length of the speed recording")
    ap.add_argument("--scale-calls", type=int, default=48, help="calls of the scaling folder")
    ap.add_argument("--workers", type=int, default=2, help="workers of the scaling run")
    record.add_flag(ap)
    args = ap.parse_args()
    options = Options(secret=new_secret(), policy=load_policy(None))
    with tempfile.TemporaryDirectory(prefix="voxproxy-analyze-") as tmp:
        folder = Path(tmp)
        rows = accuracy(args.calls, args.seed, folder, options)
        long_path = long_recording(args.hour_s, args.seed, folder)
        analyze_one(Job((str(folder / "8k_ulaw_0.wav"),)), options)  # warm up
        cpu0 = time.process_time()
        out = analyze_one(Job((str(long_path),)), options)
        cpu = time.process_time() - cpu0
        assert out.receipt is not None, out.error
        speed = {
            "audio_s": round(out.audio_s, 1),
            "cpu_s": round(cpu, 2),
            "x_real_time": round(out.audio_s / cpu, 1),
        }
        long_path.unlink()
        names = [f"{c}_{k}.wav" for c in CLASSES for k in range(args.calls)]
        jobs = [Job((str(folder / names[k % len(names)]),)) for k in range(args.scale_calls)]
        walls, audio, busiest, total_cpu = {}, 0.0, {}, {}
        load_before = os.getloadavg()[0]
        for workers in (1, args.workers):
            t0 = time.perf_counter()
            outs = run_batch(jobs, options, workers=workers)
            walls[workers] = time.perf_counter() - t0
            assert all(o.receipt is not None for o in outs), [o.error for o in outs]
            audio = sum(o.audio_s for o in outs)
            per_process: dict[int, float] = {}
            for o in outs:
                per_process[o.pid] = per_process.get(o.pid, 0.0) + o.cpu_s
            busiest[workers] = max(per_process.values())
            total_cpu[workers] = sum(per_process.values())
        scaling = {
            "calls": len(jobs),
            "audio_s": round(audio, 1),
            "wall_s_1": round(walls[1], 2),
            f"wall_s_{args.workers}": round(walls[args.workers], 2),
            "wall_speedup": round(walls[1] / walls[args.workers], 2),
            "cpu_s_1": round(total_cpu[1], 2),
            f"cpu_s_{args.workers}": round(total_cpu[args.workers], 2),
            f"busiest_worker_cpu_s_{args.workers}": round(busiest[args.workers], 2),
            # What the batch would take on idle cores: the busiest worker's CPU.
            "cpu_speedup": round(total_cpu[1] / busiest[args.workers], 2),
            "load_average_before": round(load_before, 2),
        }

    from rich.console import Console

    build = native.build()
    table = benchkit.figures_table(
        f"voxproxy analyze on scripted recordings; measurement core: {build}",
        (
            "class",
            "ttfs n",
            "ttfs |err| p95",
            "max",
            "stop n",
            "stop |err| p95",
            "max",
            "unknown",
            "missed",
            "outside",
        ),
    )
    for r in rows:
        table.add_row(
            str(r["class"]),
            str(r["ttfs_n"]),
            _ms(r["ttfs_err_ms_p95"]),
            _ms(r["ttfs_err_ms_max"]),
            str(r["stop_n"]),
            _ms(r["stop_err_ms_p95"]),
            _ms(r["stop_err_ms_max"]),
            str(r["unknown"]),
            str(r["missed"]),
            str(r["outside_uncertainty"]),
        )
    console = Console(width=130)
    console.print(table)
    for r in rows:
        for note in r["notes"]:  # type: ignore[attr-defined]
            console.print(f"  {r['class']}: {note}")
    console.print(
        f"speed: {speed['audio_s']:.0f} s of 8 kHz μ-law stereo in {speed['cpu_s']:.2f} s of CPU "
        f"= {speed['x_real_time']:.0f}x real time on one core ({build})"
    )
    console.print(
        f"scaling: {scaling['calls']} calls ({scaling['audio_s']:.0f} s of audio, all four "
        f"classes): 1 worker {scaling['cpu_s_1']:.2f} s of CPU; {args.workers} workers "
        f"{scaling[f'cpu_s_{args.workers}']:.2f} s, the busiest "
        f"{scaling[f'busiest_worker_cpu_s_{args.workers}']:.2f} s (x{scaling['cpu_speedup']:.2f} "
        f"on idle cores); wall {scaling['wall_s_1']:.2f} s and "
        f"{scaling[f'wall_s_{args.workers}']:.2f} s (x{scaling['wall_speedup']:.2f}) with the "
        f"machine's load average at {scaling['load_average_before']}"
    )
    for r in rows:
        r.pop("notes")
    record.finish(
        "analyze", {"build": build, "accuracy": rows, "speed": speed, "scaling": scaling}, args
    )


if __name__ == "__main__":
    main()
