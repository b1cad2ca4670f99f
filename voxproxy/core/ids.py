"""Pseudonymous ids: keyed hashes (HMAC-SHA-256) of identifiers seen on the wire, and
the rule that decides which names a receipt may keep as they are.

The secret is handed in: the core draws no random number (a shell makes one with
:func:`voxproxy.clock.new_secret`)."""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any

import orjson


def keyed_hash(secret: bytes, value: str, prefix: str = "", length: int = 16) -> str:
    """``prefix`` + the first ``length`` hex digits of HMAC-SHA-256(secret, value)."""
    digest = hmac.new(secret, value.encode("utf-8"), hashlib.sha256).hexdigest()
    return prefix + digest[:length]


HASH_PREFIX = "h_"  # a hashed value (tool arguments, results, state values) in a receipt


def value_digest(secret: bytes, domain: str, value: Any) -> str:
    """The keyed hash of a raw value posted to the event API (``domain`` keeps the hashes
    of arguments, results and values apart): strings as they are, anything else as
    canonical JSON. The load generator hashes what it expects the same way."""
    text = value if isinstance(value, str) else orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return keyed_hash(secret, f"{domain}\x00{text}", HASH_PREFIX)


NAME_PREFIX = "n_"  # a name (tool, field) replaced by its keyed hash
MAX_PLAIN_NAME_CHARS = 48
_PLAIN_NAME = re.compile(r"[A-Za-z][A-Za-z_.:/-]*")


def name_shaped(name: str) -> bool:
    """Whether ``name`` has the shape of a name and cannot hold a number, an address or
    prose: ASCII letters and ``_ . : / -``, starting with a letter, no digits, at most
    :data:`MAX_PLAIN_NAME_CHARS` characters."""
    return len(name) <= MAX_PLAIN_NAME_CHARS and _PLAIN_NAME.fullmatch(name) is not None


def plain_name(name: str, names: frozenset[str] | None) -> bool:
    """Whether ``name`` may be kept verbatim: in the declared vocabulary ``names``, or,
    with none declared, name-shaped (:func:`name_shaped`)."""
    if names is not None:
        return name in names
    return name_shaped(name)


def name_digest(secret: bytes, name: str) -> str:
    """What a tool or field name that may not be kept becomes: ``n_`` + its keyed hash
    (equal names stay equal within a secret, so retries still pair up)."""
    return keyed_hash(secret, f"name\x00{name}", NAME_PREFIX)


def safe_name(secret: bytes, name: str, names: frozenset[str] | None) -> str:
    """``name`` as a receipt, a span or a log may carry it: itself when :func:`plain_name`
    allows, else :func:`name_digest`. The one rule for every tool and field name, from
    the event API and from the wire alike."""
    return name if plain_name(name, names) else name_digest(secret, name)
