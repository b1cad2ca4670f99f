"""Meaning-bearing terms: marked inline as ``[[term]]`` in a reference, or listed in a file.

A term list is YAML::

    name: acme-support
    terms:
      products: [Ludiversia Tweak, Helios]
      people: [Priya, Camargo]
      negations: ["not", "no", "never"]

Categories are free names; each holds texts of one or more words. A term is folded by
the same normalization policy as the transcripts, and every occurrence of its tokens in
a reference makes those tokens terms (longest terms first, no overlaps). Inline
``[[...]]`` marks work the same way, for the reference they are written in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from voxproxy import yamlmodel
from voxproxy.core.errors import ConfigError
from voxproxy.yamlmodel import VersionText, content_hash, parse_yaml, validate

DEFAULT_RESOURCE = "data/terms.default.yaml"
MARKUP = re.compile(r"\[\[(.+?)\]\]", re.DOTALL)


class TermList(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.+-]+$")
    version: VersionText = "1"
    terms: dict[str, tuple[str, ...]] = Field(default_factory=dict)

    @field_validator("terms", mode="before")
    @classmethod
    def _texts(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        out: dict[str, list[str]] = {}
        for category, items in value.items():
            if items is None:
                items = []
            if not isinstance(items, (list, tuple)):
                raise ValueError(f"category {category!r} must be a list of texts")
            for item in items:
                if isinstance(item, bool):  # YAML 1.1 reads a bare no/yes as a boolean
                    raise ValueError(f"category {category!r}: quote {str(item).lower()!r}")
                if not isinstance(item, (str, int, float)) or not str(item).strip():
                    raise ValueError(f"category {category!r}: {item!r} is not a term")
            out[str(category)] = [str(i) for i in items]
        return out

    @property
    def hash(self) -> str:
        return content_hash(self)

    @property
    def label(self) -> str:
        return f"{self.name}@{self.hash}"

    def all_terms(self) -> list[str]:
        return [t for items in self.terms.values() for t in items]

    def merged(self, other: TermList) -> TermList:
        terms = {k: list(v) for k, v in self.terms.items()}
        for k, v in other.terms.items():
            terms.setdefault(k, [])
            terms[k] += [t for t in v if t not in terms[k]]
        merged = {k: tuple(v) for k, v in terms.items()}
        return TermList(name=f"{self.name}+{other.name}", version="1", terms=merged)


def split_markup(text: str) -> tuple[str, list[str]]:
    """``text`` with ``[[`` and ``]]`` removed, and the texts they marked."""
    marked = [m.group(1) for m in MARKUP.finditer(text)]
    return MARKUP.sub(lambda m: m.group(1), text), marked


def parse_terms(text: str, source: str = "<terms>") -> TermList:
    data: Any = parse_yaml(text, source)
    if isinstance(data, list):  # a bare list of terms
        data = {"name": Path(source).stem or "terms", "terms": {"terms": data}}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a term list is a mapping with name and terms")
    return validate(TermList, data, source, "term list")


def load_terms(paths: Sequence[str | Path] | None = None) -> TermList:
    """The term lists in ``paths`` merged, or the embedded default when there are none."""
    if not paths:
        return parse_terms(yamlmodel.resource_text(DEFAULT_RESOURCE), "embedded default terms")
    out: TermList | None = None
    for path in paths:
        one = parse_terms(yamlmodel.read_text(path, "the term list"), str(path))
        out = one if out is None else out.merged(one)
    assert out is not None
    return out


def mark_positions(tokens: Sequence[str], terms: Iterable[Sequence[str]]) -> set[int]:
    """Positions of ``tokens`` covered by any of ``terms`` (token sequences), longest
    first (then in sorted order), left to right, without overlaps."""
    covered: set[int] = set()
    seqs = sorted({tuple(t) for t in terms if t}, key=lambda s: (-len(s), s))
    n = len(tokens)
    for seq in seqs:
        m = len(seq)
        i = 0
        while i + m <= n:
            span = range(i, i + m)
            if tuple(tokens[i : i + m]) == seq and not covered.intersection(span):
                covered.update(span)
                i += m
            else:
                i += 1
    return covered
