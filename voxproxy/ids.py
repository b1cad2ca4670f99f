"""Pseudonymous ids: keyed hashes (HMAC-SHA-256) of identifiers seen on the wire."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

import orjson


def new_secret() -> bytes:
    return secrets.token_bytes(32)


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
