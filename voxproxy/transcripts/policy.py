"""The written normalization policy: how both transcripts are folded before scoring.

A policy is a YAML file (the default ships as ``voxproxy/data/normalization.default.yaml``;
its comments say what each rule does and why). It is validated here into a frozen
:class:`NormalizationPolicy`. Its :attr:`~NormalizationPolicy.hash` is ``sha256:`` and
16 hex digits of the SHA-256 of a canonical JSON dump of the validated model (sorted
keys, defaults filled in, ``description`` left out), so comments and key order do
not change it and any rule does. Every score records :attr:`~NormalizationPolicy.label`
(name and hash).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from voxproxy import yamlmodel
from voxproxy.core.errors import ConfigError
from voxproxy.yamlmodel import VersionText, content_hash, parse_yaml, validate

DEFAULT_RESOURCE = "data/normalization.default.yaml"
_HASH_EXCLUDE = {"description"}


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Contractions(_Frozen):
    en: dict[str, str] = Field(default_factory=dict)
    es: dict[str, str] = Field(default_factory=dict)
    expand_nt: bool = True  # English "n't" after a word -> " not"
    suffixes: dict[str, str] = Field(default_factory=dict)  # English "'re" -> " are", ...

    def table(self, language: str) -> dict[str, str]:
        found: Any = getattr(self, language, None)
        return found if isinstance(found, dict) else {}


class NumberRules(_Frozen):
    words_to_digits: bool = True
    join_digit_runs: bool = True
    join_letter_prefixes: bool = True
    standalone_letters: dict[str, list[str]] = Field(default_factory=dict)


class NumberWords(_Frozen):
    """One language's spelled numbers (after case folding and accent stripping)."""

    zero: list[str] = Field(default_factory=list)
    units: dict[str, int] = Field(default_factory=dict)  # 1-9
    teens: dict[str, int] = Field(default_factory=dict)  # complete two-digit words (10-29)
    tens: dict[str, int] = Field(default_factory=dict)  # 20, 30, ... 90
    hundreds: dict[str, int] = Field(default_factory=dict)  # words worth 100-900 (Spanish)
    hundred: list[str] = Field(default_factory=list)  # a multiplier: "four hundred"
    scales: dict[str, int] = Field(default_factory=dict)  # thousand, million, ...
    connector: str | None = None  # "and", "y"
    connector_after: list[Literal["tens", "hundred", "scale"]] = Field(default_factory=list)
    ambiguous: list[str] = Field(default_factory=list)  # numbers only inside a spelled number
    apocopes: list[str] = Field(default_factory=list)  # ambiguous, and never read digit by digit

    @field_validator("connector", mode="before")
    @classmethod
    def _connector_text(cls, value: object) -> object:
        if isinstance(value, bool):  # PyYAML (YAML 1.1) reads a bare yes/no/on/off as one
            raise ValueError("quote the connector word")
        return value


class NormalizationPolicy(_Frozen):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    version: VersionText = "1"
    description: str = ""
    case: Literal["lower", "keep"] = "lower"
    accents: Literal["strip", "keep"] = "strip"
    contractions: Contractions = Field(default_factory=Contractions)
    symbols: dict[str, dict[str, str]] = Field(default_factory=dict)
    punctuation: Literal["strip"] = "strip"
    fillers: dict[str, list[str]] = Field(default_factory=dict)
    numbers: NumberRules = Field(default_factory=NumberRules)
    language: str = "auto"
    languages: list[str] = Field(default_factory=lambda: ["en"], min_length=1)
    detect_words: dict[str, list[str]] = Field(default_factory=dict)
    number_words: dict[str, NumberWords] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _languages_known(self) -> NormalizationPolicy:
        if self.language != "auto" and self.language not in self.languages:
            raise ValueError(f"language {self.language!r} is not in languages {self.languages}")
        return self

    @property
    def hash(self) -> str:
        """``sha256:`` + 16 hex digits of the canonical dump (without the description)."""
        return content_hash(self, _HASH_EXCLUDE)

    @property
    def label(self) -> str:
        """``name@sha256:...``: recorded with every score."""
        return f"{self.name}@{self.hash}"


def parse_normalization(text: str, source: str = "<normalization policy>") -> NormalizationPolicy:
    """Validate a policy document. Raises :class:`ConfigError` naming ``source``."""
    data: Any = parse_yaml(text, source)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a normalization policy is a mapping of fields")
    return validate(NormalizationPolicy, data, source, "normalization policy")


def default_normalization_text() -> str:
    return yamlmodel.resource_text(DEFAULT_RESOURCE)


def load_normalization(path: str | Path | None = None) -> NormalizationPolicy:
    """The policy in ``path``, or the embedded default when ``path`` is None."""
    if path is None:
        return _default()
    return parse_normalization(yamlmodel.read_text(path, "the normalization policy"), str(path))


_DEFAULT: list[NormalizationPolicy] = []


def _default() -> NormalizationPolicy:
    if not _DEFAULT:
        _DEFAULT.append(
            parse_normalization(default_normalization_text(), "embedded default normalization")
        )
    return _DEFAULT[0]
