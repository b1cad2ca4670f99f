"""Text to comparable tokens, by a :class:`~voxproxy.transcripts.policy.NormalizationPolicy`.

The same function, with the same language, folds the reference and the hypothesis;
the steps and their order are those written in the policy file. Pure: no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from voxproxy.transcripts.policy import NormalizationPolicy, NumberWords

_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "`": "'", "ʼ": "'"})
_NOT_WORD = re.compile(r"[^\w\s']|_")
_SPACE = re.compile(r"\s+")


def fold(text: str, policy: NormalizationPolicy) -> str:
    """Unicode, case and accents (steps 1-3): the part that needs no language."""
    s = unicodedata.normalize("NFKC", text)
    if policy.case == "lower":
        s = s.lower()
    if policy.accents == "strip":
        s = "".join(c for c in unicodedata.normalize("NFD", s) if unicodedata.category(c) != "Mn")
        s = unicodedata.normalize("NFC", s)
    return s.translate(_APOSTROPHES)


def _words(text: str) -> list[str]:
    """Punctuation (step 6): apostrophes left after the contractions join their word."""
    return _NOT_WORD.sub(" ", text).replace("'", "").split()


@dataclass(frozen=True)
class _NumberKind:
    kind: str  # zero, unit, teen, tens, hundreds, hundred, scale
    value: int


@dataclass
class _Number:
    """A spelled number being read, word by word."""

    total: int = 0
    group: int = 0  # the part below the last scale word
    last: str = ""
    scale_cap: int = 1 << 62  # scales must fall: "two million three thousand"

    def can_take(self, k: _NumberKind) -> bool:
        last, g = self.last, self.group
        if last == "zero" or k.kind == "zero":
            return False
        if k.kind == "unit":
            return last == "tens" or (last in ("hundreds", "hundred", "scale") and g % 100 == 0)
        if k.kind in ("teen", "tens"):
            return last in ("hundreds", "hundred", "scale") and g % 100 == 0
        if k.kind == "hundreds":
            return last == "scale" and g == 0
        if k.kind == "hundred":
            return last in ("unit", "teen") and g < 100
        if k.kind == "scale":
            return last != "scale" and k.value < self.scale_cap
        return False

    def take(self, k: _NumberKind) -> None:
        if k.kind == "hundred":
            self.group = max(self.group, 1) * 100
        elif k.kind == "scale":
            self.total += max(self.group, 1) * k.value
            self.group = 0
            self.scale_cap = k.value
        else:
            self.group += k.value
        self.last = k.kind

    @property
    def value(self) -> int:
        return self.total + self.group


@dataclass
class Normalizer:
    """Folds texts into tokens under one policy. Build once, use for many texts."""

    policy: NormalizationPolicy
    _kinds: dict[str, dict[str, _NumberKind]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        for lang, nw in self.policy.number_words.items():
            self._kinds[lang] = _kind_table(nw)

    # -- language ------------------------------------------------------------------------

    def language_of(self, text: str) -> str:
        """The policy's language, or (``auto``) the listed one whose common words ``text``
        uses most; ties go to the first listed."""
        p = self.policy
        if p.language != "auto":
            return p.language
        words = _words(fold(text, p).lower())
        best, best_n = p.languages[0], -1
        for lang in p.languages:
            vocab = set(p.detect_words.get(lang, ()))
            n = sum(1 for w in words if w in vocab)
            if n > best_n:
                best, best_n = lang, n
        return best

    # -- tokens --------------------------------------------------------------------------

    def tokens(self, text: str, language: str) -> list[str]:
        """The policy's steps 1-10 on ``text``, in ``language``."""
        p = self.policy
        s = fold(text, p)
        s = self._contractions(s, language)
        for symbol, word in p.symbols.get(language, {}).items():
            s = s.replace(symbol, f" {word} ")
        words = _words(s)
        fillers = set(p.fillers.get(language, ()))
        if fillers:
            words = [w for w in words if w.lower() not in fillers]
        rules = p.numbers
        if rules.words_to_digits and language in self._kinds:
            words = self._spelled_numbers(words, language)
        if rules.join_digit_runs:
            words = _join_digit_runs(words)
        if rules.join_letter_prefixes:
            words = _join_codes(words, set(rules.standalone_letters.get(language, ())))
        return words

    def _contractions(self, s: str, language: str) -> str:
        c = self.policy.contractions
        table = c.table(language)
        if table:
            keys = sorted(table, key=len, reverse=True)
            pattern = re.compile(
                r"(?<![\w'])(" + "|".join(re.escape(k) for k in keys) + r")(?![\w'])",
                re.IGNORECASE,
            )
            s = pattern.sub(lambda m: f" {table[m.group(1).lower()]} ", s)
        if language == "en":
            if c.expand_nt:
                s = re.sub(r"(\w)n't(?![\w'])", r"\1 not", s, flags=re.IGNORECASE)
            for suffix, word in c.suffixes.items():
                s = re.sub(r"(\w)" + re.escape(suffix) + r"(?![\w'])", rf"\1 {word}", s, flags=re.I)
        return s

    def _spelled_numbers(self, words: list[str], language: str) -> list[str]:
        kinds = self._kinds[language]
        nw = self.policy.number_words[language]
        ambiguous = set(nw.ambiguous)
        apocopes = set(nw.apocopes)

        def near(j: int) -> str:
            """The kind of the spelled number word at ``j`` ("" if none)."""
            if not 0 <= j < len(words):
                return ""
            k = kinds.get(words[j].lower())
            return "" if k is None else k.kind

        def kind(i: int) -> _NumberKind | None:
            w = words[i].lower()
            k = kinds.get(w)
            if k is None or (w not in ambiguous and w not in apocopes):
                return k
            # An everyday word is a number only inside a spelled number.
            before, after = near(i - 1), near(i + 1)
            if (
                before == ""
                and nw.connector is not None
                and i >= 1
                and words[i - 1].lower() == nw.connector
            ):
                before = near(i - 2)  # "treinta y un"
            if after in ("hundred", "scale") or before in ("tens", "hundreds", "hundred", "scale"):
                return k  # "one hundred", "un millón", "twenty one", "treinta y una"
            if w in ambiguous and ("unit" in (before, after) or "zero" in (before, after)):
                return k  # a digit-by-digit reading: "one two three", "uno cero"
            return None

        out: list[str] = []
        num: _Number | None = None
        i = 0
        while i < len(words):
            k = kind(i)
            if k is None:
                w = words[i]
                if (
                    num is not None
                    and nw.connector is not None
                    and w.lower() == nw.connector
                    and num.last in nw.connector_after
                    and i + 1 < len(words)
                ):
                    nxt = kind(i + 1)
                    if nxt is not None and nxt.kind != "scale" and num.can_take(nxt):
                        i += 1  # "one hundred and five", "cuarenta y dos"
                        continue
                if num is not None:
                    out.append(str(num.value))
                    num = None
                out.append(w)
            elif num is not None and num.can_take(k):
                num.take(k)
            else:
                if num is not None:
                    out.append(str(num.value))
                num = _Number()
                num.take(k)
            i += 1
        if num is not None:
            out.append(str(num.value))
        return out


def _kind_table(nw: NumberWords) -> dict[str, _NumberKind]:
    out: dict[str, _NumberKind] = {}
    for w in nw.zero:
        out[w] = _NumberKind("zero", 0)
    for table, kind in (
        (nw.units, "unit"),
        (nw.teens, "teen"),
        (nw.tens, "tens"),
        (nw.hundreds, "hundreds"),
        (nw.scales, "scale"),
    ):
        for w, v in table.items():
            out[w] = _NumberKind(kind, v)
    for w in nw.hundred:
        out[w] = _NumberKind("hundred", 100)
    return out


def _join_digit_runs(words: list[str]) -> list[str]:
    out: list[str] = []
    for w in words:
        if w.isdigit() and out and out[-1].isdigit():
            out[-1] += w
        else:
            out.append(w)
    return out


def _is_code(w: str) -> bool:
    return w.isalnum() and any(c.isdigit() for c in w) and any(c.isalpha() for c in w)


def _join_codes(words: list[str], standalone: set[str]) -> list[str]:
    out: list[str] = []
    for w in words:
        if w.isdigit() and out:
            if _is_code(out[-1]) and out[-1][-1].isdigit():
                out[-1] += w  # "ES91" then "2100": one code
                continue
            run = 0
            while run < len(out) and len(out[-1 - run]) == 1 and out[-1 - run].isalpha():
                run += 1
            if run == 1 and out[-1].lower() in standalone:
                run = 0  # "a 3" keeps its article
            if run:
                prefix = "".join(out[-run:])
                del out[-run:]
                out.append(prefix + w)
                continue
        out.append(w)
    return out
