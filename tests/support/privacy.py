"""Structural privacy checks for receipts (and anything else JSON-shaped).

A substring search over a whole receipt line is fragile both ways: a short value
("4281") turns up by chance inside a random hex hash, and a wall-clock field
(``started_at``) turns up whatever date it is. So a receipt is checked field by field:

* every string leaf must have one of the shapes a content-free receipt allows: a keyed
  hash, the one ISO-8601 ``started_at``, a short token (an enumeration, a tool or
  field name, an operation id), or a sentence voxproxy wrote itself (a ``reason``);
* no leaf may equal a value of the caller's, and no leaf that is not a hash or the
  start time may contain one (hashes are opaque: a digit run inside one is chance).

Tests that plant values of their own should still plant long, unlikely sentinels.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

# keyed_hash/value_digest: an optional short prefix, then 8..64 lowercase hex digits.
HASH = re.compile(r"^(?:[a-z]{1,4}_)?[0-9a-f]{8,64}$")
# Enumerations, names and ids a receipt may carry as they are: no spaces, no '@', '+'.
TOKEN = re.compile(r"^[A-Za-z0-9_.:/-]{1,64}$")
TIME_FIELDS = frozenset({"started_at"})
# Sentences voxproxy writes itself (a verdict's reason): free text, still searched.
PROSE_FIELDS = frozenset({"reason"})

HOSTILE_TOOL_NAMES = (
    "lookup_4111111111111111",
    "mail:jane.doe@example.com",
    "call_+14155550123",
    "q" * 300,
    "réserver_table",
    "予約する",
    "lookup\norder",
)
"""Tool names a caller can put on the wire (``session.update`` names the tools) that must
not come out as they are: a card number, a mail address, a phone number, a long name,
non-ASCII names and a line break."""


def string_leaves(doc: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(dotted path, value) for every string, and every dict key, in ``doc``."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield f"{path}.{key}<key>", str(key)
            yield from string_leaves(value, f"{path}.{key}")
    elif isinstance(doc, list | tuple):
        for i, value in enumerate(doc):
            yield from string_leaves(value, f"{path}[{i}]")
    elif isinstance(doc, str):
        yield path, doc


def _field(path: str) -> str:
    return re.sub(r"\[\d+\]", "", path).rsplit(".", 1)[-1]


def content_leaks(doc: Any, values: Iterable[str] = ()) -> list[str]:
    """What in ``doc`` breaks the content-free rules, as readable lines (empty when clean)."""
    if isinstance(doc, str | bytes):
        doc = json.loads(doc)
    wanted = [v.lower() for v in values if v]
    problems: list[str] = []
    for path, value in string_leaves(doc):
        low = value.lower()
        if any(low == v for v in wanted):
            problems.append(f"{path}: holds a value of the caller's: {value!r}")
            continue
        if _field(path) in TIME_FIELDS:
            try:
                dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                problems.append(f"{path}: not an ISO-8601 time: {value!r}")
            continue
        if HASH.match(value):
            continue  # opaque: a keyed hash carries nothing to search for
        if not TOKEN.match(value) and _field(path) not in PROSE_FIELDS:
            problems.append(f"{path}: free text in a receipt: {value!r}")
        problems += [f"{path}: contains {v!r}" for v in wanted if len(v) >= 3 and v in low]
    return problems


def assert_content_free(doc: Any, values: Iterable[str] = ()) -> None:
    problems = content_leaks(doc, values)
    assert not problems, "\n".join(problems)
