"""The transcript section of a load run's report.html (plain HTML, no scripts)."""

from __future__ import annotations

import html
from typing import Any

from voxproxy.transcripts.scorecard import TITLES

MAX_ROWS = 25


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.0f} ms"


def transcripts_section(summary: dict[str, Any]) -> str:
    """What the agent heard: per scenario beside its latency, the scorecard of the run,
    the numbers it got wrong and the words it did not recognize."""
    esc = html.escape
    every = summary.get("all", {}).get("transcripts")
    parts = ["<h2>What the agent heard</h2>"]
    if not isinstance(every, dict) or every.get("scorecard") is None:
        turns = every.get("turns", {}) if isinstance(every, dict) else {}
        why = (
            "the agent reported no transcript of the caller's speech"
            if turns.get("not_reported")
            else "no turn had both a reference text and the agent's transcript"
        )
        parts.append(f"<p class='muted'>Not scored: {esc(why)}.</p>")
        return "\n".join(parts)
    parts.append(
        "<p class='muted'>Each caller turn's reference text against the first final user "
        "transcript the agent reported after the turn's speech ended; normalized by "
        f"{esc(', '.join(every['policy']))}; terms from {esc(', '.join(every['term_list']))}."
        " Scores are in results.json and summary.json, never in receipts.</p>"
    )
    parts.append(
        "<table><tr><th>scenario</th><th>ttfs p50</th><th>ttfs p95</th><th>stop p95</th>"
        "<th>turns scored</th><th>WER</th><th>S / D / I</th><th>term error rate</th>"
        "<th>numbers right</th><th>scorecard</th></tr>"
    )
    for name, s in summary.items():
        t = s.get("transcripts") if isinstance(s, dict) else None
        if name == "all" or not isinstance(t, dict):
            continue
        card = t.get("scorecard")
        total = "—" if card is None or card["total"] is None else f"{card['total']:.1f}"
        scored = t["turns"]["scored"] + t["turns"]["no_hypothesis"]
        parts.append(
            f"<tr><td>{esc(name)}</td><td>{_ms(s['ttfs_ms']['p50'])}</td>"
            f"<td>{_ms(s['ttfs_ms']['p95'])}</td><td>{_ms(s['stop_latency_ms']['p95'])}</td>"
            f"<td>{scored}</td><td>{_pct(t['wer'])}</td>"
            f"<td>{t['substitutions']} / {t['deletions']} / {t['insertions']}</td>"
            f"<td>{_pct(t['term_error_rate'])}</td><td>{esc(t['numbers']['text'])}</td>"
            f"<td>{total}</td></tr>"
        )
    parts.append("</table>")
    card = every["scorecard"]
    total = card["total"]
    parts.append(
        f"<h3>Scorecard, all calls: {'—' if total is None else f'{total:.1f} / 100'}</h3>"
        "<table><tr><th>dimension</th><th>weight</th><th>weight used</th><th>score</th>"
        "<th>evidence</th></tr>"
    )
    for key, d in card["dimensions"].items():
        score = "left out" if d["score"] is None else f"{d['score']:.1f}"
        used = "—" if d["score"] is None else f"{d['weight_used']:.1f}"
        parts.append(
            f"<tr><td>{esc(TITLES.get(key, key))}</td><td>{d['weight']}</td><td>{used}</td>"
            f"<td>{score}</td><td style='text-align:left'>"
            f"{esc(d['detail'] or d['left_out'] or '')}</td></tr>"
        )
    parts.append("</table>")
    if card["note"]:
        parts.append(f"<p class='muted'>{esc(card['note'])}</p>")
    turns = every["turns"]
    if turns["no_hypothesis"] or turns["not_reported"] or every.get("unmatched_transcripts"):
        parts.append(
            f"<p>{turns['no_hypothesis']} turn(s) with no transcript from the agent (scored as "
            f"all words missed); {turns['not_reported']} turn(s) in calls where the agent "
            f"reported nothing (not scored); {every.get('unmatched_transcripts', 0)} "
            "transcript(s) that matched no caller turn.</p>"
        )
    missed_numbers = every["numbers"]["missed"]
    parts.append(f"<h3>Numbers: {esc(every['numbers']['text'])} exactly right</h3>")
    if missed_numbers:
        parts.append("<table><tr><th>said</th><th>heard</th></tr>")
        for n in missed_numbers[:MAX_ROWS]:
            parts.append(
                f"<tr><td>{esc(n['reference'])}</td><td>{esc(n['heard'] or '(nothing)')}</td></tr>"
            )
        parts.append("</table>")
    rows = every["not_recognized"]
    parts.append("<h3>Not recognized (reference words missed, most frequent first)</h3>")
    if rows:
        parts.append("<table><tr><th>word</th><th>times</th><th>hint</th></tr>")
        for r in rows[:MAX_ROWS]:
            parts.append(
                f"<tr><td>{esc(r['word'])}</td><td>{r['count']}</td>"
                f"<td style='text-align:left'>{esc(r['hint'] or '')}</td></tr>"
            )
        parts.append("</table>")
    else:
        parts.append("<p class='ok'>none</p>")
    return "\n".join(parts)
