"""report.html: one self-contained page a team can paste into a review.

Distributions as CDF plots, a table per scenario, the failures, and a timeline
per call (caller speech, agent speech, barge-ins, flushes, noises and tool
calls on lanes). Plots are drawn with matplotlib (the ``report`` extra) and embedded
as SVG, so the page needs nothing else; without matplotlib the page has its tables
and says which ``pip install`` draws the charts.
"""

from __future__ import annotations

import html
import io
from pathlib import Path
from typing import Any

import numpy as np

from voxproxy.core.timebase import NS_PER_MS
from voxproxy.loadgen.results import CallOutcome, overload_warning, problem_lines
from voxproxy.transcripts.html import transcripts_section

MAX_TIMELINES = 24

REPORT_CSS = " ".join(
    [
        "body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;",
        "color:#1d2230;line-height:1.4}h1{margin-bottom:.2rem}",
        "h2{margin-top:2.2rem;border-bottom:1px solid #dde}",
        "table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem}",
        "td,th{padding:.25rem .6rem;border-bottom:1px solid #eef;text-align:right}",
        "th{background:#f4f5fa}td:first-child,th:first-child{text-align:left}",
        ".muted{color:#667}.fail{color:#b3261e}.ok{color:#1b7f3b}",
        ".grid{display:flex;flex-wrap:wrap;gap:1rem}.grid figure{margin:0}",
        "figcaption{font-size:.85rem;color:#556}td{white-space:nowrap}",
    ]
)


def _n(count: int, noun: str) -> str:
    """``1 missed response``, ``2 missed responses``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend, or None without the ``report`` extra."""
    from voxproxy.extras import has

    if not has("report"):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _no_chart() -> str:
    from voxproxy.extras import install_line

    line = install_line("report")
    return f"<p class='muted'>(chart left out: matplotlib is not installed; {line})</p>"


def _svg(fig: Any) -> str:
    plt = _pyplot()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.find("<svg") :]


def cdf(series: dict[str, list[float]], xlabel: str, title: str) -> str:
    plt = _pyplot()
    if plt is None:
        return _no_chart()
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    drawn = False
    for label, values in series.items():
        if not values:
            continue
        x = np.sort(np.array(values, dtype=float))
        y = np.arange(1, x.size + 1) / x.size
        ax.step(x, y, where="post", label=f"{label} (n={x.size})")
        drawn = True
    ax.set_xlabel(xlabel)
    ax.set_ylim(0, 1.02)  # a CDF starts at 0: the axis does too
    ax.set_ylabel("fraction of turns")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if drawn:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    return _svg(fig)


def _timeline(o: CallOutcome, result: dict[str, Any]) -> str:
    rec = o.record
    t0 = rec.t0_ns

    def ms(ns: int) -> float:
        return (ns - t0) / NS_PER_MS / 1000.0

    lanes = ["caller speech", "caller noise", "agent speech", "events"]
    plt = _pyplot()
    if plt is None:
        return _no_chart()
    fig, ax = plt.subplots(figsize=(10.5, 1.9))
    for s in rec.speech:
        ax.broken_barh(
            [(ms(s.onset_ns), ms(s.offset_ns) - ms(s.onset_ns))],
            (3, 0.8),
            color="#d9822b" if s.barge_in else "#3b6fd8",
        )
    for n in rec.noises:
        ax.broken_barh(
            [(ms(n.onset_ns), max(ms(n.offset_ns) - ms(n.onset_ns), 0.02))],
            (2, 0.8),
            color="#9a9aa8",
        )
    for a, b in rec.agent_spurts:
        ax.broken_barh([(ms(a), ms(b) - ms(a))], (1, 0.8), color="#2f9e6f")
    for f in rec.flushes:
        ax.plot([ms(f)], [0.4], marker="v", color="#b3261e")
    for turn in result["turns"]:  # time to first sound: the caller's end -> the agent's sound
        end, ttfs = turn["truth"]["caller_offset_ms"], turn["truth"]["ttfs_ms"]
        if end is None or ttfs is None:
            continue
        a, b = end / 1000, (end + ttfs) / 1000
        ax.annotate(
            "",
            xy=(b, 1.9),
            xytext=(a, 1.9),
            arrowprops={"arrowstyle": "|-|,widthA=0.25,widthB=0.25", "color": "#1d2230"},
        )
        ax.text((a + b) / 2, 2.0, f"ttfs {ttfs:.0f} ms", ha="center", va="bottom", fontsize=7)
    for turn in result["turns"]:  # the step's thresholds: dashed, where the limit falls
        limits = turn.get("limits") or {}
        truth = turn["truth"]
        for start, limit in (
            (truth["caller_offset_ms"], limits.get("ttfs_ms_max")),
            (
                truth["caller_onset_ms"] if turn.get("barge_in") else None,
                limits.get("stop_latency_ms_max"),
            ),
        ):
            if start is not None and limit is not None:
                x = (start + limit) / 1000
                ax.plot([x, x], [0.9, 1.9], linestyle="--", linewidth=0.9, color="#b3261e")
    receipt = o.receipt
    shift = None
    if receipt is not None and rec.speech:
        first = next((t for t in receipt.turns if t.caller_onset_ms is not None), None)
        if first is not None and first.caller_onset_ms is not None:
            shift = first.caller_onset_ms / 1000 - ms(rec.speech[0].onset_ns)
    if receipt is not None and shift is not None:
        for tool in receipt.tools:
            start = tool.started_ms / 1000 - shift
            end = (tool.finished_ms / 1000 - shift) if tool.finished_ms is not None else start + 0.1
            ax.broken_barh([(start, max(end - start, 0.02))], (0.05, 0.3), color="#7e57c2")
        for t in receipt.turns:
            if t.barge_in is not None:
                ax.plot(
                    [t.barge_in.onset_ms / 1000 - shift],
                    [3.9],
                    marker="|",
                    markersize=12,
                    color="#d9822b",
                )
    ax.set_yticks([3.4, 2.4, 1.4, 0.4], lanes, fontsize=8)
    ax.set_xlabel("seconds from the caller's first frame", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.set_ylim(0, 4.2)
    ax.grid(axis="x", alpha=0.3)
    status = "ok" if result["passed"] else "failed"
    verdict = ""
    if receipt is not None and receipt.verdict is not None:
        verdict = f" · verdict {receipt.verdict.verdict}"
    ax.set_title(f"{o.scenario.name} #{o.index} · {o.dialect} · {status}{verdict}", fontsize=9)
    return _svg(fig)


def write_report(
    path: Path,
    meta: dict[str, Any],
    results: list[dict[str, Any]],
    summary: dict[str, Any],
    calls: list[CallOutcome],
) -> None:
    esc = html.escape
    parts: list[str] = [
        "<!doctype html><html><head><meta charset='utf-8'><title>voxproxy load report</title>",
        f"<style>{REPORT_CSS}</style></head><body>",
        "<h1>voxproxy load report</h1>",
        f"<p class='muted'>target {esc(str(meta['target']))} · dialect {esc(str(meta['dialect']))}"
        + (
            f" · {meta['calls']} calls, {meta['concurrency']} at a time"
            if meta.get("arrivals_over_s") is None
            else f" · {meta['calls']} calls arriving over {meta['arrivals_over_s']:g} s, at "
            f"most {meta['concurrency']} in flight"
        )
        + " · finished "
        f"{esc(str(meta['finished_at']))}</p>",
    ]
    a = summary["all"]
    if meta.get("interrupted"):
        parts.append(
            f"<p class='fail'><b>interrupted: {meta['finished_calls']} of {meta['calls']} calls "
            "had finished; this report is theirs</b></p>"
        )
    for line in problem_lines(summary):
        parts.append(f"<p class='fail'><b>{esc(line)}</b></p>")
    warning = overload_warning(summary)
    if warning is not None:
        parts.append(f"<p class='fail'><b>{esc(warning)}</b></p>")
    failed = a["failed_calls"]
    parts.append(
        f"<p class='{'fail' if failed else 'ok'}'><b>{a['calls'] - failed} of {a['calls']} calls "
        f"met every expectation</b>; {_n(a['turns'], 'turn')}, "
        f"{_n(a['barge_ins']['total'], 'barge-in')}, "
        f"{_n(a['missed_responses'], 'missed response')}, "
        f"{_n(a['false_barge_ins'], 'yield')} to noise.</p>"
    )
    parts.append(
        "<h2>By scenario</h2><table><tr><th>scenario</th><th>calls</th><th>failed</th>"
        "<th>ttfs p50</th><th>ttfs p95</th><th>ttfs max</th><th>stop p50</th>"
        "<th>stop p95</th><th>barge-ins stopped</th><th>missed</th><th>reprompts</th>"
        "<th>false barge-ins</th><th>proxy |err| p95 (ttfs / stop)</th></tr>"
    )

    def f(x: Any) -> str:
        return "—" if x is None else f"{x:.0f} ms"

    for name, s in summary.items():
        if name == "all":
            continue
        e1, e2 = s["proxy_ttfs_abs_error_ms"]["p95"], s["proxy_stop_abs_error_ms"]["p95"]
        errs = "—" if e1 is None else f"{e1:.1f} / {'—' if e2 is None else f'{e2:.1f}'} ms"
        parts.append(
            f"<tr><td>{esc(name)}</td><td>{s['calls']}</td><td>{s['failed_calls']}</td>"
            f"<td>{f(s['ttfs_ms']['p50'])}</td><td>{f(s['ttfs_ms']['p95'])}</td>"
            f"<td>{f(s['ttfs_ms']['max'])}</td><td>{f(s['stop_latency_ms']['p50'])}</td>"
            f"<td>{f(s['stop_latency_ms']['p95'])}</td>"
            f"<td>{s['barge_ins']['stopped']}/{s['barge_ins']['total']}</td>"
            f"<td>{s['missed_responses']}</td><td>{s['reprompts']}</td>"
            f"<td>{s['false_barge_ins']}</td><td>{errs}</td></tr>"
        )
    parts.append("</table>")
    parts.append(transcripts_section(summary))
    by_scn: dict[str, list[float]] = {}
    stops: dict[str, list[float]] = {}
    err_t: list[float] = []
    err_s: list[float] = []
    for r in results:
        for t in r["turns"]:
            if t["truth"]["ttfs_ms"] is not None:
                by_scn.setdefault(r["scenario"], []).append(t["truth"]["ttfs_ms"])
            if t["barge_in"] and t["truth"]["stop_latency_ms"] is not None:
                stops.setdefault(r["scenario"], []).append(t["truth"]["stop_latency_ms"])
            if t["diff"]["ttfs_ms"] is not None:
                err_t.append(abs(t["diff"]["ttfs_ms"]))
            if t["diff"]["stop_latency_ms"] is not None:
                err_s.append(abs(t["diff"]["stop_latency_ms"]))
    parts.append("<h2>Distributions</h2><div class='grid'>")
    parts.append(f"<figure>{cdf(by_scn, 'ms', 'time to first sound (caller truth)')}</figure>")
    parts.append(f"<figure>{cdf(stops, 'ms', 'barge-in stop latency (caller truth)')}</figure>")
    if err_t or err_s:
        parts.append(
            "<figure>"
            + cdf(
                {"ttfs": err_t, "stop latency": err_s},
                "|proxy − truth| ms",
                "the proxy's error against the caller's truth",
            )
            + "</figure>"
        )
    parts.append("</div>")
    failures = [r for r in results if r["failures"]]
    parts.append(f"<h2>Failures ({len(failures)} calls)</h2>")
    if failures:
        parts.append("<table><tr><th>call</th><th>what failed</th></tr>")
        for r in failures[:200]:
            parts.append(
                f"<tr><td>{esc(r['scenario'])} #{r['index']}</td>"
                f"<td style='text-align:left'>{esc('; '.join(r['failures']))}</td></tr>"
            )
        parts.append("</table>")
    else:
        parts.append("<p class='ok'>none</p>")
    order = sorted(range(len(calls)), key=lambda i: (results[i]["passed"], i))
    shown = order[:MAX_TIMELINES]
    parts.append(f"<h2>Timelines ({len(shown)} of {len(calls)} calls, failures first)</h2>")
    parts.append(
        "<p class='muted'>blue: caller speech · orange: caller barge-in · grey: "
        "caller noise · green: agent speech as the caller heard it · red ▼: flush · "
        "purple: tool calls (from the receipt) · |—|: each turn's ttfs · dashed red: "
        "where a step's ttfs or stop threshold falls</p>"
    )
    for i in shown:
        parts.append(f"<figure>{_timeline(calls[i], results[i])}</figure>")
    parts.append("</body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")
