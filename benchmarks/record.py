"""The results file: each benchmark's last run, recorded on request, dated, with the
machine and the build it ran on.

Every benchmark ends by printing its headline, one JSON object, as the last line of its
output (``finish``). Run with ``--record`` it also writes that headline into
``docs/results.json`` under its own name (``--record-as NAME`` for another name: two ways
of running one benchmark, such as ``capacity.py --core-share``), replacing that entry.
The README's figures are rendered from that file (``tools/readme_figures.py``), so a
figure the README quotes always says when, where and on which build it was measured.
Without ``--record`` nothing is written: CI and casual runs leave the file alone.

An entry (``docs/results.json`` under ``"benchmarks"``)::

    "overhead": {
      "command": "benchmarks/overhead.py --levels 50,100 --rounds 3",
      "date": "<UTC, ISO 8601, when the run ended>",
      "seconds": 412,
      "machine": {"cpu": "<model name>", "cores": 2, "usable_cores": 2,
                  "load_average_start": [0.4, 0.6, 0.7], "load_average_end": [...],
                  "platform": "Linux-...-x86_64", "python": "3.11.9"},
      "build": {"core": "mypyc", "version": "0.1.0", "commit": "<40 hex>", "dirty": false},
      "provenance": "recorded",
      "headline": {<the benchmark's last line>}
    }

``provenance`` is ``recorded`` for an entry this module wrote; an entry written by hand
(the file's first figures, taken from docs/performance.md) says where it came from,
leaves null what that source did not record, and may say the machine's load in words
(``machine.load_said``).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results.json"
FORMAT = 1
ABOUT = (
    "Each benchmark's last recorded run (benchmarks/record.py: run a benchmark with "
    "--record). The README's figures are rendered from this file by "
    "tools/readme_figures.py; tests/tools/test_readme_figures.py holds them equal."
)

# When this run started, for its load average at start (a benchmark imports this module
# before it measures anything).
_STARTED = time.monotonic()
_LOAD_AT_START = os.getloadavg()


def add_flag(parser: argparse.ArgumentParser) -> None:
    """``--record`` and ``--record-as NAME``: write the headline into the results file
    when the run ends."""
    global _STARTED, _LOAD_AT_START
    _STARTED, _LOAD_AT_START = time.monotonic(), os.getloadavg()
    parser.add_argument(
        "--record",
        action="store_true",
        help=f"write this run's last line into {_shown(RESULTS)}, dated, with the "
        "machine and the build (the README's figures are rendered from that file by "
        "tools/readme_figures.py)",
    )
    parser.add_argument(
        "--record-as",
        metavar="NAME",
        help="--record under NAME instead of the benchmark's name (another way of running "
        "it, e.g. capacity-2w)",
    )


def key(name: str, args: argparse.Namespace | None) -> str | None:
    """Under which name a run is recorded (None: not recorded)."""
    if args is None:
        return None
    named: str | None = getattr(args, "record_as", None)
    return named or (name if getattr(args, "record", False) else None)


def finish(name: str, headline: dict[str, Any], args: argparse.Namespace | None) -> None:
    """Print ``headline`` as the output's last line; when the run was asked to
    (``--record``, ``--record-as``), also write it into the results file."""
    print(json.dumps(headline, default=str), flush=True)
    recorded_as = key(name, args)
    if recorded_as is None:
        return
    write_entry(RESULTS, recorded_as, entry(headline))
    print(f"recorded as {recorded_as!r} in {_shown(RESULTS)}", file=sys.stderr)


def _shown(path: Path) -> Path:
    """A path as the checkout names it (absolute when it lies outside)."""
    try:
        return path.relative_to(ROOT)
    except ValueError:
        return path


def entry(headline: dict[str, Any], argv: list[str] | None = None) -> dict[str, Any]:
    """The results file's entry for a run that just ended with ``headline``."""
    return {
        "command": command(sys.argv if argv is None else argv),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - _STARTED),
        "machine": machine(),
        "build": build(),
        "provenance": "recorded",
        "headline": json.loads(json.dumps(headline, default=str)),
    }


def command(argv: list[str]) -> str:
    """The command line as one would type it from the checkout, without ``--record``."""
    words: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word in ("--record", "--record-as"):
            skip = word == "--record-as"
        elif not word.startswith("--record-as="):
            words.append(word)
    if words:
        script = Path(words[0]).resolve()
        with contextlib.suppress(ValueError):
            words[0] = str(script.relative_to(ROOT))
    return shlex.join(words)


def machine() -> dict[str, Any]:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "load_average_start": [round(x, 2) for x in _LOAD_AT_START],
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def cpu_model() -> str | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def build() -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    import voxproxy
    from voxproxy import native

    return {
        "core": native.build(),
        "version": voxproxy.__version__,
        "commit": _git("rev-parse", "HEAD"),
        "dirty": None
        if (status := _git("status", "--porcelain", "-uno")) is None
        else status != "",
    }


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def read(path: Path = RESULTS) -> dict[str, Any]:
    """The results file (an empty one when there is none yet)."""
    if not path.exists():
        return {"format": FORMAT, "about": ABOUT, "benchmarks": {}}
    data: dict[str, Any] = json.loads(path.read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: format {data.get('format')!r}, this code reads {FORMAT}")
    return data


def write_entry(path: Path, key: str, new: dict[str, Any]) -> None:
    """Replace ``key``'s entry in the results file, whole (read, change, rename into
    place), under a lock on its folder so that two benchmarks ending together keep both."""
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        data = read(path)
        data["benchmarks"][key] = new
        data["benchmarks"] = dict(sorted(data["benchmarks"].items()))
        partial = path.with_name(f".{path.name}.{os.getpid()}.part")
        partial.write_text(dump(data))
        os.replace(partial, path)
    finally:
        os.close(folder)


def dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
