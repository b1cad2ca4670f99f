"""The run log: one row per scoring run, in a table the user keeps, so runs compare.

A ``.jsonl`` / ``.json`` path gets JSON lines; anything else gets CSV (with a header
when the file is new). Each row: the date, the agent's model version string as the
user gave it, the five dimension scores (empty when left out), the weighted total,
the term error rate and WER in percent, and the policy and term list labels. A move
of more than :data:`TERM_RATE_ALERT_POINTS` in the term error rate against the
previous row is called out: investigate before migrating.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from voxproxy.core.errors import ConfigError

TERM_RATE_ALERT_POINTS = 5.0
COLUMNS = (
    "date",
    "model_version",
    "terms",
    "speaker_attribution",
    "numbers",
    "segmentation",
    "raw_wer",
    "weighted_total",
    "term_error_rate_pct",
    "wer_pct",
    "numbers_text",
    "policy",
    "term_list",
    "source",
)


def _is_jsonl(path: Path) -> bool:
    return path.suffix.lower() in (".jsonl", ".json", ".ndjson")


def read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the run log: {exc}") from None
    if _is_jsonl(path):
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    raise ConfigError(f"{path}:{n}: not a JSON line") from None
        return rows
    return list(csv.DictReader(text.splitlines()))


def _num(value: object) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def make_row(
    card: dict[str, Any],
    figures: dict[str, Any],
    model_version: str,
    date: str,
    labels: dict[str, str],
    source: str,
) -> dict[str, Any]:
    dims = card["dimensions"]
    ter = figures.get("term_error_rate")
    wer = figures.get("wer")
    return {
        "date": date,
        "model_version": model_version,
        **{k: dims[k]["score"] for k in dims},
        "weighted_total": card["total"],
        "term_error_rate_pct": None if ter is None else round(100 * ter, 2),
        "wer_pct": None if wer is None else round(100 * wer, 2),
        "numbers_text": figures["numbers"]["text"],
        "policy": labels["policy"],
        "term_list": labels["term_list"],
        "source": source,
    }


def compare(previous: dict[str, Any] | None, row: dict[str, Any]) -> list[str]:
    """Call-outs against the previous row (empty when nothing moved enough)."""
    if previous is None:
        return []
    out: list[str] = []
    before = _num(previous.get("term_error_rate_pct"))
    now = _num(row.get("term_error_rate_pct"))
    if before is not None and now is not None and abs(now - before) > TERM_RATE_ALERT_POINTS:
        way = "rose" if now > before else "fell"
        out.append(
            f"the meaning-bearing term error rate {way} {abs(now - before):.1f} points "
            f"({before:.1f} % -> {now:.1f} %) since the run of {previous.get('date')} "
            f"({previous.get('model_version')}): investigate before migrating"
        )
    if previous.get("policy") and previous.get("policy") != row.get("policy"):
        out.append(
            f"the normalization policy changed ({previous.get('policy')} -> {row.get('policy')}):"
            " scores are not comparable across policies"
        )
    return out


def append_row(path: Path, row: dict[str, Any]) -> list[str]:
    """Append ``row`` to the log at ``path``; returns the call-outs against the previous row."""
    rows = read_rows(path)
    callouts = compare(rows[-1] if rows else None, row)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if _is_jsonl(path):
            with path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        else:
            new = not path.exists() or path.stat().st_size == 0
            header: list[str] = list(COLUMNS)
            if not new:
                with path.open(encoding="utf-8") as f:
                    header = next(csv.reader(f), list(COLUMNS))
                needed = ("date", "model_version", "weighted_total")
                missing = [c for c in needed if c not in header]
                if missing:
                    raise ConfigError(f"{path}: the run log's header lacks {', '.join(missing)}")
            with path.open("a", encoding="utf-8", newline="") as f:
                w = csv.DictWriter(f, fieldnames=header, extrasaction="ignore")
                if new:
                    w.writeheader()
                w.writerow({k: "" if v is None else v for k, v in row.items()})
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write the run log: {exc}") from None
    return callouts
