"""Write the README's figures from the results file, so that they cannot drift.

The README quotes measured figures in one place, a block between two markers
(``<!-- figures: begin -->`` and ``<!-- figures: end -->``). This script renders that
block from ``docs/results.json``, where each benchmark run with ``--record`` left its
last line, dated, with the machine and the build (``benchmarks/record.py``): a table of
the figures, then a table of the runs they come from. ``tests/tools/test_readme_figures.py``
fails while the README's block differs from what this script would write.

    python tools/readme_figures.py           # rewrite the block in README.md
    python tools/readme_figures.py --check   # exit 1 when the block is out of date

A figure whose benchmark has no entry yet says so (and which command records it); an
entry that lacks a field a row needs is an error naming both.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RESULTS = ROOT / "docs" / "results.json"
BEGIN = "<!-- figures: begin -->"
END = "<!-- figures: end -->"
NOTICE = (
    "<!-- Written by tools/readme_figures.py from docs/results.json: run a benchmark with "
    "--record, then the script; do not edit by hand. -->"
)
SEEDED_MARK = "†"

Headline = dict[str, Any]


@dataclass(frozen=True)
class Row:
    key: str  # the results file's entry (a benchmark's name, or --record NAME)
    what: str
    figure: Callable[[Headline], str]


def _n(x: float, digits: int = 2) -> str:
    """A number as the benchmarks print it: at most ``digits`` decimals, no trailing 0."""
    text = f"{x:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _level(h: Headline, calls: int) -> Headline:
    (level,) = [lv for lv in h["levels"] if lv["calls"] == calls]
    return dict(level)


def _accuracy(h: Headline, cls: str) -> str:
    c = h[cls]
    text = f"ttfs error p95 {_n(c['ttfs_err_ms_p95'], 1)} ms (max {_n(c['ttfs_err_ms_max'], 1)})"
    if "turns" in c:
        text += f" over {c['turns']} turns"
    if c.get("stop_err_ms_p95") is not None:
        text += (
            f"; barge-in stop error p95 {_n(c['stop_err_ms_p95'], 1)} ms "
            f"(max {_n(c['stop_err_ms_max'], 1)})"
        )
        if "barge_ins" in c:
            text += f" over {c['barge_ins']} barge-ins"
    if "unknown" in c:
        text += f"; {c['unknown']} withheld with a reason"
    if "missed" in c:
        text += f", {c['missed']} missed"
    return text


def _analyze(h: Headline) -> str:
    rows = h["accuracy"]
    p95 = max(r["ttfs_err_ms_p95"] for r in rows)
    worst = max(r["ttfs_err_ms_max"] for r in rows)
    missed = sum(r["missed"] for r in rows)
    speed = h["speed"]
    hours = speed["audio_s"] / 3600
    return (
        f"ttfs error p95 ≤ {_n(p95, 1)} ms (max {_n(worst, 1)}) in each of {len(rows)} classes "
        f"(8 and 16 kHz, with and without echo), {missed} missed; "
        f"{_n(hours, 1)} h of 8 kHz stereo in {_n(speed['cpu_s'])} s of CPU "
        f"({_n(speed['x_real_time'], 0)}× real time, one core)"
    )


def _overhead_cpu(h: Headline) -> str:
    lv = _level(h, 100)
    text = f"{_n(lv['cpu_per_msg_ratio'], 3)}×"
    if "cpu_per_msg_us" in lv and "bare_cpu_per_msg_us" in lv:
        text += (
            f" ({_n(lv['cpu_per_msg_us'], 1)} µs a message against the bare relay's "
            f"{_n(lv['bare_cpu_per_msg_us'], 1)})"
        )
    if lv.get("rounds"):
        text += f", the median of {lv['rounds']} rounds"
    return text


def _overhead_latency(h: Headline) -> str:
    lv = _level(h, 100)
    return f"{_n(lv['p50_added_ms'])} / {_n(lv['p99_added_ms'])} ms"


def _capacity(h: Headline) -> str:
    text = f"{h['voxproxy_calls']} calls"
    text += {
        "load": " (a lower bound: the load generator ran out first)",
        "max_calls": " (a lower bound: the search stopped at its --max-calls)",
    }.get(h.get("voxproxy_bound", "relay"), "")
    if h.get("bare_calls"):
        text += f"; a bare websockets relay {h['bare_calls']}"
    return text


def _overload(h: Headline) -> str:
    o = h.get("overload")
    if not o:
        return "not measured in the last run (`--overload 0`)"
    limited = o["with_max_calls"]
    return (
        f"{o['calls']} callers, `--max-calls {o['capacity']}`: p99 added "
        f"{_n(limited['p99_added_ms'])} ms for the {limited['admitted']} admitted, "
        f"{limited['refused']} refused with 503"
    )


def _two_workers(h: Headline) -> str:
    text = f"{_n(h['voxproxy_2w_over_1w'], 2)}× ({h['voxproxy-2w_calls']} calls against "
    text += f"{h['voxproxy_calls']}"
    if h.get("core_share"):
        text += f", each process on {_n(h['core_share'])} of a core"
    return text + ")"


def _loadgen(h: Headline) -> str:
    text = f"{h['callers_per_core']} callers"
    at = [lv for lv in h["levels"] if lv["calls"] == h["callers_per_core"]]
    if at:
        text += f" (pacing p99 {_n(at[0]['p99_ms'])} ms)"
    return text


def _telemetry(h: Headline) -> str:
    ratios = ", ".join(
        f"{_n(lv['cpu_per_msg_ratio'], 3)}× at {lv['calls']} call{'s' * (lv['calls'] != 1)}"
        for lv in sorted(h["levels"], key=lambda lv: -lv["calls"])
    )
    return (
        f"CPU a message {ratios}; {_n(h['per_call_telemetry_us'] / 1000)} ms of CPU a call "
        "when it ends"
    )


def _capture(h: Headline) -> str:
    return (
        f"{_n(h['disk_kib_per_call_s'], 1)} KiB of disk a Twilio call-second; "
        f"{_n(h['capture_loop_us_per_msg'], 1)} µs a message on the event loop, "
        f"{_n(h['capture_thread_us_per_msg'], 1)} µs in its writer thread"
    )


def _memory(h: Headline) -> str:
    mib = 1024
    return (
        f"{_n(h['rss_start_kb'] / mib, 0)} MB at start, "
        f"{_n(h['burst']['rss_after_kb'] / mib, 0)} MB after 3 calls whose agent bursts "
        f"90 min of audio, {_n(h['normal']['rss_after_kb'] / mib, 0)} MB after 100 more calls"
    )


ROWS: tuple[Row, ...] = (
    Row(
        "accuracy",
        "Accuracy over live calls (built-in scenarios, 4 agents)",
        lambda h: _accuracy(h, "clean"),
    ),
    Row(
        "accuracy",
        "… other synthesizers' voices, -40 to -6 dBFS",
        lambda h: _accuracy(h, "corpus"),
    ),
    Row("analyze", "Recorded calls (`voxproxy analyze`)", _analyze),
    Row("overhead", "CPU a message at 100 calls, against a bare websockets relay", _overhead_cpu),
    Row("overhead", "Latency added at 100 calls, p50 / p99", _overhead_latency),
    Row("capacity", "Real-time calls on one core at p99 added ≤ 5 ms, nothing shed", _capacity),
    Row("capacity", "At 120% of that", _overload),
    Row("capacity-2w", "Two workers against one (`--workers 2`)", _two_workers),
    Row("loadgen", "Paced callers on one core of `voxproxy load`, pacing p99 ≤ 5 ms", _loadgen),
    Row("telemetry_overhead", "Traces and metrics on (`--otel`, `/metrics`)", _telemetry),
    Row("capture", "`proxy --capture`", _capture),
    Row("memory", "Proxy memory (RSS)", _memory),
)


def _build(b: dict[str, Any]) -> str:
    core = {"mypyc": "compiled", "pure-python": "pure Python"}.get(b.get("core") or "", "")
    parts = [core or "build not recorded"]
    if b.get("installed") == "wheel":
        parts.append("installed from its wheel")
    if b.get("commit"):
        parts.append(f"`{b['commit'][:7]}`" + (" + changes" if b.get("dirty") else ""))
    return ", ".join(parts)


def _cpu_name(model: str) -> str:
    name = re.sub(r"\((?:R|TM)\)|\bCPU\b|\bProcessor\b|@.*$", "", model)
    return " ".join(name.split())


def _machine(m: dict[str, Any]) -> str:
    parts = []
    if m.get("cpu"):
        parts.append(_cpu_name(m["cpu"]))
    if m.get("cores"):
        usable = m.get("usable_cores")
        cores = f"{m['cores']} cores"
        if usable and usable != m["cores"]:
            cores += f" ({usable} usable)"
        parts.append(cores)
    if m.get("load_average_start"):
        parts.append(f"load {_n(m['load_average_start'][0], 1)}")
    elif m.get("load_said"):
        parts.append(m["load_said"])
    return ", ".join(parts) or "not recorded"


def _when(date: str) -> str:
    """An entry's ISO date as the table shows it: to the minute, UTC."""
    return date[:16].replace("T", " ") + " UTC"


def render(results: dict[str, Any]) -> str:
    """The block between the markers (without them)."""
    entries: dict[str, Any] = results["benchmarks"]
    lines = ["| | figure | run |", "|---|---|---|"]
    used: list[str] = []
    for row in ROWS:
        entry = entries.get(row.key)
        if entry is None:
            figure = f"not measured yet: `benchmarks/{row.key}.py --record`"
            run = "—"
        else:
            try:
                figure = row.figure(entry["headline"])
            except (KeyError, ValueError, TypeError) as exc:
                raise ValueError(
                    f"results entry {row.key!r} lacks what {row.what!r} shows: {exc!r}"
                ) from exc
            seeded = SEEDED_MARK if entry.get("provenance") != "recorded" else ""
            run = f"{row.key}, {entry['date'][:10]}{seeded}"
            if row.key not in used:
                used.append(row.key)
        lines.append(f"| {row.what} | {figure} | {run} |")
    lines += ["", "| run | command | when | machine | build |", "|---|---|---|---|---|"]
    for key in used:
        entry = entries[key]
        seeded = SEEDED_MARK if entry.get("provenance") != "recorded" else ""
        lines.append(
            f"| {key} | `{entry['command']}` | {_when(entry['date'])}{seeded} "
            f"| {_machine(entry['machine'])} | {_build(entry['build'])} |"
        )
    if any(entries[k].get("provenance") != "recorded" for k in used):
        lines += [
            "",
            f"{SEEDED_MARK} Carried over from [docs/performance.md](docs/performance.md), where "
            "the run is written up, before the benchmarks recorded their runs: what that page "
            "did not note is not shown. The next run with `--record` replaces it.",
        ]
    return "\n".join(lines)


def replace_block(text: str, body: str) -> str:
    """``text`` with the part between the markers replaced by the notice and ``body``."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError(f"the README needs one {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{NOTICE}\n\n{body}\n\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the block is stale")
    parser.add_argument("--readme", type=Path, default=README)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    text = args.readme.read_text()
    new = replace_block(text, render(json.loads(args.results.read_text())))
    if new == text:
        return 0
    if args.check:
        print(
            f"{args.readme}: the figures block differs from {args.results}; "
            "run python tools/readme_figures.py",
            file=sys.stderr,
        )
        return 1
    args.readme.write_text(new)
    print(f"{args.readme}: figures rewritten from {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
