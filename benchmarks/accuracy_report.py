"""The accuracy benchmark's report (benchmarks/accuracy.py): per class and per agent or
noise bed, the errors' percentiles, what was withheld, missed or unmatched, the stated
uncertainty; a table each, and the classes' entries of the final JSON line."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from accuracy_compare import CallResult, Figure

WRONG_MS = 100.0  # babble: a published figure off by more than this is wrong
WORST_MS = 10.0  # the three worst figures of a class are named when off by more than this
FIRST_FROM = ("clean", "speech_only", "corpus")


@dataclass
class ClassRun:
    """One class's calls, compared (accuracy.run_class)."""

    name: str
    results: list[CallResult]
    elapsed_s: float
    notes: list[str] = field(default_factory=list)
    hog_duty: float = 0.0
    cpu_busy_pct: float | None = None  # the proxy's CPU, when pinned


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
        "within_30ms": sum(1 for f in pub if f.err_ms is not None and abs(f.err_ms) <= 30.0),
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
        "agent_moved_ms_p95": _pct([abs(f.agent_moved_ms) for f in pub], 95),
        "agent_moved_ms_max": _max([abs(f.agent_moved_ms) for f in pub]),
        "truth_span_ms_p95": _pct([f.truth_span_ms for f in pub], 95),
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
    if cls.startswith("snr"):
        keys += ["published", "within_30ms"]
    if cls.startswith("contended") or cls == "busy":
        keys += ["within_uncertainty", "uncertainty_ms_p50", "uncertainty_ms_p95"]
        keys += ["uncertainty_ms_max"]
    out = {k: s[k] for k in keys}
    if cls == "busy":
        figures = s["turns"] + s["barge_ins"]
        share = (s["published"] - s["unmatched"]) / figures if figures else None
        out["published_share"] = None if share is None else round(share, 4)
    return out


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def _share(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


# The table's columns after the label: heading, the summary's key, how a cell is written.
COLUMNS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("calls", "calls", str),
    ("turns", "turns", str),
    ("ttfs |err| p50", "ttfs_err_ms_p50", _f),
    ("p95", "ttfs_err_ms_p95", _f),
    ("max", "ttfs_err_ms_max", _f),
    ("barge-ins", "barge_ins", str),
    ("stop |err| p50", "stop_err_ms_p50", _f),
    ("p95", "stop_err_ms_p95", _f),
    ("max", "stop_err_ms_max", _f),
    ("unknown", "unknown", str),
    ("missed", "missed", str),
    ("unmatched", "unmatched", str),
    ("unc. p95", "uncertainty_ms_p95", _f),
    ("within unc.", "within_uncertainty", _share),
)


def print_class(
    console: Any, title: str, rows: list[tuple[str, dict[str, Any]]], notes: list[str]
) -> None:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    table.add_column("", justify="left", no_wrap=True)
    for heading, _key, _cell in COLUMNS:
        table.add_column(heading, justify="right")
    for label, s in rows:
        table.add_row(label, *(cell(s[key]) for _heading, key, cell in COLUMNS))
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
        "snr10": "snr10: steady noise under the caller at 10 dB SNR (goal: 90% published, "
        "p95 <= 20 ms)",
        "snr0": "snr0: steady noise under the caller at 0 dB SNR (goal: withheld with a "
        "reason or within 30 ms)",
        "babble": "babble: babble bed under the caller at 10 dB SNR (goal: no wrong figure)",
        "busy": "busy: the clean class beside CPU-bound processes pinned to no CPU (goal: "
        "95% published, p95 <= 10 ms, 99% within a stated uncertainty of p95 <= 10 ms)",
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
        if total["agent_moved_ms_max"]:
            notes.append(
                "truth's agent edges moved to the proxy's vantage (its forwarding and the leg "
                f"to the caller): p95 {total['agent_moved_ms_p95']:.1f} ms, max "
                f"{total['agent_moved_ms_max']:.1f} ms; known within p95 "
                f"{total['truth_span_ms_p95']:.1f} ms (the agent's write)"
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
        if run.name == "busy":
            share = headline("busy", total)["published_share"]
            notes.append(f"published {_share(share)} of the figures")
        if run.name.startswith("snr"):
            figures = total["turns"] + total["barge_ins"]
            share = 100 * total["published"] / figures if figures else 0.0
            notes.append(
                f"published {total['published']} of {figures} figures ({share:.0f}%), "
                f"within 30 ms of the truth: {total['within_30ms']}"
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
