"""Pseudonymous ids: keyed hashes (HMAC-SHA-256) of identifiers seen on the wire."""

from __future__ import annotations

import hashlib
import hmac
import secrets


def new_secret() -> bytes:
    return secrets.token_bytes(32)


def keyed_hash(secret: bytes, value: str, prefix: str = "", length: int = 16) -> str:
    """``prefix`` + the first ``length`` hex digits of HMAC-SHA-256(secret, value)."""
    digest = hmac.new(secret, value.encode("utf-8"), hashlib.sha256).hexdigest()
    return prefix + digest[:length]
