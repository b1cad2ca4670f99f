"""The proxy's live calls, by every id an agent or its tool backend may know them by.

* the link id the proxy hands upstream in ``X-Voxproxy-Call``;
* the wire's own call ids (Twilio ``callSid`` and ``streamSid``);
* the receipt's pseudonymous call id (``c_`` + keyed hash).

Wire ids are content (they name a phone call), so they are never kept, not
even in memory: the registry holds their keyed hashes (the same hash the
receipt's ``call`` field uses), and a lookup hashes the id it is given.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar

import orjson

from voxproxy.core.ids import keyed_hash

T = TypeVar("T")

CALL_PREFIX = "c_"
_WIRE_ID_KEYS = ("streamSid", "callSid")


def wire_ids(payload: bytes | str) -> list[str]:
    """The Twilio stream and call ids in one message (its ``start``, or any ``media``)."""
    if not isinstance(payload, str) or "Sid" not in payload:
        return []
    try:
        # orjson, as the dialects parse: the same messages parse, the same ones fail
        # (json.loads raises RecursionError on a message nested ~1000 deep).
        msg = orjson.loads(payload)
    except Exception:
        return []
    if not isinstance(msg, dict):
        return []
    found: list[str] = []
    for holder in (msg, msg.get("start")):
        if isinstance(holder, dict):
            for key in _WIRE_ID_KEYS:
                value = holder.get(key)
                if isinstance(value, str) and value and value not in found:
                    found.append(value)
    return found


class LiveCalls(Generic[T]):
    """Live calls by link id and by keyed hashes of wire ids."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret
        self._by_key: dict[str, T] = {}
        self._keys: dict[int, list[str]] = {}  # id(call) -> its keys

    def __len__(self) -> int:
        return len(self._keys)

    def _hash(self, raw: str) -> str:
        return keyed_hash(self._secret, raw, CALL_PREFIX)

    def _add(self, call: T, key: str) -> None:
        keys = self._keys.setdefault(id(call), [])
        if key not in keys:
            keys.append(key)
        self._by_key[key] = call

    def add_link(self, call: T, link_id: str) -> None:
        """Register a call under the link id the proxy sends upstream."""
        self._add(call, "link:" + link_id)
        self._add(call, "hash:" + self._hash(link_id))

    def add_wire(self, call: T, call_hash: str | None, raw_ids: Iterable[str]) -> None:
        """Register a call under the wire's ids. ``raw_ids`` are hashed and dropped."""
        if call_hash:
            self._add(call, "hash:" + call_hash)
        for raw in raw_ids:
            self._add(call, "hash:" + self._hash(raw))

    def remove(self, call: T) -> None:
        for key in self._keys.pop(id(call), []):
            if self._by_key.get(key) is call:
                del self._by_key[key]

    def find(self, ident: str) -> T | None:
        """The live call ``ident`` names (a link id, a wire id or a receipt call id)."""
        if not ident:
            return None
        hit = self._by_key.get("link:" + ident)
        if hit is None:
            hit = self._by_key.get("hash:" + self._hash(ident))
        if hit is None and ident.startswith(CALL_PREFIX):
            hit = self._by_key.get("hash:" + ident)
        return hit
