"""Pseudonymous ids: keyed hashes."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from voxproxy.core.ids import keyed_hash


def test_deterministic_for_one_secret() -> None:
    assert keyed_hash(b"k1", "CA123") == keyed_hash(b"k1", "CA123")
    assert keyed_hash(b"k1", "CA123") != keyed_hash(b"k1", "CA124")


def test_differs_across_secrets() -> None:
    values = {keyed_hash(s, "CA123") for s in (b"k1", b"k2", b"", b"k3", b"\xff" * 32)}
    assert len(values) == 5


def test_it_is_hmac_sha256() -> None:
    expected = hmac.new(b"k", b"value", hashlib.sha256).hexdigest()
    assert keyed_hash(b"k", "value", length=64) == expected
    assert keyed_hash(b"k", "value") == expected[:16]


@pytest.mark.parametrize(("prefix", "length"), [("", 16), ("c_", 16), ("turn-", 8), ("x", 64)])
def test_prefix_and_length(prefix: str, length: int) -> None:
    h = keyed_hash(b"secret", "CA" + "9" * 32, prefix, length)
    assert h.startswith(prefix)
    digest = h[len(prefix) :]
    assert len(digest) == length
    assert all(c in "0123456789abcdef" for c in digest)


def test_the_value_does_not_appear_in_the_hash() -> None:
    assert "CA123" not in keyed_hash(b"k", "CA123", "c_", 64)


def test_unicode_values() -> None:
    assert keyed_hash(b"k", "José") == keyed_hash(b"k", "Jos\u00e9")
    assert keyed_hash(b"k", "José") != keyed_hash(b"k", "Jose\u0301")  # no normalisation
