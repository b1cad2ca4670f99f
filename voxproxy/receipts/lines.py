"""Reading a JSON-lines receipt file line by line, saying what each bad line was.

A receipts file is appended to by proxies that may be killed mid-write, copied by hand,
concatenated with other files or opened in an editor, so a reader meets lines that are
not receipts: a torn fragment without its newline (the line after it glued on), a line
that is not UTF-8 or not JSON, JSON that is not a receipt. :func:`scan_receipts` yields
every receipt it can read and a :class:`BadLine` for every line it cannot, in file
order, so that a command can skip and count them in one warning line each instead of
stopping at the first; a receipt glued to a torn fragment is recovered (the fragment
dropped). :func:`voxproxy.receipts.writer.read_receipts` is the strict reading built
on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from voxproxy.core.receipt import Receipt

Problem = Literal["not_utf8", "not_json", "not_receipt", "incomplete", "torn_fragment"]


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line that is not a receipt as it stands (1-based ``line`` of ``path``).

    ``torn_fragment``: a fragment of ``dropped`` bytes glued before a receipt, which is
    yielded right after this (nothing else is lost); ``incomplete``: a last line without
    its newline (a receipt being written, or torn); the others: the line is skipped.
    ``error`` is what a strict reader raises for it (``not_utf8``, ``not_receipt``)."""

    path: str
    line: int
    problem: Problem
    detail: str
    dropped: int = 0
    error: Exception | None = None

    def describe(self) -> str:
        """One line for a warning: where, and what was done with it."""
        if self.problem == "torn_fragment":
            return (
                f"{self.path}:{self.line}: a torn fragment ({self.dropped} bytes) glued "
                "before a receipt: fragment dropped, receipt kept"
            )
        return f"{self.path}:{self.line}: {self.detail}; skipped"


def _receipt(raw: bytes) -> Receipt | BadLine:
    """``raw`` (one line without its newline) as a receipt, or why not (path and line
    filled in by the caller)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return BadLine("", 0, "not_utf8", "not UTF-8 text", error=exc)
    try:
        return Receipt.model_validate_json(text)
    except ValidationError as exc:
        err = exc.errors()[0]
        if err["type"] == "json_invalid":
            return BadLine("", 0, "not_json", "not JSON (torn or garbled)")
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        return BadLine("", 0, "not_receipt", f"not a receipt: {where}: {err['msg']}", error=exc)


def _after_fragment(raw: bytes) -> tuple[int, Receipt] | None:
    """A receipt that ends the line after a torn fragment: the first ``{`` after the
    line's start from which the rest of the line reads as a receipt, with the bytes
    before it."""
    start = raw.find(b"{", 1)
    while start != -1:
        found = _receipt(raw[start:])
        if isinstance(found, Receipt):
            return start, found
        start = raw.find(b"{", start + 1)
    return None


def scan_receipts(path: str | Path) -> Iterator[Receipt | BadLine]:
    """Every receipt of the JSON-lines file ``path`` and a :class:`BadLine` for every
    line that is not one, in file order (blank lines are passed over)."""
    name = str(path)
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            complete = raw.endswith(b"\n")
            raw = raw.strip()
            if not raw:
                continue
            found = _receipt(raw)
            if isinstance(found, Receipt):
                yield found
                continue
            recovered = _after_fragment(raw)
            if recovered is not None:
                dropped, receipt = recovered
                yield BadLine(name, number, "torn_fragment", "", dropped=dropped)
                yield receipt
            elif not complete:
                yield BadLine(
                    name, number, "incomplete", "no newline at the end (being written, or torn)"
                )
            else:
                yield BadLine(name, number, found.problem, found.detail, error=found.error)
