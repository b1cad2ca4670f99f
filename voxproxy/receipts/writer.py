"""Appending receipts to a JSON-lines file without ever blocking the forwarding plane.

A background thread owns the file: each receipt is one ``write`` of one
complete line, then ``flush``, and an ``fsync`` covers what was queued (one per
receipt when calls end slower than the disk syncs, one per group when they end
faster: a group commit, so the writer keeps up), so a process killed mid-write
leaves only complete lines behind, except possibly a torn last one that
readers skip (see :func:`read_receipts`). A writer opening a file that ends in
such a torn line cuts it off first, so that its own lines never get glued to
the fragment and every complete line of the file stays a receipt.

Several processes may append to one file (``voxproxy proxy --workers N``): the
file is opened with ``O_APPEND`` and each line is written and flushed under an
exclusive ``flock``, which the torn-tail cut takes too, so lines never interleave
and no writer cuts another's line in progress.
"""

from __future__ import annotations

import fcntl
import logging
import os
import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from voxproxy.core.receipt import Receipt

log = logging.getLogger("voxproxy.receipts")

GROUP_MAX = 256
"""The most receipts one ``fsync`` covers: a writer that fell behind (calls ending faster
than the disk syncs) catches up in groups, so its backlog, and the calls a kill would
leave to the journal, stay small."""

STOP = object()
"""What ``close`` queues for a :class:`BackgroundSink`'s thread: finish and return."""


class BackgroundSink:
    """A receipt sink whose work runs on a thread of its own: ``write`` only queues; the
    thread (``_run``, until it takes :data:`STOP`) counts what it ``written`` and
    ``failed``; ``close`` lets it finish what is queued, then stops it."""

    def _start(self, name: str) -> None:
        self._queue: queue.Queue[object] = queue.Queue()
        self.written = 0
        self.failed = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Finish what is queued, then stop."""
        self._queue.put(STOP)
        self._thread.join()


def cut_torn_tail(path: Path) -> int:
    """Truncate ``path`` after its last newline; returns the bytes cut (0 if none)."""
    if not path.exists():
        return 0
    with open(path, "rb+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)  # released on close
        size = fh.seek(0, os.SEEK_END)
        end = size
        while end > 0:
            start = max(0, end - 65536)
            fh.seek(start)
            block = fh.read(end - start)
            i = block.rfind(b"\n")
            if i >= 0:
                keep = start + i + 1
                break
            end = start
        else:
            keep = 0
        if keep < size:
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())
        return size - keep


class ReceiptWriter(BackgroundSink):
    """``on_written`` is called (on the writer's thread) with each receipt once its line
    is on disk: the call journal closes the call then (see :mod:`.journal`)."""

    def __init__(
        self,
        path: str | Path,
        *,
        fsync: bool = True,
        on_written: Callable[[Receipt], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self._on_written = on_written
        self.path.parent.mkdir(parents=True, exist_ok=True)
        cut = cut_torn_tail(self.path)
        if cut:
            log.warning("%s ended in a torn line (%d bytes, a killed writer): cut off", path, cut)
        self._fsync = fsync
        self._start("receipt-writer")

    def write(self, receipt: Receipt) -> None:
        self._queue.put((receipt.to_json_line(), receipt))

    def _run(self) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            while True:
                batch, stop = self._take()
                if batch:
                    self._commit(fh, batch)
                if stop:
                    return

    def _take(self) -> tuple[list[tuple[str, Receipt]], bool]:
        """What is queued, up to :data:`GROUP_MAX` receipts (waiting for the first), and
        whether :data:`STOP` came after them."""
        batch: list[tuple[str, Receipt]] = []
        item = self._queue.get()
        while True:
            if item is STOP:
                return batch, True
            assert isinstance(item, tuple)
            batch.append(item)
            if len(batch) >= GROUP_MAX:
                return batch, False
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return batch, False

    def _commit(self, fh: TextIO, batch: list[tuple[str, Receipt]]) -> None:
        """Each line of ``batch`` written and flushed under the lock, then one ``fsync``
        for them all; ``on_written`` for each once it is on disk."""
        done: list[Receipt] = []
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)  # other processes' lines
            try:
                for line, receipt in batch:
                    try:
                        fh.write(line)
                        fh.flush()
                    except OSError:
                        self.failed += 1
                        continue
                    done.append(receipt)
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            if self._fsync and done:
                os.fsync(fh.fileno())
        except OSError:
            self.failed += len(done)
            return
        self.written += len(done)
        if self._on_written is not None:
            for receipt in done:
                try:
                    self._on_written(receipt)
                except Exception:
                    log.exception("after writing a receipt")


def read_receipts(path: str | Path) -> Iterator[Receipt]:
    """Every receipt in ``path``, strictly: lines that are not JSON (a torn last line, a
    garbled one) are skipped and a receipt glued to a torn fragment is read (see
    :func:`voxproxy.receipts.lines.scan_receipts`), but a line that is JSON and not a
    receipt raises pydantic's ``ValidationError``, one that is not UTF-8
    ``UnicodeDecodeError``. Commands that should go on past those use ``scan_receipts``."""
    from voxproxy.receipts.lines import scan_receipts

    for item in scan_receipts(path):
        if isinstance(item, Receipt):
            yield item
        elif item.error is not None:
            raise item.error
