"""voxproxy.transcripts.terms: term lists (the embedded default, bare lists, merging,
YAML's bare booleans refused), the ``[[...]]`` markup, and the positions terms cover."""

from __future__ import annotations

from pathlib import Path

import pytest

from voxproxy.core.errors import ConfigError
from voxproxy.transcripts.terms import (
    TermList,
    load_terms,
    mark_positions,
    parse_terms,
    split_markup,
)


def test_split_markup_and_positions() -> None:
    plain, marked = split_markup("send [[Ludiversia Tweak]] to [[Camargo]] now")
    assert plain == "send Ludiversia Tweak to Camargo now"
    assert marked == ["Ludiversia Tweak", "Camargo"]
    tokens = ["a", "b", "c", "b", "c", "d"]
    assert mark_positions(tokens, [["b", "c"], ["c"]]) == {1, 2, 3, 4}
    assert mark_positions(tokens, [["c", "d"], ["b", "c"]]) == {1, 2, 3, 4}
    assert mark_positions(tokens, [["c", "d"], ["a"]]) == {0, 4, 5}


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


def test_longest_terms_cover_first_without_overlaps() -> None:
    tokens = ["new", "york", "city", "new", "york"]
    assert mark_positions(tokens, [["new", "york"], ["new", "york", "city"]]) == {0, 1, 2, 3, 4}
    assert mark_positions(tokens, [["york", "city"], ["new", "york"]]) == {0, 1, 3, 4}
    assert mark_positions(tokens, [[], ["boston"]]) == set()


def test_markup_spanning_lines_is_one_term() -> None:
    plain, marked = split_markup("call [[Ana\nLucia]] back, [[]] is nothing")
    assert marked == ["Ana\nLucia"]
    assert plain.startswith("call Ana\nLucia back")


def test_merging_keeps_each_term_once_in_the_order_first_seen() -> None:
    a = TermList(name="a", terms={"people": ("Ana", "Bo")})
    b = TermList(name="b", terms={"people": ("Bo", "Cy"), "places": ("Oslo",)})
    merged = a.merged(b)
    assert merged.name == "a+b"
    assert merged.terms == {"people": ("Ana", "Bo", "Cy"), "places": ("Oslo",)}
    assert merged.hash != a.hash and merged.label == f"a+b@{merged.hash}"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("name: x\nterms:\n  people: Ana\n", "must be a list of texts"),
        ("name: x\nterms:\n  people: ['  ']\n", "is not a term"),
        ("name: 'has space'\n", "term list"),
        ("42\n", "a mapping with name and terms"),
        ("name: x\nextra: 1\n", "term list"),
    ],
)
def test_a_term_list_that_cannot_be_used_is_refused(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_terms(text, "t.yaml")


def test_numbers_are_terms_as_text_and_an_empty_category_is_empty() -> None:
    terms = parse_terms("name: n\nterms:\n  codes: [7, 3.5]\n  none:\n", "n.yaml")
    assert terms.terms == {"codes": ("7", "3.5"), "none": ()}
