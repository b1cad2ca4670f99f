"""The written normalization policy: each rule, in English and Spanish, on both sides."""

from __future__ import annotations

from pathlib import Path

import pytest

from voxproxy.transcripts import Scoring
from voxproxy.transcripts.normalize import Normalizer
from voxproxy.transcripts.policy import (
    default_normalization_text,
    load_normalization,
)


@pytest.fixture(scope="module")
def norm() -> Normalizer:
    return Normalizer(load_normalization())


@pytest.mark.parametrize(
    ("text", "language", "tokens"),
    [
        # Case, punctuation, accents.
        ("Hola, ¿dónde está mi pedido?", "es", ["hola", "donde", "esta", "mi", "pedido"]),
        (
            "Dirección: Camargo. ¡Ñandú pingüino!",
            "es",
            ["direccion", "camargo", "nandu", "pinguino"],
        ),
        # Contractions (English): "we're" is "we are"; possessives only lose the apostrophe.
        (
            "We're sure it's Priya's, don't worry",
            "en",
            ["we", "are", "sure", "it", "is", "priyas", "do", "not", "worry"],
        ),
        ("I can't, we won't", "en", ["i", "can", "not", "we", "will", "not"]),
        # Fillers are dropped.
        ("Uh, I mean, um, yes", "en", ["i", "mean", "yes"]),
        ("Eh, pues, mmm, sí", "es", ["pues", "si"]),
        # Spelled numbers become digits; runs of digits are one number.
        ("forty two", "en", ["42"]),
        ("four hundred and five", "en", ["405"]),
        ("forty thousand dollars", "en", ["40000", "dollars"]),
        ("40,000 dollars", "en", ["40000", "dollars"]),
        ("cuarenta y dos", "es", ["42"]),
        ("cuatrocientos setenta y dos", "es", ["472"]),
        ("cuarenta mil euros", "es", ["40000", "euros"]),
        ("40.000 euros", "es", ["40000", "euros"]),
        ("dos mil veintiséis", "es", ["2026"]),
        ("nineteen eighty four", "en", ["1984"]),
        ("cuatro siete dos", "es", ["472"]),
        ("4 7 1 9, 2 8 3 6", "en", ["47192836"]),
        # "one" / "un" are words unless next to a number.
        ("the one I want", "en", ["the", "one", "i", "want"]),
        ("one two three", "en", ["123"]),
        ("un pedido", "es", ["un", "pedido"]),
        ("un millón", "es", ["1000000"]),
        # Quarters, codes and IBANs.
        ("Q3", "en", ["q3"]),
        ("Q 3", "en", ["q3"]),
        ("Q three", "en", ["q3"]),
        ("E S 9 1, 2 1 0 0", "en", ["es912100"]),
        ("ES91 2100", "en", ["es912100"]),
        ("a 3 bedroom flat", "en", ["a", "3", "bedroom", "flat"]),
        # Symbols.
        ("50% off", "en", ["50", "percent", "off"]),
        ("un 50 %", "es", ["un", "50", "porciento"]),
        ("un cincuenta por ciento", "es", ["un", "50", "porciento"]),
        ("un cinco por ciento", "es", ["un", "5", "porciento"]),
        ("treinta y un días", "es", ["31", "dias"]),
        ("ciento uno", "es", ["101"]),
        ("uno cero dos", "es", ["102"]),
        ("twenty one", "en", ["21"]),
        ("one hundred", "en", ["100"]),
    ],
)
def test_rules(norm: Normalizer, text: str, language: str, tokens: list[str]) -> None:
    assert norm.tokens(text, language) == tokens


@pytest.mark.parametrize(
    ("said", "heard"),
    [
        ("We should not sign before Q3.", "we should not sign before Q three"),
        ("We're open from nine to six.", "We are open from 9 to 6"),
        ("The budget is forty thousand.", "the budget is 40,000"),
        ("Llega el jueves, ¿vale?", "llega el Jueves vale"),
        ("El presupuesto es de cuarenta mil euros.", "el presupuesto es de 40.000 euros"),
        ("Mi pedido es el cuatro siete dos.", "mi pedido es el 472"),
        ("Está en la dirección de Camargo.", "esta en la direccion de camargo"),
        ("Um, my order number is 4 7 1 9.", "My order number is 4719."),
    ],
)
def test_forgiven_on_both_sides(scoring: Scoring, said: str, heard: str) -> None:
    s = scoring.score(said, heard)
    assert s.errors == 0, (s.reference, s.hypothesis)
    # Symmetric: the same policy and language fold either side.
    assert scoring.score(heard, said, s.language).errors == 0


def test_what_the_policy_does_not_forgive(scoring: Scoring) -> None:
    assert scoring.score("slips to Q3", "slips to Q2").substitutions == 1
    assert scoring.score("order 4 7 1 9", "order 4 7 1 7").to_dict()["numbers"]["matched"] == 0
    assert scoring.score("we should not sign", "we should sign").deletions == 1
    assert scoring.score("once a week", "once a week").errors == 0  # English "once" stays


def test_language_is_detected_from_the_reference(norm: Normalizer) -> None:
    assert norm.language_of("Quiero saber dónde está mi pedido") == "es"
    assert norm.language_of("I would like to know where my order is") == "en"
    # "once" is 11 only in Spanish.
    assert norm.tokens("once veces", "es") == ["11", "veces"]
    assert norm.tokens("once a week", "en") == ["once", "a", "week"]


def test_a_different_policy_changes_the_score(tmp_path: Path) -> None:
    keep = tmp_path / "keep-accents.yaml"
    keep.write_text(
        default_normalization_text()
        .replace("name: voxproxy-default", "name: keep-accents")
        .replace("accents: strip", "accents: keep")
    )
    strict = Scoring.load(keep)
    loose = Scoring.load()
    said, heard = "¿Dónde está mi pedido?", "donde esta mi pedido"
    assert loose.score(said, heard).errors == 0
    assert strict.score(said, heard).substitutions == 2
    assert strict.labels["policy"].startswith("keep-accents@sha256:")
