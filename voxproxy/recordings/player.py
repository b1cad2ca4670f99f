"""report.html for analysed recordings: the table, and each call's timeline that plays it.

Each call gets a timeline (inline SVG, drawn here: no chart library needed) with the
caller's and the agent's speech as the receipt has them, each turn's time to first
sound and each barge-in's stop marked, the truth beside them when the recording came
with it (a sidecar ``NAME.truth.json``, :func:`read_truth`), and a playhead; under it the
recording itself in ``<audio>`` elements.

The audio is **referenced by a relative path**, not embedded. The report then holds no
copy of the calls' content (they stay in the files the user already keeps, and the
receipts never hold any), it stays small for a folder of hour-long calls (embedded as
base64 an hour of 8 kHz stereo would add 77 MB), and the browser decodes the files as
they are (Chromium plays PCM, μ-law and A-law WAV and FLAC). Move the report and the
recordings together. A dual-channel file is one stereo element (caller left, agent
right: each side in its own ear); a mono pair is one element per file, started at its
offset. Clicking the timeline seeks there; the playhead follows the audio.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from voxproxy.core.receipt import Receipt
from voxproxy.loadgen.report import REPORT_CSS, cdf

WIDTH, LANE_H, TOP = 1000, 22, 18


@dataclass(frozen=True, slots=True)
class CallView:
    """What one call's timeline needs: its receipt, its audio files with each one's start
    on the call's timeline (ms), its label, and its truth if known."""

    label: str
    receipt: Receipt
    audio: Sequence[tuple[str, float]]  # (path, start_ms)
    truth: dict[str, object] | None = None


def truth_path(audio_path: str | Path) -> Path:
    p = Path(audio_path)
    return p.with_name(p.stem + ".truth.json")


def read_truth(audio_path: str | Path) -> dict[str, object] | None:
    """A recording's truth, if a ``NAME.truth.json`` lies beside it: ``{"turns": [{
    "caller_onset_ms", "caller_offset_ms", "agent_onset_ms", "ttfs_ms",
    "barge_onset_ms", "stop_ms"}, ...]}`` (ms from the recording's first sample; a
    scripted call's, as ``benchmarks/analyze.py`` writes them)."""
    p = truth_path(audio_path)
    if not p.is_file():
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("turns"), list) else None


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.0f} ms"


def _timeline(view: CallView, index: int) -> str:
    r = view.receipt
    dur = max(r.duration_ms, 1.0)

    def x(ms: float) -> float:
        return round(ms / dur * WIDTH, 2)

    lanes = {"caller": TOP, "agent": TOP + LANE_H + 6, "marks": TOP + 2 * (LANE_H + 6)}
    height = lanes["marks"] + 2 * LANE_H + 14
    out = [
        f"<svg class='timeline' data-call='{index}' viewBox='0 0 {WIDTH} {height}' "
        f"width='100%' preserveAspectRatio='none' role='img' "
        f"aria-label='timeline of {html.escape(view.label)}'>",
        f"<rect class='bg' x='0' y='0' width='{WIDTH}' height='{height}' fill='#fafbfe'/>",
    ]
    for second in range(0, int(dur // 1000) + 1, max(1, int(dur // 1000) // 20 or 1)):
        out.append(
            f"<line x1='{x(second * 1000)}' x2='{x(second * 1000)}' y1='12' y2='{height}' "
            f"stroke='#e4e6f0'/><text x='{x(second * 1000) + 2}' y='10' font-size='9' "
            f"fill='#889'>{second}s</text>"
        )
    for t in r.turns:
        for side, on, off, color in (
            ("caller", t.caller_onset_ms, t.caller_offset_ms, "#3b6fd8"),
            ("agent", t.agent_onset_ms, t.agent_offset_ms, "#2f9e6f"),
        ):
            if on is not None and off is not None:
                out.append(
                    f"<rect class='edge {side}' x='{x(on)}' y='{lanes[side]}' "
                    f"width='{max(x(off) - x(on), 1)}' height='{LANE_H}' fill='{color}' "
                    f"opacity='.75'><title>{side} speech {on:.1f}-{off:.1f} ms</title></rect>"
                )
        y = lanes["marks"]
        if t.ttfs_ms is not None and t.caller_offset_ms is not None:
            a, b = t.caller_offset_ms, t.caller_offset_ms + t.ttfs_ms
            out.append(
                f"<g class='mark ttfs'><line x1='{x(a)}' x2='{x(b)}' y1='{y + 6}' y2='{y + 6}' "
                f"stroke='#1d2230' stroke-width='2'/><text x='{x(a)}' y='{y + 17}' "
                f"font-size='10'>ttfs {t.ttfs_ms:.0f} ms</text></g>"
            )
        elif t.reason is not None and t.caller_offset_ms is not None:
            out.append(
                f"<text class='mark withheld' x='{x(t.caller_offset_ms)}' y='{y + 17}' "
                f"font-size='10' fill='#b3261e'>ttfs withheld: {html.escape(t.reason)}</text>"
            )
        b_in = t.barge_in
        if b_in is not None:
            y2 = y + LANE_H
            label = (
                f"stop {b_in.stop_latency_ms:.0f} ms"
                if b_in.stop_latency_ms is not None
                else f"stop withheld: {b_in.reason or b_in.outcome}"
            )
            end = b_in.stop_ms if b_in.stop_ms is not None else b_in.onset_ms
            out.append(
                f"<g class='mark stop'><line x1='{x(b_in.onset_ms)}' x2='{x(end)}' "
                f"y1='{y2 + 6}' y2='{y2 + 6}' stroke='#d9822b' stroke-width='2'/>"
                f"<text x='{x(b_in.onset_ms)}' y='{y2 + 17}' font-size='10' "
                f"fill='#a35a10'>{html.escape(label)}</text></g>"
            )
    listed = (view.truth or {}).get("turns")
    for t in listed if isinstance(listed, list) else []:
        for key, lane in (("caller_offset_ms", "caller"), ("agent_onset_ms", "agent")):
            v = t.get(key) if isinstance(t, dict) else None
            if isinstance(v, (int, float)):
                out.append(
                    f"<line class='truth' x1='{x(v)}' x2='{x(v)}' y1='{lanes[lane] - 3}' "
                    f"y2='{lanes[lane] + LANE_H + 3}' stroke='#b3261e' stroke-dasharray='3,2'>"
                    f"<title>truth {key} {v:.1f} ms</title></line>"
                )
        stop = t.get("stop_ms") if isinstance(t, dict) else None
        if isinstance(stop, (int, float)):
            out.append(
                f"<line class='truth' x1='{x(stop)}' x2='{x(stop)}' y1='{lanes['agent'] - 3}' "
                f"y2='{lanes['agent'] + LANE_H + 3}' stroke='#b3261e' stroke-dasharray='1,2'>"
                f"<title>truth stop {stop:.1f} ms</title></line>"
            )
    out.append(
        f"<text class='lane' x='{WIDTH - 4}' y='{lanes['caller'] + 15}' font-size='10' "
        "fill='#556' text-anchor='end'>caller</text>"
        f"<text class='lane' x='{WIDTH - 4}' y='{lanes['agent'] + 15}' font-size='10' "
        "fill='#556' text-anchor='end'>agent</text>"
        f"<line class='playhead' x1='0' x2='0' y1='0' y2='{height}' stroke='#b3261e' "
        "stroke-width='2'/></svg>"
    )
    return "".join(out)


def _players(view: CallView, base: Path) -> str:
    if not view.audio:  # (a capture: its timeline without a player)
        return ""
    parts = []
    for path, start_ms in view.audio:
        rel = os.path.relpath(Path(path).resolve(), base.resolve())
        src = html.escape(Path(rel).as_posix(), quote=True)
        parts.append(
            f"<audio controls preload='metadata' src='{src}' data-start-ms='{start_ms:g}'></audio>"
        )
    note = (
        "stereo: the caller in the left ear, the agent in the right"
        if len(view.audio) == 1
        else "two files, each started at its offset: play either, the other follows"
    )
    return f"<div class='players'>{''.join(parts)}<span class='muted'> {note}</span></div>"


_JS = """
document.querySelectorAll('section.call').forEach(sec => {
  const dur = parseFloat(sec.dataset.durationMs) / 1000;
  const svg = sec.querySelector('svg.timeline');
  const head = svg.querySelector('.playhead');
  const els = Array.from(sec.querySelectorAll('audio'));
  const start = el => parseFloat(el.dataset.startMs) / 1000;
  const callTime = () => { const el = els.find(e => !e.paused) || els[0];
    return el ? start(el) + el.currentTime : 0; };
  const seek = t => els.forEach(el => { el.currentTime = Math.max(0, t - start(el)); });
  const draw = () => { const t = callTime(); const xx = t / dur * WIDTH;
    head.setAttribute('x1', xx); head.setAttribute('x2', xx);
    if (els.some(e => !e.paused)) requestAnimationFrame(draw); };
  els.forEach(el => {
    el.addEventListener('play', () => { const t = start(el) + el.currentTime;
      els.forEach(o => { if (o !== el) { o.currentTime = Math.max(0, t - start(o));
        if (o.paused) o.play(); } }); requestAnimationFrame(draw); });
    el.addEventListener('pause', () => els.forEach(o => { if (o !== el && !o.paused) o.pause(); }));
    el.addEventListener('timeupdate', draw);
  });
  svg.addEventListener('click', ev => { const r = svg.getBoundingClientRect();
    seek((ev.clientX - r.left) / r.width * dur); draw(); });
});
""".replace("WIDTH", str(WIDTH))


def write_player_report(
    path: Path,
    views: Sequence[CallView],
    failures: Sequence[tuple[str, str]],
    title: str = "voxproxy analyze",
) -> None:
    """Write report.html: the calls' table, their distributions, the files skipped and
    why, and each call's timeline with its player."""
    esc = html.escape
    base = path.parent
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>",
        f"<style>{REPORT_CSS} section.call{{margin:1.6rem 0}} .players audio{{margin-right:.6rem}}"
        " svg.timeline{cursor:pointer;border:1px solid #dde}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f"<p class='muted'>{len(views)} recording(s) measured at the listener's vantage "
        "(what the caller heard, when it heard it)"
        + (f", {len(failures)} skipped" if failures else "")
        + ".</p>",
        "<table><tr><th>recording</th><th>length</th><th>turns</th><th>ttfs p50</th>"
        "<th>ttfs max</th><th>barge-ins stopped</th><th>stop max</th><th>echo</th>"
        "<th>verdict</th></tr>",
    ]
    for i, v in enumerate(views):
        r, s = v.receipt, v.receipt.summary
        echo = r.recording.echo if r.recording is not None else None
        echo_text = (
            "—"
            if echo is None or echo.leak_db is None
            else f"{echo.leak_db:.0f} dB at {echo.lag_ms:.0f} ms, {echo.action}"
        )
        verdict = r.verdict.verdict if r.verdict is not None else "—"
        cls = "ok" if verdict == "pass" else "fail"
        parts.append(
            f"<tr><td><a href='#call-{i}'>{esc(v.label)}</a></td>"
            f"<td>{r.duration_ms / 1000:.1f} s</td><td>{s.turns}</td>"
            f"<td>{_f(s.ttfs_ms_median)}</td><td>{_f(s.ttfs_ms_max)}</td>"
            f"<td>{s.barge_ins_stopped}/{s.barge_ins}</td><td>{_f(s.stop_latency_ms_max)}</td>"
            f"<td>{esc(echo_text)}</td><td class='{cls}'>{esc(verdict)}</td></tr>"
        )
    parts.append("</table>")
    if failures:
        parts.append(f"<h2>Skipped ({len(failures)})</h2><table>")
        for label, why in failures:
            parts.append(
                f"<tr><td>{esc(label)}</td><td style='text-align:left'>{esc(why)}</td></tr>"
            )
        parts.append("</table>")
    ttfs = [t.ttfs_ms for v in views for t in v.receipt.turns if t.ttfs_ms is not None]
    stops = [
        t.barge_in.stop_latency_ms
        for v in views
        for t in v.receipt.turns
        if t.barge_in is not None and t.barge_in.stop_latency_ms is not None
    ]
    parts.append("<h2>Distributions</h2><div class='grid'>")
    parts.append(f"<figure>{cdf({'ttfs': ttfs}, 'ms', 'time to first sound')}</figure>")
    parts.append(f"<figure>{cdf({'stop': stops}, 'ms', 'barge-in stop latency')}</figure>")
    parts.append("</div><h2>Calls</h2>")
    parts.append(
        "<p class='muted'>blue: caller speech · green: agent speech as the caller heard it · "
        "black: time to first sound · orange: barge-in to stop · dashed red: the truth "
        "(scripted calls) · red line: the playhead; click the timeline to seek</p>"
    )
    for i, v in enumerate(views):
        r = v.receipt
        verdict = r.verdict.verdict if r.verdict is not None else "—"
        parts.append(
            f"<section class='call' id='call-{i}' data-duration-ms='{r.duration_ms:g}'>"
            f"<h3>{esc(v.label)} · {r.duration_ms / 1000:.1f} s · verdict {esc(verdict)}</h3>"
            f"{_timeline(v, i)}{_players(v, base)}</section>"
        )
    parts.append(f"<script>{_JS}</script></body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")
