"""voxproxy.transcripts.score: one alignment, every figure; pooling (the scorecard built
from it: test_scorecard.py)."""

from __future__ import annotations

import pytest

from voxproxy.transcripts import Scoring, Tally


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
