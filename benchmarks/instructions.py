"""The measurement plane's work per message in instructions, counted by valgrind's
callgrind: a figure a busy, shared machine does not move (CPU time on such a machine
drifts by tens of per cent from one minute to the next), so a change to the per-message
path can be judged in one run, before and after.

The calls are ``benchmarks/measurement.py``'s workloads, smaller (the program runs about
fifty times slower under callgrind). Each stage runs in its own process under callgrind,
after a process that only builds the workload: the difference, divided by the messages,
is the stage's instructions per message (``PYTHONHASHSEED=0`` and, with ``setarch -R``, no
address randomization, and OpenBLAS on one thread: the same run twice counts within a
few instructions a message). Stages as in measurement.py: ``parse``
(orjson and base64, the least work that sees the audio: the baseline), ``decode`` (the
Twilio decoder), ``session`` (``CallSession.on_message`` for every message, then
``close``), ``queued`` and ``grouped`` (the same through the proxy's measurement queue in
50 ms group turns, each call's pumps alone or a turn's pumps together: the proxy's way).
The build is the one the environment selects (``VOXPROXY_PURE_PYTHON=1`` counts the
sources).

Instructions are not time: a cache miss costs a hundred of them and is counted as one.
The live figures are ``benchmarks/overhead.py``'s; this one says whether a change did less
work, and how much.

Run:  PYTHONPATH=. .venv/bin/python benchmarks/instructions.py [--workloads overhead,scripted]
Needs valgrind (Debian: ``apt-get install valgrind``). Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import benchkit  # noqa: E402
import measurement  # noqa: E402
import record  # noqa: E402

STAGES = ("parse", "decode", "session", "queued", "grouped")


def workload(name: str, args: argparse.Namespace) -> list[measurement.Call]:
    """measurement.py's workload, smaller: the concurrent calls are a quarter as long as
    the overhead call."""
    return measurement.workload(name, args.seconds, args.calls, args.concurrent, args.seconds / 4)


def child(name: str, stage: str, args: argparse.Namespace) -> None:
    """Build the workload, run one stage on it (``none``: only the build), print the
    number of messages."""
    calls = workload(name, args)
    if stage != "none":
        measurement.STAGES[stage](calls)
    print(sum(len(c.messages) for c in calls))


def counted(name: str, stage: str, args: argparse.Namespace) -> tuple[int, int]:
    """Instructions of a child process under callgrind, and its messages."""
    # OpenBLAS's worker threads wait for work spinning, for as long as the scheduler lets
    # them: one thread makes the count the same run after run.
    count, out = benchkit.callgrind(
        [
            __file__,
            "--child",
            name,
            stage,
            *("--seconds", str(args.seconds), "--calls", str(args.calls)),
            *("--concurrent", str(args.concurrent)),
        ],
        f"{name}/{stage}",
        env={"OPENBLAS_NUM_THREADS": "1"},
    )
    return count, int(out.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--workloads", default="overhead,scripted,concurrent")
    ap.add_argument("--seconds", type=float, default=20.0, help="overhead call (concurrent: 1/4)")
    ap.add_argument("--calls", type=int, default=4, help="scripted calls")
    ap.add_argument("--concurrent", type=int, default=20, help="calls at once (concurrent)")
    ap.add_argument("--child", nargs=2, metavar=("WORKLOAD", "STAGE"), help=argparse.SUPPRESS)
    record.add_flag(ap)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args)
        return
    names = args.workloads.split(",")
    for name in names:
        if name not in ("overhead", "scripted", "concurrent"):
            ap.error(f"unknown workload {name!r} (overhead, scripted, concurrent)")
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")

    from rich.console import Console

    from voxproxy import native

    rows = []
    for name in names:
        base, n = counted(name, "none", args)
        per = {}
        for stage in STAGES:
            total, _ = counted(name, stage, args)
            per[stage] = (total - base) / n
        rows.append(
            {
                "workload": name,
                "messages": n,
                **{f"{s}_instructions": round(per[s]) for s in STAGES},
                "session_over_parse": round(per["session"] / per["parse"], 2),
            }
        )
    build = native.build()
    table = benchkit.figures_table(
        f"voxproxy measurement: instructions per message (callgrind), {build}",
        ("workload", "messages", *STAGES, "ratio"),
    )
    for r in rows:
        table.add_row(
            str(r["workload"]),
            str(r["messages"]),
            *(f"{r[f'{s}_instructions']:,}" for s in STAGES),
            f"{r['session_over_parse']:.2f}",
        )
    console = Console(width=120)
    console.print(table)
    console.print("ratio = session / parse (orjson + base64 of each message).")
    record.finish("instructions", {"build": build, "workloads": rows}, args)


if __name__ == "__main__":
    main()
