"""One alignment, every figure; pooling; the scorecard and its renormalization."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from voxproxy.core.errors import ConfigError
from voxproxy.transcripts import Scoring, Tally
from voxproxy.transcripts.scorecard import WEIGHTS, Attribution, load_human_scores, scorecard
from voxproxy.transcripts.terms import load_terms, mark_positions, split_markup


@pytest.fixture(scope="module")
def scoring() -> Scoring:
    return Scoring.load()


def test_split_markup_and_positions() -> None:
    plain, marked = split_markup("send [[Ludiversia Tweak]] to [[Camargo]] now")
    assert plain == "send Ludiversia Tweak to Camargo now"
    assert marked == ["Ludiversia Tweak", "Camargo"]
    tokens = ["a", "b", "c", "b", "c", "d"]
    assert mark_positions(tokens, [["b", "c"], ["c"]]) == {1, 2, 3, 4}
    assert mark_positions(tokens, [["c", "d"], ["b", "c"]]) == {1, 2, 3, 4}
    assert mark_positions(tokens, [["c", "d"], ["a"]]) == {0, 4, 5}


def test_an_inserted_negation_is_a_term_error(scoring: Scoring) -> None:
    s = scoring.score("we should sign it", "we should not sign it")
    assert s.insertions == 1
    assert s.term_positions == []  # no term in the reference...
    assert s.term_error_rate is None  # ...so no rate, but the insertion is kept
    assert s.to_dict()["terms"]["inserted"] == ["not"]
    s2 = scoring.score("no, we should sign it", "no we should not sign it")
    assert s2.term_error_rate == 1.0  # one term token ("no"), one inserted term


def test_empty_sides(scoring: Scoring) -> None:
    s = scoring.score("hello there", "")
    assert (s.deletions, s.wer) == (2, 1.0)
    e = scoring.score("", "hello")
    assert e.wer is None and e.insertions == 1


def test_pooled_figures_weight_by_words(scoring: Scoring) -> None:
    entries = [
        scoring.score("one two three four five six seven eight nine ten", "x").to_dict(),
        scoring.score("yes please", "yes please").to_dict(),
    ]
    # Digits spelled in a row are one number: the first reference is one token.
    assert entries[0]["words"] == 1
    t = Tally.of(entries)
    assert t.words == 3 and t.errors == 1 and t.numbers_text == "0 of 1"
    assert t.wer == pytest.approx(1 / 3)


def test_not_recognized_is_most_frequent_first(scoring: Scoring) -> None:
    t = Tally.of(
        scoring.score(r, h).to_dict()
        for r, h in [
            ("the Helios launch", "the helium launch"),
            ("Helios slipped", "helium slipped"),
            ("ask Priya about Helios", "ask maria about helium"),
        ]
    )
    rows = t.not_recognized()
    assert [r["word"] for r in rows] == ["helios", "priya"]
    assert [r["count"] for r in rows] == [3, 1]
    assert all(r["kind"] == "name" for r in rows)
    assert t.not_recognized(1) == rows[:1]


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


def test_term_lists(tmp_path: Path) -> None:
    default = load_terms()
    assert "not" in default.terms["negations"]
    assert default.label.startswith("voxproxy-default-terms@sha256:")
    bare = tmp_path / "names.yaml"
    bare.write_text("- Priya\n- Helios\n")
    more = tmp_path / "more.yaml"
    more.write_text("name: more\nterms:\n  people: [Camargo]\n")
    merged = load_terms([bare, more])
    assert merged.all_terms() == ["Priya", "Helios", "Camargo"]
    boolean = tmp_path / "bool.yaml"
    boolean.write_text("name: b\nterms:\n  negations: [no]\n")
    with pytest.raises(ConfigError, match="quote 'false'"):
        load_terms([boolean])
