"""The journal of calls in progress: a proxy that is killed loses no receipt.

A receipt is written when its call ends, so a proxy killed with ``kill -9`` (or
by the OOM killer, or a power cut) used to lose the receipts of every call in
progress. The journal is a small JSON-lines file next to the receipts file
(``receipts.jsonl`` -> ``receipts.jsonl.open-calls``) that says which calls are
open and what is known of each:

- ``{"open": KEY, ...}`` when a call starts: its start (wall clock), transport,
  the dialect configured, and its receipt call id as known then;
- ``{"set": KEY, ...}`` as it gets further: the agent answered
  (``upstream_connect_ms``), the wire named the call (``call``, ``dialect``);
- ``{"alive": WALL_NS}`` every few seconds while calls are open, so that a crash
  is placed in time to within that interval;
- ``{"close": KEY}`` once the call's receipt is on disk (the receipt writer says
  so; see :class:`~voxproxy.receipts.writer.ReceiptWriter`'s ``on_written``).

At the next start, :meth:`CallJournal.open` reads what the last process left:
every call still open gets a receipt with terminal ``proxy_crashed``, its start,
dialect and call id, how far it got (``upstream_connect_ms``) and its duration up
to the last sign of life; those receipts go through the writer like any other,
and leave the journal once written. The journal holds no content: keyed-hash
call ids, times, enumerations.

Each line is one ``write`` to a file opened with ``O_APPEND``: it reaches the
kernel at once (a killed process loses nothing it wrote; only a machine crash
could, and the receipts file is fsynced for that). The file is rewritten with
only the open calls whenever it has grown past :data:`COMPACT_LINES` lines. One
process per receipts file.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from voxproxy.core.receipt import Receipt
from voxproxy.core.timebase import parse_utc

log = logging.getLogger("voxproxy.receipts")

SUFFIX = ".open-calls"
COMPACT_LINES = 4096  # rewrite the file (open calls only) past this many lines
ALIVE_INTERVAL_S = 2.0  # how often the CLI says the process is alive, while calls are open


def journal_path(receipts: str | Path) -> Path:
    receipts = Path(receipts)
    return receipts.with_name(receipts.name + SUFFIX)


TAIL_SLACK_S = 60.0
"""How far before the oldest open call's start :func:`receipts_written` reads on: receipts
are written in about the order their calls end, give or take the writers' queues."""


def receipts_written(
    path: str | Path, wanted: set[tuple[str, str]], since_wall_ns: int
) -> set[tuple[str, str]]:
    """Which of ``wanted`` (``(call, started_at)`` pairs) have a receipt in ``path``.

    The file is read backwards from its end, a block at a time, until every one is found
    or the receipts reached ended :data:`TAIL_SLACK_S` before ``since_wall_ns`` (none of
    the wanted calls had started yet): a long receipts file costs only its tail."""
    found: set[tuple[str, str]] = set()
    path = Path(path)
    if not wanted or not path.exists():
        return found
    stop_before = since_wall_ns / 1e9 - TAIL_SLACK_S
    with open(path, "rb") as fh:
        end = fh.seek(0, os.SEEK_END)
        carry = b""
        while end > 0 and found != wanted:
            start = max(0, end - (1 << 16))
            fh.seek(start)
            block = fh.read(end - start) + carry
            end = start
            lines = block.split(b"\n")
            carry = lines.pop(0) if start > 0 else b""  # may be cut: read with the next block
            for line in reversed(lines):
                ident, ended_s = _receipt_ident(line)
                if ident is None:
                    continue
                if ident in wanted:
                    found.add(ident)
                elif ended_s is not None and ended_s < stop_before:
                    return found
    return found


def _receipt_key(entry: dict[str, Any]) -> tuple[str, str]:
    """What names a call's receipt, in a journal entry or a receipt: ``(call, started_at)``."""
    return (str(entry.get("call")), str(entry.get("started_at")))


def _receipt_ident(line: bytes) -> tuple[tuple[str, str] | None, float | None]:
    """A receipt line's ``(call, started_at)`` and its end (POSIX seconds), or ``None``s."""
    try:
        rec = json.loads(line)
    except ValueError:
        return None, None  # a torn line, or an empty one
    if not isinstance(rec, dict) or "call" not in rec or "started_at" not in rec:
        return None, None
    ident = _receipt_key(rec)
    try:
        ended = parse_utc(str(rec["started_at"])).timestamp()
        ended += float(rec.get("duration_ms", 0.0)) / 1e3
    except (TypeError, ValueError):
        return ident, None
    return ident, ended


class CallJournal:
    """Open calls, on disk. Thread-safe: the receipt writer's thread closes entries."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._open: dict[str, dict[str, Any]] = {}
        self._by_receipt: dict[tuple[str, str], list[str]] = {}  # (call, started_at) -> keys
        self._lines = 0
        self._fd: int | None = None
        self.alive_ns: int | None = None

    @classmethod
    def beside(cls, receipts: str | Path) -> CallJournal:
        return cls(journal_path(receipts))

    # -- start and stop -------------------------------------------------------------------

    def open(self, receipts: str | Path | None = None) -> list[dict[str, Any]]:
        """Read what a previous process left; returns the calls it left open (each with
        ``alive_ns``, its last sign of life), which stay open here until their receipts
        are written.

        A call whose receipt reached ``receipts`` (the receipts file) just before the kill,
        with its ``close`` not yet in the journal, is not left open: it has its receipt,
        and a second one (``proxy_crashed``) would count it twice."""
        left: dict[str, dict[str, Any]] = {}
        alive: int | None = None
        if self.path.exists():
            with open(self.path, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue  # a torn last line
                    if not isinstance(rec, dict):
                        continue
                    if "open" in rec:
                        left[str(rec.pop("open"))] = rec
                    elif "set" in rec:
                        entry = left.get(str(rec.pop("set")))
                        if entry is not None:
                            entry.update(rec)
                    elif "close" in rec:
                        left.pop(str(rec["close"]), None)
                    elif "alive" in rec and isinstance(rec["alive"], int):
                        alive = max(alive or 0, rec["alive"])
        if receipts is not None and left:
            on_disk = receipts_written(
                receipts,
                {_receipt_key(e) for e in left.values()},
                min(int(e.get("start_wall_ns", 0)) for e in left.values()),
            )
            left = {key: e for key, e in left.items() if _receipt_key(e) not in on_disk}
        for entry in left.values():
            entry["alive_ns"] = max(alive or 0, int(entry.get("start_wall_ns", 0)))
        with self._lock:
            self._open = {}
            self._by_receipt = {}
            for key, entry in left.items():
                self._remember(key, entry)
            self._rewrite()
        if left:
            log.warning(
                "%d call(s) were in progress when the last proxy stopped without closing "
                "them: their receipts are written now (terminal proxy_crashed)",
                len(left),
            )
        return [dict(entry, key=key) for key, entry in left.items()]

    def close(self) -> None:
        """Stop journalling; the file is removed when no call is left open in it."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            if not self._open:
                self.path.unlink(missing_ok=True)

    @property
    def open_calls(self) -> int:
        return len(self._open)

    # -- calls ----------------------------------------------------------------------------

    def opened(self, key: str, **fields: Any) -> None:
        with self._lock:
            self._remember(key, dict(fields))
            self._append({"open": key, **fields})

    def update(self, key: str, **fields: Any) -> None:
        with self._lock:
            entry = self._open.get(key)
            if entry is None:
                return
            self._forget_receipt(key, entry)
            entry.update(fields)
            self._index(key, entry)
            self._append({"set": key, **fields})

    def closed(self, key: str) -> None:
        """The call has left (its receipt is written, or it will never have one)."""
        with self._lock:
            entry = self._open.pop(key, None)
            if entry is None:
                return
            self._forget_receipt(key, entry)
            self._append({"close": key})

    def written(self, receipt: Receipt) -> None:
        """A receipt is on disk: its call leaves the journal (the writer's callback)."""
        with self._lock:
            keys = self._by_receipt.get((receipt.call, receipt.started_at))
            if not keys:
                return
            key = keys[0]
            entry = self._open.pop(key)
            self._forget_receipt(key, entry)
            self._append({"close": key})

    def alive(self, wall_ns: int) -> None:
        """The process is alive at ``wall_ns`` (written only while calls are open)."""
        with self._lock:
            self.alive_ns = wall_ns
            if self._open:
                self._append({"alive": wall_ns})

    # -- inside ---------------------------------------------------------------------------

    def _remember(self, key: str, entry: dict[str, Any]) -> None:
        self._open[key] = entry
        self._index(key, entry)

    def _index(self, key: str, entry: dict[str, Any]) -> None:
        ident = _receipt_key(entry)
        self._by_receipt.setdefault(ident, []).append(key)

    def _forget_receipt(self, key: str, entry: dict[str, Any]) -> None:
        ident = _receipt_key(entry)
        keys = self._by_receipt.get(ident)
        if keys is not None and key in keys:
            keys.remove(key)
            if not keys:
                del self._by_receipt[ident]

    def _append(self, record: dict[str, Any]) -> None:
        if self._fd is None:
            return
        if self._lines >= COMPACT_LINES:
            self._rewrite()
        data = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        try:
            os.write(self._fd, data)
            self._lines += 1
        except OSError:
            log.exception("could not write the call journal %s", self.path)

    def _rewrite(self) -> None:
        """The file anew, holding only the open calls (atomically replaced)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        lines = [{"open": key, **entry} for key, entry in self._open.items()]
        if self.alive_ns is not None and self._open:
            lines.append({"alive": self.alive_ns})
        with open(tmp, "w", encoding="utf-8") as fh:
            for rec in lines:
                fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        if self._fd is not None:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        self._lines = len(lines)
