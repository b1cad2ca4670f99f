"""How the caller's figures fare under steady noise, bed by bed and SNR by SNR, offline.

Scripted calls (``tests/support/scripted``: no clock, no sockets) of three turns each,
the project's caller and agent clips drawn by seed, a noise bed under the whole caller
track from its first sample (``tests/support/noise.py``: white, pink, brown and a drifting
street bed; ``recorded_pink``: the demo's ``noise_pink`` clip looped from a point the
seed picks) at each SNR (the bed's RMS that many dB under the callers' -21 dBFS). The
truth of each edge is what a listener hears over the bed (MEASUREMENT.md 2). Each
turn's time-to-first-sound in the receipt is compared with it: published (its stated
uncertainty within ``--max-uncertainty-ms``) or withheld; for the published, the error
and whether it lies inside the stated uncertainty (the contract: it must). Each call is
measured a second time under the default policy, for what the receipt says of a
withheld figure: whether it still bounds the truth (``ttfs_bounded``, ``stop_bounded``),
and whether the truth lies in that span.

The live counterpart is ``benchmarks/accuracy.py --classes snr10,snr0`` (callers over
loopback, the bed at 10 and 0 dB); this sweep reaches the SNRs between and above, in
seconds.

The last line printed is one JSON object: per ``bed/snr/dialect``, ``figures``,
``published``, ``err_ms_p50``, ``err_ms_p95`` (published, absolute), ``median_err_ms``
(signed, all figures), ``inside`` (share of the published inside their uncertainty),
``bounded`` (withheld under the default policy, bounding the truth) and
``bounded_outside`` (of those, with the truth outside their span). ``--dump FILE``
writes every figure as a JSON line.

Run:  .venv/bin/python benchmarks/noise_sweep.py [--beds white,pink,recorded_pink]
      [--snr 10,20] [--dialects raw,twilio] [--calls 16] [--barge] [--dump FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))  # the scripted calls and the noise beds

import record  # noqa: E402
from benchkit import figures_table  # noqa: E402
from support.groundtruth import barge_point_ms  # noqa: E402
from support.noise import noise_bed  # noqa: E402
from support.scripted import BargePlan, CallPlan, TurnPlan, render  # noqa: E402

from voxproxy.clips import load_clips  # noqa: E402
from voxproxy.core.audio.resample import resample_clip  # noqa: E402
from voxproxy.core.dialects import make_decoder  # noqa: E402
from voxproxy.core.dialects.base import DialectOptions  # noqa: E402
from voxproxy.core.receipt import CloseInfo, Receipt  # noqa: E402
from voxproxy.core.session import CallSession, SessionConfig  # noqa: E402

CALLER_DBFS = -21.0  # the scripted callers' level the SNR is taken against
RATE = 16000
SECRET = b"noise-sweep"
DEFAULT_BOUND_MS = SessionConfig().max_uncertainty_ms


def measure(call: object, dialect: str, bound_ms: float = 1e9) -> Receipt:
    """The call's messages through a session with no bound on uncertainty (every figure
    comes with its own; publication is judged here against the sweep's bound), or with
    the default policy's ``bound_ms``."""
    session = CallSession(
        make_decoder(dialect, DialectOptions(secret=SECRET)),
        0,
        secret=SECRET,
        link_id="sweep",
        config=SessionConfig(max_uncertainty_ms=bound_ms),
    )
    for t, d, p in call.messages:  # type: ignore[attr-defined]
        session.on_message(d, p, t)
    return session.close(call.end_ns, "completed", CloseInfo(initiator="caller"))  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Figure:
    """One figure of the sweep: its error and stated uncertainty with the bound lifted,
    and what the receipt says of it under the default policy."""

    bed: str
    snr_db: float
    dialect: str
    seed: int
    turn: int
    clip: str
    kind: str  # "ttfs" or "stop"
    err_ms: float
    uncertainty_ms: float
    published: bool  # under the default policy
    bounded: bool  # withheld there, its span said to bound the truth
    reason: str | None  # why it is withheld there


def bed_samples(bed: str, n: int, seed: int) -> np.ndarray:
    """``n`` samples of ``bed`` at unit RMS (``recorded_pink``: the demo's clip, looped)."""
    if bed != "recorded_pink":
        return noise_bed(bed, n, RATE, seed=seed)
    clip = load_clips()["noise_pink"]
    x = resample_clip(clip.pcm, clip.sample_rate_hz, RATE).astype(np.float64)
    x /= np.sqrt(np.mean(x**2))
    return x[(np.arange(n) + seed * 7919) % x.size]


def figures(bed: str, snr_db: float, dialect: str, calls: int, barge: bool = False) -> list[Figure]:
    """Each ttfs figure of ``calls`` scripted calls and each barge-in's stop latency
    (with ``barge``: the second caller turn talks over the first answer, which is flushed
    60-400 ms later; its onset is read over the bed as the ttfs offsets are)."""
    clips = load_clips()
    callers = [c for c in clips.values() if c.role == "caller" and c.kind == "speech"]
    agents = [c for c in clips.values() if c.role == "agent" and c.kind == "speech"]
    out: list[Figure] = []
    for seed in range(calls):
        rng = random.Random(seed)
        plans = []
        for i in range(3):
            caller, agent = rng.choice(callers), rng.choice(agents)
            delay = rng.uniform(300, 2000)
            talk_over = None
            if barge and i == 0:  # (drawn only then: the ttfs-only calls stay as they were)
                point = barge_point_ms(agent, rng)
                talk_over = BargePlan(point, rng.uniform(60, 400), "flush")
            plans.append(TurnPlan(caller, agent, delay, talk_over))
        turns = tuple(plans)
        pcm = np.round(bed_samples(bed, RATE * 12, seed) * 3000).astype(np.int16)
        plan = CallPlan(
            dialect=dialect,  # type: ignore[arg-type]
            send_mode="paced",
            turns=turns,
            seed=seed,
            caller_bed=pcm,
            caller_bed_dbfs=CALLER_DBFS - snr_db,
        )
        call = render(plan)
        responses = [t for t in measure(call, dialect).turns if t.kind == "response"]
        policy = [t for t in measure(call, dialect, DEFAULT_BOUND_MS).turns if t.kind == "response"]
        if len(responses) != len(call.truth) or len(policy) != len(responses):
            continue  # turns that no longer line up are the live benchmark's to count
        for i, (truth, turn) in enumerate(zip(call.truth, responses, strict=True)):
            where = (bed, snr_db, dialect, seed, i)
            if turn.ttfs_ms is not None and turn.ttfs_uncertainty_ms is not None:
                seen = policy[i]
                out.append(
                    Figure(
                        *where,
                        plans[i].caller.name,
                        "ttfs",
                        round(turn.ttfs_ms - truth.ttfs_ns / 1e6, 2),
                        turn.ttfs_uncertainty_ms,
                        seen.ttfs_ms is not None,
                        bool(seen.ttfs_bounded),
                        seen.reason if seen.ttfs_ms is None else None,
                    )
                )
            b = responses[i + 1].barge_in if i + 1 < len(responses) else None
            seen_b = policy[i + 1].barge_in if i + 1 < len(policy) else None
            # (Builds before stop_bounded, run as a baseline, bound no stop.)
            if truth.barge_onset_ns is None or truth.stop_ns is None or b is None:
                continue
            if b.stop_latency_ms is not None and b.stop_uncertainty_ms is not None:
                true_ms = (truth.stop_ns - truth.barge_onset_ns) / 1e6
                out.append(
                    Figure(
                        *where,
                        plans[i + 1].caller.name,
                        "stop",
                        round(b.stop_latency_ms - true_ms, 2),
                        b.stop_uncertainty_ms,
                        seen_b is not None and seen_b.stop_latency_ms is not None,
                        seen_b is not None and bool(getattr(seen_b, "stop_bounded", False)),
                        None if seen_b is None else seen_b.reason,
                    )
                )
    return out


def summary(rows: list[Figure], bound_ms: float) -> dict[str, float | int | None]:
    errors = np.array([r.err_ms for r in rows])
    unc = np.array([r.uncertainty_ms for r in rows])
    published = unc <= bound_ms
    absolute = np.abs(errors[published])

    def pct(q: float) -> float | None:
        return round(float(np.percentile(absolute, q)), 1) if absolute.size else None

    inside = absolute <= unc[published]
    bounded = [r for r in rows if r.bounded]
    return {
        "figures": len(rows),
        "published": int(published.sum()),
        "err_ms_p50": pct(50),
        "err_ms_p95": pct(95),
        "median_err_ms": round(float(np.median(errors)), 1) if errors.size else None,
        "inside": round(float(inside.mean()), 3) if inside.size else None,
        "bounded": len(bounded),
        "bounded_outside": sum(abs(r.err_ms) > r.uncertainty_ms for r in bounded),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--beds", default="white,pink,brown,street")
    parser.add_argument("--snr", default="10,15,20,25,30,35,40,45,50", help="dB, comma-separated")
    parser.add_argument("--dialects", default="raw,twilio")
    parser.add_argument("--calls", type=int, default=16, help="calls of three turns a cell")
    parser.add_argument("--max-uncertainty-ms", type=float, default=50.0)
    parser.add_argument(
        "--barge",
        action="store_true",
        help="the second caller turn talks over the first answer: its stop latency is "
        "judged too (rows ending /stop; the calls then differ from the ttfs-only ones)",
    )
    parser.add_argument("--dump", type=Path, help="write every figure as a JSON line here")
    record.add_flag(parser)
    args = parser.parse_args()
    results: dict[str, dict[str, float | int | None]] = {}
    dump = None if args.dump is None else args.dump.open("w")
    for bed in args.beds.split(","):
        for snr in (float(s) for s in args.snr.split(",")):
            for dialect in args.dialects.split(","):
                found = figures(bed, snr, dialect, args.calls, args.barge)
                if dump is not None:
                    dump.writelines(json.dumps(asdict(f)) + "\n" for f in found)
                rows = [f for f in found if f.kind == "ttfs"]
                results[f"{bed}/{snr:g}/{dialect}"] = summary(rows, args.max_uncertainty_ms)
                if args.barge:
                    stops = [f for f in found if f.kind == "stop"]
                    key = f"{bed}/{snr:g}/{dialect}/stop"
                    results[key] = summary(stops, args.max_uncertainty_ms)
    if dump is not None:
        dump.close()
    table = figures_table(
        f"ttfs under a steady bed, scripted calls ({args.calls} calls of three turns a row; "
        f"published: uncertainty <= {args.max_uncertainty_ms:g} ms)",
        ["bed / SNR dB / wire", "figures", "published", "|err| p50", "p95", "median err",
         "inside unc.", "bounded (outside)"],
    )  # fmt: skip
    for name, r in results.items():
        n, got = int(r["figures"] or 0), int(r["published"] or 0)
        share = f"{got} ({100 * got / max(n, 1):.0f}%)"
        inside = "—" if r["inside"] is None else f"{100 * float(r['inside']):.0f}%"
        table.add_row(
            name,
            str(r["figures"]),
            share,
            "—" if r["err_ms_p50"] is None else f"{r['err_ms_p50']} ms",
            "—" if r["err_ms_p95"] is None else f"{r['err_ms_p95']} ms",
            "—" if r["median_err_ms"] is None else f"{r['median_err_ms']:+} ms",
            inside,
            f"{r['bounded']} ({r['bounded_outside']})",
        )
    from rich.console import Console

    Console(width=140).print(table)
    record.finish("noise_sweep", results, args)


if __name__ == "__main__":
    main()
