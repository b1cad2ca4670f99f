"""The written normalization policy (``voxproxy/transcripts/policy.py``): its hash and
label, the embedded default, and the policies refused, each naming its source."""

from __future__ import annotations

from pathlib import Path

import pytest

from voxproxy.core.errors import ConfigError
from voxproxy.transcripts.policy import (
    Contractions,
    default_normalization_text,
    load_normalization,
    parse_normalization,
)


def test_policy_hash_ignores_comments_and_description() -> None:
    text = default_normalization_text()
    p1 = parse_normalization(text)
    p2 = parse_normalization(
        "# a comment\n" + text.replace("description: >", "description: >\n  x")
    )
    assert p1.hash == p2.hash and p1.hash.startswith("sha256:")
    assert p1.label == f"voxproxy-default@{p1.hash}"
    p3 = parse_normalization(text.replace("accents: strip", "accents: keep"))
    assert p3.hash != p1.hash


def test_bad_policies_are_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncase: upper\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: invalid normalization policy"):
        load_normalization(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_normalization(tmp_path / "missing.yaml")


def test_the_embedded_default_is_read_once_and_is_the_shipped_file() -> None:
    first = load_normalization()
    assert load_normalization() is first
    assert first == parse_normalization(default_normalization_text())
    assert first.name == "voxproxy-default" and first.label.startswith("voxproxy-default@")


def test_a_minimal_policy_takes_the_defaults_and_hashes_as_they_are() -> None:
    bare = parse_normalization("name: bare\n")
    assert (bare.case, bare.accents, bare.language, bare.languages) == (
        "lower",
        "strip",
        "auto",
        ["en"],
    )
    spelled = parse_normalization("name: bare\ncase: lower\nlanguages: [en]\n")
    assert spelled.hash == bare.hash  # defaults written out change nothing
    assert parse_normalization("name: bare\nversion: '2'\n").hash != bare.hash
    assert parse_normalization("name: other\n").hash != bare.hash


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("- name: x\n", "a mapping of fields"),
        ("name: x\nlanguage: fr\nlanguages: [en, es]\n", "not in languages"),
        ("name: x\nnumber_words:\n  es:\n    connector: yes\n", "quote the connector"),
        ("name: x\nstemming: true\n", "stemming"),
        ("name: 'two words'\n", "name"),
    ],
)
def test_policies_that_do_not_hold_are_refused_naming_the_source(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as refused:
        parse_normalization(text, "mine.yaml")
    assert str(refused.value).startswith("mine.yaml")


def test_contractions_of_a_language_without_a_table_are_none() -> None:
    c = Contractions(en={"ain't": "is not"})
    assert c.table("en") == {"ain't": "is not"}
    assert c.table("es") == {}
    assert c.table("fr") == {}
