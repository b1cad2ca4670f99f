"""Scoring one reference against one hypothesis, and pooling many such scores.

One word alignment (jiwer's minimum edit distance over the normalized tokens) gives
every figure: word error rate with its substitutions, deletions and insertions; the
meaning-bearing term error rate (the same alignment, counted on the reference's term
tokens, plus inserted terms); the numbers (each numeric reference token, matched
exactly or not); and the words the agent missed (substituted or deleted), each with
its kind (term, number, name-like, word).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voxproxy.transcripts.normalize import Normalizer
from voxproxy.transcripts.policy import NormalizationPolicy, load_normalization
from voxproxy.transcripts.terms import TermList, load_terms, mark_positions, split_markup

_SENTENCE_END = re.compile(r"[.!?:;¿¡]$")


@dataclass
class Scoring:
    """A normalization policy and a term list: everything a score depends on."""

    policy: NormalizationPolicy
    terms: TermList
    normalizer: Normalizer = field(init=False)
    _term_tokens: dict[str, list[list[str]]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.normalizer = Normalizer(self.policy)

    @classmethod
    def load(
        cls,
        policy: str | Path | None = None,
        terms: Sequence[str | Path] | None = None,
    ) -> Scoring:
        """The policy file (None: the embedded default) and term lists (none: the default)."""
        return cls(load_normalization(policy), load_terms(terms))

    @property
    def labels(self) -> dict[str, str]:
        return {"policy": self.policy.label, "term_list": self.terms.label}

    def term_tokens(self, language: str) -> list[list[str]]:
        found = self._term_tokens.get(language)
        if found is None:
            found = [self.normalizer.tokens(t, language) for t in self.terms.all_terms()]
            found = [t for t in found if t]
            self._term_tokens[language] = found
        return found

    def score(self, reference: str, hypothesis: str, language: str | None = None) -> PairScore:
        """Score ``hypothesis`` against ``reference`` (which may carry ``[[term]]`` marks)."""
        plain, marked = split_markup(reference)
        lang = language or self.normalizer.language_of(plain)
        norm = self.normalizer
        ref = norm.tokens(plain, lang)
        hyp = norm.tokens(split_markup(hypothesis)[0], lang)
        term_seqs = self.term_tokens(lang) + [norm.tokens(m, lang) for m in marked]
        term_pos = mark_positions(ref, term_seqs)
        single_terms = {t[0] for t in term_seqs if len(t) == 1}
        ops, heard, inserted = align(ref, hyp)
        return PairScore(
            language=lang,
            reference=ref,
            hypothesis=hyp,
            ops=ops,
            heard=heard,
            inserted=inserted,
            term_positions=sorted(term_pos),
            term_insertions=[w for w in inserted if w in single_terms],
            name_like=sorted(self._name_like(plain, lang)),
        )

    def _name_like(self, text: str, language: str) -> set[str]:
        """Tokens of words written as names or codes in the reference: capitalized
        after a sentence's first word, or all capitals (IBAN)."""
        out: set[str] = set()
        words = text.split()
        for i, raw in enumerate(words):
            w = raw.strip("\"'“”‘’()[]{}«».,;:!?¿¡")
            if not w or not w[0].isalpha():
                continue
            first = i == 0 or bool(_SENTENCE_END.search(words[i - 1])) or raw[0] in "¿¡"
            caps = len(w) >= 2 and w.isupper()
            if caps or (w[0].isupper() and not first and w != "I"):
                out.update(self.normalizer.tokens(w, language))
        return out


def align(ref: list[str], hyp: list[str]) -> tuple[list[str], list[str | None], list[str]]:
    """Per reference token: ``ok``, ``sub`` or ``del`` and the hypothesis token it met;
    and the inserted hypothesis tokens."""
    if not ref:
        return [], [], list(hyp)
    if not hyp:
        return ["del"] * len(ref), [None] * len(ref), []
    from voxproxy.extras import require

    require("transcripts", "scoring transcripts")
    import jiwer

    out = jiwer.process_words(" ".join(ref), " ".join(hyp))
    ops: list[str] = []
    heard: list[str | None] = []
    inserted: list[str] = []
    for chunk in out.alignments[0]:
        if chunk.type == "equal":
            ops += ["ok"] * (chunk.ref_end_idx - chunk.ref_start_idx)
            heard += hyp[chunk.hyp_start_idx : chunk.hyp_end_idx]
        elif chunk.type == "substitute":
            ops += ["sub"] * (chunk.ref_end_idx - chunk.ref_start_idx)
            heard += hyp[chunk.hyp_start_idx : chunk.hyp_end_idx]
        elif chunk.type == "delete":
            ops += ["del"] * (chunk.ref_end_idx - chunk.ref_start_idx)
            heard += [None] * (chunk.ref_end_idx - chunk.ref_start_idx)
        else:
            inserted += hyp[chunk.hyp_start_idx : chunk.hyp_end_idx]
    return ops, heard, inserted


def _has_digit(token: str) -> bool:
    return any(c.isdigit() for c in token)


@dataclass
class PairScore:
    language: str
    reference: list[str]
    hypothesis: list[str]
    ops: list[str]
    heard: list[str | None]
    inserted: list[str]
    term_positions: list[int]
    term_insertions: list[str]
    name_like: list[str]

    @property
    def substitutions(self) -> int:
        return self.ops.count("sub")

    @property
    def deletions(self) -> int:
        return self.ops.count("del")

    @property
    def insertions(self) -> int:
        return len(self.inserted)

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def wer(self) -> float | None:
        return self.errors / len(self.reference) if self.reference else None

    @property
    def term_errors(self) -> int:
        missed = sum(1 for i in self.term_positions if self.ops[i] != "ok")
        return missed + len(self.term_insertions)

    @property
    def term_error_rate(self) -> float | None:
        n = len(self.term_positions)
        return self.term_errors / n if n else None

    def kind(self, i: int) -> str:
        token = self.reference[i]
        if i in self.term_positions:
            return "term"
        if _has_digit(token):
            return "number"
        if token in self.name_like:
            return "name"
        return "word"

    def to_dict(self) -> dict[str, Any]:
        """The figures as results.json keeps them (enough to pool and to list misses)."""
        terms = set(self.term_positions)
        numbers = [
            {"reference": tok, "heard": self.heard[i], "ok": self.ops[i] == "ok"}
            for i, tok in enumerate(self.reference)
            if _has_digit(tok)
        ]
        return {
            "language": self.language,
            "words": len(self.reference),
            "errors": self.errors,
            "substitutions": self.substitutions,
            "deletions": self.deletions,
            "insertions": self.insertions,
            "wer": _round(self.wer),
            "terms": {
                "total": len(self.term_positions),
                "errors": self.term_errors,
                "rate": _round(self.term_error_rate),
                "missed": [self.reference[i] for i in sorted(terms) if self.ops[i] != "ok"],
                "inserted": list(self.term_insertions),
            },
            "numbers": {
                "total": len(numbers),
                "matched": sum(1 for n in numbers if n["ok"]),
                "items": numbers,
            },
            "missed": [
                {"word": tok, "kind": self.kind(i), "heard": self.heard[i]}
                for i, tok in enumerate(self.reference)
                if self.ops[i] != "ok"
            ],
            "normalized": {
                "reference": " ".join(self.reference),
                "hypothesis": " ".join(self.hypothesis),
            },
        }


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(x, digits)


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


HINTS = {
    "term": "a marked or listed term: is the term list given to the recognizer as keywords?",
    "name": "looks like a name or code: a domain term list would cover it",
}


@dataclass
class Tally:
    """Pooled figures over many scored pairs (from :meth:`PairScore.to_dict` entries)."""

    pairs: int = 0
    words: int = 0
    substitutions: int = 0
    deletions: int = 0
    insertions: int = 0
    term_total: int = 0
    term_errors: int = 0
    numbers_total: int = 0
    numbers_matched: int = 0
    numbers_missed: list[dict[str, Any]] = field(default_factory=list)
    missed: Counter[str] = field(default_factory=Counter)
    missed_kind: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, entries: Iterable[dict[str, Any]]) -> Tally:
        t = cls()
        for e in entries:
            t.add(e)
        return t

    def add(self, e: dict[str, Any]) -> None:
        self.pairs += 1
        self.words += e["words"]
        self.substitutions += e["substitutions"]
        self.deletions += e["deletions"]
        self.insertions += e["insertions"]
        self.term_total += e["terms"]["total"]
        self.term_errors += e["terms"]["errors"]
        self.numbers_total += e["numbers"]["total"]
        self.numbers_matched += e["numbers"]["matched"]
        self.numbers_missed += [n for n in e["numbers"]["items"] if not n["ok"]]
        rank = {"term": 0, "name": 1, "number": 2, "word": 3}
        for m in e["missed"]:
            w = m["word"]
            self.missed[w] += 1
            old = self.missed_kind.get(w)
            if old is None or rank[m["kind"]] < rank[old]:
                self.missed_kind[w] = m["kind"]

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def wer(self) -> float | None:
        return self.errors / self.words if self.words else None

    @property
    def term_error_rate(self) -> float | None:
        return self.term_errors / self.term_total if self.term_total else None

    @property
    def numbers_text(self) -> str:
        return f"{self.numbers_matched} of {self.numbers_total}"

    def not_recognized(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The reference words missed, most frequent first (ties: alphabetical)."""
        rows = sorted(self.missed.items(), key=lambda kv: (-kv[1], kv[0]))
        out = []
        for word, count in rows[:limit]:
            kind = self.missed_kind.get(word, "word")
            out.append({"word": word, "count": count, "kind": kind, "hint": HINTS.get(kind)})
        return out

    def to_dict(self, limit: int = 30) -> dict[str, Any]:
        return {
            "scored": self.pairs,
            "words": self.words,
            "errors": self.errors,
            "substitutions": self.substitutions,
            "deletions": self.deletions,
            "insertions": self.insertions,
            "wer": _round(self.wer),
            "term_error_rate": _round(self.term_error_rate),
            "terms": {"total": self.term_total, "errors": self.term_errors},
            "numbers": {
                "matched": self.numbers_matched,
                "total": self.numbers_total,
                "text": self.numbers_text,
                "missed": self.numbers_missed[:limit],
            },
            "not_recognized": self.not_recognized(limit),
        }
