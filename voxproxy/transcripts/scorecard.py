"""The weighted scorecard: five dimensions scored 0-100, weighted, summed.

=======================  ======  ===============================================
dimension                weight  score (0-100)
=======================  ======  ===============================================
meaning-bearing terms    30      100 x (1 - term error rate), floored at 0
speaker attribution      25      100 - (cpWER - WER) in points (tcpWER when times exist)
numbers                  20      100 x matched / total
segmentation, reading    15      a human reading, from a file of human scores
raw WER                  10      100 x (1 - WER), floored at 0
=======================  ======  ===============================================

A dimension without evidence (no terms in the reference, no numbers, no speakers,
no human reading) is left out, and the weights of the others are scaled to sum to
100; the card says which were left out and why. It is never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from voxproxy.core.errors import ConfigError
from voxproxy.transcripts.score import Tally
from voxproxy.yamlmodel import parse_yaml, validate

WEIGHTS: dict[str, int] = {
    "terms": 30,
    "speaker_attribution": 25,
    "numbers": 20,
    "segmentation": 15,
    "raw_wer": 10,
}
TITLES = {
    "terms": "meaning-bearing terms",
    "speaker_attribution": "speaker attribution",
    "numbers": "numbers",
    "segmentation": "segmentation and readability",
    "raw_wer": "raw WER",
}


class HumanScores(BaseModel):
    """What people who read the raw output scored (0-100). YAML or JSON::

    segmentation: 72        # sentence breaks, merged turns, paragraphs to re-read
    readers: 2
    note: two readers who did not attend the meeting, per minute, then averaged
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    segmentation: float = Field(ge=0, le=100)
    readers: int | None = Field(default=None, ge=1)
    note: str = ""


def load_human_scores(path: str | Path) -> HumanScores:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read human scores: {exc}") from None
    return validate(HumanScores, parse_yaml(text, str(path)), str(path), "human scores")


@dataclass(frozen=True)
class Attribution:
    """Speaker-attributed error against plain WER over the same words."""

    metric: str  # "cpWER" or "tcpWER"
    wer: float
    cp_wer: float
    reference_speakers: int
    hypothesis_speakers: int
    collar_s: float | None = None

    @property
    def gap_points(self) -> float:
        return max(0.0, 100.0 * (self.cp_wer - self.wer))

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "wer": round(self.wer, 4),
            "cp_wer": round(self.cp_wer, 4),
            "gap_points": round(self.gap_points, 2),
            "reference_speakers": self.reference_speakers,
            "hypothesis_speakers": self.hypothesis_speakers,
            "collar_s": self.collar_s,
        }


@dataclass(frozen=True)
class Dimension:
    key: str
    weight: int
    score: float | None
    detail: str
    left_out: str | None = None  # why there is no score


def _clip(x: float) -> float:
    return max(0.0, min(100.0, x))


def _missing(name: str, why: str) -> Dimension:
    return Dimension(name, WEIGHTS[name], None, "", why)


def _scored(name: str, score: float, detail: str) -> Dimension:
    return Dimension(name, WEIGHTS[name], _clip(score), detail)


def _by_error_rate(
    name: str, rate: float | None, missing: str, what: str, counts: str
) -> Dimension:
    """100 less the error rate in percent; ``missing`` when there is no rate."""
    if rate is None:
        return _missing(name, missing)
    return _scored(name, 100 * (1 - rate), f"{what} {100 * rate:.1f} % {counts}")


def scorecard(
    tally: Tally,
    attribution: Attribution | None = None,
    attribution_missing: str = "no speaker labels on both sides (plain text)",
    human: HumanScores | None = None,
) -> dict[str, Any]:
    """The card as a dict: each dimension, the weights used, the total and a note."""
    dims: list[Dimension] = []
    ter = tally.term_error_rate
    terms = f"({tally.term_errors} errors on {tally.term_total} term tokens)"
    dims.append(
        _by_error_rate(
            "terms", ter, "no meaning-bearing terms in the reference", "term error rate", terms
        )
    )
    if attribution is None:
        dims.append(_missing("speaker_attribution", attribution_missing))
    else:
        a = attribution
        dims.append(
            _scored(
                "speaker_attribution",
                100 - a.gap_points,
                f"{a.metric} {100 * a.cp_wer:.1f} % − WER {100 * a.wer:.1f} % = "
                f"{a.gap_points:.1f} points ({a.reference_speakers} reference, "
                f"{a.hypothesis_speakers} hypothesis speakers)",
            )
        )
    dims.append(
        _missing("numbers", "no numbers in the reference")
        if tally.numbers_total == 0
        else _scored(
            "numbers",
            100 * tally.numbers_matched / tally.numbers_total,
            f"{tally.numbers_text} exactly right",
        )
    )
    dims.append(
        _missing(
            "segmentation",
            "needs a human reading: give a file of human scores (segmentation: 0-100)",
        )
        if human is None
        else _scored(
            "segmentation",
            human.segmentation,
            "human reading"
            + (f" by {human.readers} readers" if human.readers else "")
            + (f": {human.note}" if human.note else ""),
        )
    )
    wer = tally.wer
    counts = f"({tally.substitutions} S, {tally.deletions} D, {tally.insertions} I"
    counts += f" on {tally.words} words)"
    dims.append(_by_error_rate("raw_wer", wer, "empty reference", "WER", counts))
    used = [d for d in dims if d.score is not None]
    weight_sum = sum(d.weight for d in used)
    total = None
    weights_used: dict[str, float] = {}
    if weight_sum:
        weights_used = {d.key: round(100 * d.weight / weight_sum, 2) for d in used}
        total = sum(d.weight * (d.score or 0.0) for d in used) / weight_sum
    left = [d for d in dims if d.score is None]
    note = ""
    if left:
        names = "; ".join(f"{TITLES[d.key]} ({d.left_out})" for d in left)
        note = (
            f"left out: {names}. The other weights were scaled to sum to 100."
            if used
            else f"nothing to score: {names}."
        )
    return {
        "dimensions": {
            d.key: {
                "title": TITLES[d.key],
                "weight": d.weight,
                "weight_used": weights_used.get(d.key, 0.0),
                "score": None if d.score is None else round(d.score, 1),
                "detail": d.detail,
                "left_out": d.left_out,
            }
            for d in dims
        },
        "total": None if total is None else round(total, 1),
        "note": note,
        "attribution": None if attribution is None else attribution.to_dict(),
    }
