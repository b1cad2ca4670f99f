"""voxproxy.transcripts.scorecard: the weighted scorecard over a tally (every dimension,
renormalized over what could be scored and saying why), and human scores validated. The
source articles' worked examples: test_articles.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from voxproxy.core.errors import ConfigError
from voxproxy.transcripts import Scoring, Tally
from voxproxy.transcripts.scorecard import WEIGHTS, Attribution, load_human_scores, scorecard


def test_scorecard_with_every_dimension(scoring: Scoring, tmp_path: Path) -> None:
    human = tmp_path / "readers.yaml"
    human.write_text("segmentation: 80\nreaders: 2\nnote: per minute, averaged\n")
    tally = Tally.of([scoring.score("[[Helios]] ships in Q3", "Helios ships in Q3").to_dict()])
    attr = Attribution("cpWER", wer=0.10, cp_wer=0.16, reference_speakers=4, hypothesis_speakers=3)
    card = scorecard(tally, attr, human=load_human_scores(human))
    d = card["dimensions"]
    assert [d[k]["weight"] for k in WEIGHTS] == [30, 25, 20, 15, 10]
    assert d["speaker_attribution"]["score"] == 94.0  # 100 - (16 - 10) points
    assert d["segmentation"]["score"] == 80.0 and "2 readers" in d["segmentation"]["detail"]
    assert card["note"] == ""
    assert card["total"] == pytest.approx(
        (30 * 100 + 25 * 94 + 20 * 100 + 15 * 80 + 10 * 100) / 100
    )
    assert all(d[k]["weight_used"] == WEIGHTS[k] for k in WEIGHTS)


def test_scorecard_renormalizes_and_says_why(scoring: Scoring) -> None:
    tally = Tally.of([scoring.score("hello there", "hello where").to_dict()])
    card = scorecard(tally)
    d = card["dimensions"]
    assert d["terms"]["left_out"] == "no meaning-bearing terms in the reference"
    assert d["numbers"]["left_out"] == "no numbers in the reference"
    assert "human reading" in d["segmentation"]["left_out"]
    assert d["raw_wer"]["weight_used"] == 100.0
    assert card["total"] == 50.0
    assert card["note"].startswith("left out: meaning-bearing terms")


def test_wer_over_100_percent_floors_the_score(scoring: Scoring) -> None:
    tally = Tally.of([scoring.score("hi", "a b c d").to_dict()])
    assert tally.wer == 4.0
    assert scorecard(tally)["dimensions"]["raw_wer"]["score"] == 0.0


def test_human_scores_are_validated(tmp_path: Path) -> None:
    bad = tmp_path / "h.json"
    bad.write_text(json.dumps({"segmentation": 140}))
    with pytest.raises(ConfigError, match="invalid human scores"):
        load_human_scores(bad)
