"""``voxproxy transcripts score``: score what an agent heard, with the errors that matter first.

Over a load run's ``results.json`` (every replayed turn's reference and the agent's
reported transcript), or over a reference file and a hypothesis file (plain text, or
SegLST JSON with speakers and times). Prints the weighted scorecard, the numbers
("13 of 15"), the meaning-bearing term error rate and the words the agent did not
recognize, most frequent first; ``--log`` appends a row to the user's table of runs
and calls out a move of more than 5 points in the term error rate.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "transcripts",
        help="score what the agent heard: WER, meaning-bearing terms, numbers, scorecard",
        description="Transcript scoring. See 'voxproxy transcripts score --help'.",
    )
    from voxproxy.commands.parsing import print_help

    p.set_defaults(func=print_help(p))  # `voxproxy transcripts` alone: its help
    tsub = p.add_subparsers(dest="transcripts_command")
    s = tsub.add_parser(
        "score",
        help="score a load run's results.json, or a reference against a hypothesis",
        description="Score the agent's transcripts: WER (substitutions, deletions, "
        "insertions), the meaning-bearing term error rate, exact numbers, speaker "
        "attribution (cpWER/tcpWER with MeetEval, SegLST inputs) and the weighted "
        "scorecard (terms 30, speaker attribution 25, numbers 20, segmentation 15, "
        "raw WER 10). Both sides are normalized by one written policy, recorded with "
        "the score.",
    )
    s.add_argument("results", nargs="?", metavar="RESULTS_JSON", help="a load run's results.json")
    s.add_argument("--ref", metavar="FILE", help="reference: text file, or SegLST .json")
    s.add_argument("--hyp", metavar="FILE", help="hypothesis: text file, or SegLST .json")
    s.add_argument(
        "--policy", metavar="YAML", help="normalization policy (default: the embedded one)"
    )
    s.add_argument(
        "--terms",
        action="append",
        default=[],
        metavar="YAML",
        help="meaning-bearing term list (repeatable; default: the embedded negations list)",
    )
    s.add_argument(
        "--language", default=None, help="language of both sides (default: the policy's)"
    )
    s.add_argument(
        "--human-scores",
        metavar="FILE",
        help="YAML/JSON with 'segmentation: 0-100' from human readers (otherwise left out)",
    )
    s.add_argument(
        "--collar", type=float, default=5.0, help="tcpWER collar in seconds (default: 5)"
    )
    s.add_argument("--model-version", default=None, help="the agent's exact model version string")
    s.add_argument(
        "--log",
        metavar="PATH",
        help="append a row to this run log (.csv, or .jsonl for JSON lines)",
    )
    s.add_argument("--json", metavar="PATH", help="write the full score as JSON here")
    s.add_argument("--top", type=int, default=20, help="rows of the not-recognized list")
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from voxproxy.core.errors import ConfigError
    from voxproxy.extras import require
    from voxproxy.transcripts.score import Scoring
    from voxproxy.transcripts.scorecard import load_human_scores

    require("transcripts", "voxproxy transcripts")
    if args.results is not None and (args.ref or args.hyp):
        raise ConfigError("give either RESULTS_JSON or --ref and --hyp, not both")
    if args.results is None and not (args.ref and args.hyp):
        raise ConfigError("give a load run's results.json, or --ref and --hyp")
    if args.log and not args.model_version:
        raise ConfigError("--log needs --model-version (the agent's exact model version string)")
    if args.top < 1:
        raise ConfigError("--top must be at least 1")
    scoring = Scoring.load(args.policy, args.terms)
    if args.language is not None and args.language not in scoring.policy.languages:
        raise ConfigError(
            f"--language {args.language!r}: the policy knows {', '.join(scoring.policy.languages)}"
        )
    human = load_human_scores(args.human_scores) if args.human_scores else None
    if args.results is not None:
        report = score_results(Path(args.results), scoring, human, args.language, args.top)
    else:
        report = score_files(
            Path(args.ref), Path(args.hyp), scoring, human, args.language, args.collar, args.top
        )
    report["model_version"] = args.model_version
    callouts: list[str] = []
    if args.log:
        from voxproxy.transcripts.runlog import append_row, make_row

        date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        row = make_row(
            report["scorecard"],
            report["figures"],
            args.model_version,
            date,
            scoring.labels,
            report["source"],
        )
        callouts = append_row(Path(args.log), row)
        report["log"] = {"path": args.log, "row": row, "callouts": callouts}
    if args.json:
        try:
            Path(args.json).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
        except OSError as exc:
            raise ConfigError(f"{args.json}: cannot write: {exc}") from None
    _print(report, callouts)
    return 0


def score_results(
    path: Path, scoring: Any, human: Any, language: str | None, top: int
) -> dict[str, Any]:
    """Re-score every turn of a results.json with ``scoring`` (its texts are kept there)."""
    from voxproxy.core.errors import ConfigError
    from voxproxy.transcripts.loadrun import LOAD_ATTRIBUTION_MISSING, SCORED
    from voxproxy.transcripts.score import Tally
    from voxproxy.transcripts.scorecard import scorecard

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        calls = data["calls"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a load run's results.json: {exc}") from None
    groups: dict[str, list[dict[str, Any]]] = {}
    counts = {"scored": 0, "no_hypothesis": 0, "not_reported": 0, "no_reference": 0, "none": 0}
    for call in calls:
        for turn in call.get("turns", []):
            tx = turn.get("transcript")
            if not isinstance(tx, dict):
                counts["none"] += 1
                continue
            status = tx.get("status")
            counts[status if status in counts else "none"] += 1
            if status not in SCORED:
                continue
            entry = scoring.score(tx["reference"], tx.get("hypothesis") or "", language).to_dict()
            groups.setdefault(str(call.get("scenario")), []).append(entry)
    every = [e for es in groups.values() for e in es]
    if not every:
        raise ConfigError(
            f"{path}: no turn has a transcript to score (the agent reported none, or the "
            "clips have no reference text)"
        )
    tally = Tally.of(every)
    per_scenario = {}
    for name, entries in groups.items():
        t = Tally.of(entries)
        card = scorecard(t, None, LOAD_ATTRIBUTION_MISSING, human)
        per_scenario[name] = {"figures": t.to_dict(top), "total": card["total"]}
    return {
        "source": str(path),
        **scoring.labels,
        "turns": counts,
        "figures": tally.to_dict(top),
        "scorecard": scorecard(tally, None, LOAD_ATTRIBUTION_MISSING, human),
        "per_scenario": per_scenario,
    }


def score_files(
    ref_path: Path,
    hyp_path: Path,
    scoring: Any,
    human: Any,
    language: str | None,
    collar: float,
    top: int,
) -> dict[str, Any]:
    from voxproxy.transcripts.inputs import attribution, read_transcript
    from voxproxy.transcripts.score import Tally
    from voxproxy.transcripts.scorecard import scorecard
    from voxproxy.transcripts.terms import split_markup

    ref = read_transcript(ref_path)
    hyp = read_transcript(hyp_path)
    lang = language or scoring.normalizer.language_of(split_markup(ref.text())[0])
    sessions = ref.sessions() if ref.seglst and hyp.seglst else [None]
    entries = []
    for session in sessions:
        entries.append(scoring.score(ref.text(session), hyp.text(session), lang).to_dict())
    tally = Tally.of(entries)
    attr = attribution(ref, hyp, scoring, lang, collar)
    missing = (
        "no speaker labels on both sides (plain text, or SegLST without speakers)"
        if attr is None
        else ""
    )
    return {
        "source": f"{ref_path} vs {hyp_path}",
        **scoring.labels,
        "language": lang,
        "figures": tally.to_dict(top),
        "scorecard": scorecard(tally, attr, missing, human),
    }


def _print(report: dict[str, Any], callouts: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 110))
    card = report["scorecard"]
    fig = report["figures"]
    table = Table(title=f"transcript scorecard · {report['source']}")
    for col in ("dimension", "weight", "used", "score", "evidence"):
        table.add_column(col, justify="left" if col in ("dimension", "evidence") else "right")
    for d in card["dimensions"].values():
        score = "left out" if d["score"] is None else f"{d['score']:.1f}"
        table.add_row(
            d["title"],
            str(d["weight"]),
            f"{d['weight_used']:.1f}" if d["score"] is not None else "—",
            score,
            d["detail"] or d["left_out"] or "",
        )
    console.print(table)
    total = card["total"]
    console.print(f"[b]weighted total: {'—' if total is None else f'{total:.1f} / 100'}[/b]")
    if card["note"]:
        console.print(f"[dim]{card['note']}[/dim]")
    wer = fig["wer"]
    ter = fig["term_error_rate"]
    console.print(
        f"WER {'—' if wer is None else f'{100 * wer:.1f} %'} "
        f"({fig['substitutions']} substitutions, {fig['deletions']} deletions, "
        f"{fig['insertions']} insertions, {fig['words']} reference words) · "
        f"meaning-bearing term error rate {'—' if ter is None else f'{100 * ter:.1f} %'} "
        f"({fig['terms']['errors']} errors on {fig['terms']['total']} term tokens) · "
        f"numbers {fig['numbers']['text']} exactly right"
    )
    for n in fig["numbers"]["missed"]:
        console.print(f"  number {n['reference']} heard as {n['heard'] or '(nothing)'}")
    rows = fig["not_recognized"]
    if rows:
        t = Table(title="not recognized (reference words the agent missed, most frequent first)")
        t.add_column("word")
        t.add_column("times", justify="right")
        t.add_column("hint")
        for r in rows:
            t.add_row(r["word"], str(r["count"]), r["hint"] or "")
        console.print(t)
    for name, s in report.get("per_scenario", {}).items():
        f = s["figures"]
        console.print(
            f"  {name}: WER {_pct(f['wer'])}, terms {_pct(f['term_error_rate'])}, "
            f"numbers {f['numbers']['text']}, total {s['total']}"
        )
    console.print(f"[dim]normalization {report['policy']} · terms {report['term_list']}[/dim]")
    for c in callouts:
        console.print(f"[b red]call-out:[/b red] {c}")


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"
