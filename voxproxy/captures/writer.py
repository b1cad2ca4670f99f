"""Writing captures: each call's session inputs to its own file, off the forwarding path.

:class:`CallCapture` is a call's :class:`~voxproxy.core.session.tap.SessionTap`: each input
the session is handed is appended to an in-memory buffer as a record
(:mod:`voxproxy.captures.format`): a struct header and the payload's bytes, nothing
more on the event loop. A buffer of :attr:`CaptureSettings.chunk_bytes` (and the last
one, when the call has its receipt) goes to the :class:`CaptureWriter`'s thread, which
compresses it (zlib releases the GIL while it deflates) and appends it to the call's
file, created ``0600`` in a directory that is ``0700``. A finished capture is renamed to
its call id (the receipt's ``call``, a keyed hash: nothing else links a receipt to its
capture), then the oldest captures are removed while there are more than
``max_calls`` of them or they take more than ``max_bytes``; with ``max_age_s``, also every
capture older than that (when the writer starts, as each capture finishes, and every
:func:`sweep_interval_s` while the proxy runs, calls or none: a capture holds a call's
audio, and an idle proxy must not keep it past its age).

Nothing here ever raises into the proxy or waits for the disk: a capture that cannot be
written (the disk full, the directory gone, more than ``max_pending_bytes`` waiting for
the thread, a call larger than ``max_bytes``) is abandoned, its file removed, counted in
:attr:`CaptureWriter.failed` and logged once; the call goes on, measured and forwarded
as ever.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import stat
import struct
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

import orjson

from voxproxy.captures.format import (
    AGENT,
    DISABLED,
    RECORD,
    SHED,
    SUFFIX,
    TEXT,
    CaptureHeader,
    Kind,
    event_bytes,
)
from voxproxy.core.errors import ConfigError
from voxproxy.core.events import Audio, Direction, StageMark, ToolEvent
from voxproxy.core.receipt import CloseInfo

if TYPE_CHECKING:
    from voxproxy.core.receipt import Receipt

log = logging.getLogger("voxproxy.captures")
T = TypeVar("T")

DEFAULT_MAX_CALLS = 1000
DEFAULT_MAX_BYTES = 1 << 30
DEFAULT_MAX_PENDING_BYTES = 64 << 20
DEFAULT_CHUNK_BYTES = 64 << 10
PART = ".part"  # a capture being written (or left by a proxy that was killed)
# zlib's fastest: on scripted Twilio calls 92 MB/s for 0.353 of the wire, level 6 62 MB/s
# for 0.339 (docs/captures.md, benchmarks/capture.py).
LEVEL = 1


@dataclass(frozen=True, slots=True)
class CaptureSettings:
    """``voxproxy proxy --capture DIR``: where, and how much disk the captures may take
    (the newest ``max_calls`` and at most ``max_bytes`` of finished ones are kept, none
    older than ``max_age_s`` when it is set)."""

    directory: Path
    max_calls: int = DEFAULT_MAX_CALLS
    max_bytes: int = DEFAULT_MAX_BYTES
    max_age_s: float | None = None
    # Compressed buffers waiting for the writer's thread, all calls: past it a call's
    # capture is abandoned (a disk that cannot keep up never holds the loop or memory).
    max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES
    chunk_bytes: int = DEFAULT_CHUNK_BYTES

    def __post_init__(self) -> None:
        if self.max_calls < 1 or self.max_bytes < 1:
            raise ConfigError("--capture-max-calls and --capture-max-bytes must be positive")
        if self.max_age_s is not None and self.max_age_s <= 0:
            raise ConfigError("--capture-max-age must be positive")


def sweep_interval_s(max_age_s: float) -> float:
    """How often the writer looks for captures past ``max_age_s``: a twentieth of it (a
    capture outlives its age by at most 5%), at least every minute, at most every second."""
    return min(max(max_age_s / 20.0, 1.0), 60.0)


def prepare_directory(directory: Path) -> None:
    """Create the capture directory ``0700``, or check that an existing one is the
    owner's alone and writable: a capture holds the calls' audio. Raises
    :class:`ConfigError` with one line."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = directory.stat()
    except OSError as exc:
        raise ConfigError(f"--capture {directory}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"--capture {directory}: not a directory")
    if st.st_mode & 0o077:
        raise ConfigError(
            f"--capture {directory}: others may read it (mode {stat.S_IMODE(st.st_mode):04o}); "
            f"captures hold the calls' audio: chmod 700 {directory}"
        )
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ConfigError(f"--capture {directory}: not writable")


class CallCapture:
    """One call's capture (a :class:`~voxproxy.core.session.tap.SessionTap`): records in a
    buffer, handed to the writer's thread a chunk at a time. Never raises."""

    __slots__ = (
        "_buf",
        "_chunk",
        "_deflate",
        "_file",
        "_label",
        "_t",
        "_writer",
        "built",
        "dead",
        "header",
        "path",
        "size",
    )

    def __init__(self, writer: CaptureWriter, header: CaptureHeader) -> None:
        self._writer = writer
        self.header = header
        self._buf = bytearray()
        self._chunk = writer.settings.chunk_bytes
        self._t = header.start_ns
        self._label: str | None = None
        self.dead = False  # abandoned: what comes is dropped
        self.built: Receipt | None = None  # the session's receipt, until published
        # The writer thread's alone:
        self._file: BinaryIO | None = None
        self._deflate = zlib.compressobj(LEVEL)
        self.path: Path | None = None
        self.size = 0

    def _add(self, kind: int, flags: int, t_ns: int, payload: bytes) -> None:
        buf = self._buf
        buf += RECORD.pack(kind, flags, t_ns - self._t, len(payload))
        buf += payload
        self._t = t_ns
        if len(buf) >= self._chunk:
            self._hand_over(None)

    # -- the session's inputs --------------------------------------------------------------

    def message(
        self, direction: Direction, payload: bytes | str, t_ns: int, shed: bool, disabled: bool
    ) -> None:
        if self.dead:
            return
        try:
            flags = AGENT if direction else 0
            if isinstance(payload, str):
                data = payload.encode()
                flags |= TEXT
            else:
                data = payload
            if shed:
                flags |= SHED
            if disabled:
                flags |= DISABLED
            self._add(Kind.MESSAGE, flags, t_ns, data)
        except Exception as exc:
            self.abandon(f"a message could not be recorded ({exc})")

    def audio(self, audio: Audio, wire_bytes: int, disabled: bool) -> None:
        if self.dead:
            return
        try:
            flags = (AGENT if audio.direction else 0) | (DISABLED if disabled else 0)
            head = audio.sample_rate_hz.to_bytes(4, "little") + wire_bytes.to_bytes(4, "little")
            samples = audio.pcm.astype("<i2", copy=False).tobytes()
            self._add(Kind.AUDIO, flags, audio.t_ns, head + samples)
        except Exception as exc:
            self.abandon(f"audio could not be recorded ({exc})")

    def event(self, ev: ToolEvent | StageMark) -> None:
        if not self.dead:
            try:
                self._add(Kind.EVENT, 0, ev.t_ns, event_bytes(ev))
            except Exception as exc:
                self.abandon(f"an event could not be recorded ({exc})")

    def upstream(self, t_ns: int) -> None:
        if not self.dead:
            self._add(Kind.UPSTREAM, 0, t_ns, b"")

    def anomaly(self, kind: str, count: int) -> None:
        if not self.dead:
            self._add(Kind.ANOMALY, 0, self._t, orjson.dumps({"kind": kind, "count": count}))

    def unmeasured(self, direction: Direction, messages: int, wire_bytes: int) -> None:
        if not self.dead:
            counts = struct.pack("<QQ", messages, wire_bytes)
            self._add(Kind.UNMEASURED, AGENT if direction else 0, self._t, counts)

    def error(self) -> None:
        if not self.dead:
            self._add(Kind.ERROR, 0, self._t, b"")

    def closed(
        self, end_ns: int, terminal: str, close: CloseInfo, dialect: str | None, disabled: bool
    ) -> None:
        if self.dead:
            return
        try:
            body = {"terminal": terminal, "close": close.model_dump(), "dialect": dialect}
            self._add(Kind.CLOSE, DISABLED if disabled else 0, end_ns, orjson.dumps(body))
        except Exception as exc:
            self.abandon(f"the close could not be recorded ({exc})")

    # -- from the shell ------------------------------------------------------------------

    def label(self, label: str) -> None:
        """WebRTC: the data channel the next messages came on (recorded when it changes)."""
        if not self.dead and label != self._label:
            self._label = label
            self._add(Kind.LABEL, 0, self._t, label.encode())

    def answers(self, question: str, ask: Callable[..., T]) -> Callable[..., T]:
        """``ask`` (a question the session puts to its shell: ``clock_lag``, how late the
        loop's clock readings in an interval may be; ``downstream``, how late a WebRTC
        caller may have heard the agent), each of its answers recorded."""

        def asked(*args: int) -> T:
            value = ask(*args)
            if not self.dead:
                try:
                    body = {"q": question, "args": args, "value": value}
                    answer = orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
                    self._add(Kind.ANSWER, 0, self._t, answer)
                except Exception as exc:
                    self.abandon(f"an answer could not be recorded ({exc})")
            return value

        return asked

    def finish(self, call: str, added: dict[str, Any] | None = None) -> None:
        """The call has its receipt (``call``: its call id, the file's name; ``added``:
        the receipt's fields its transport set, as JSON): the last records go to the
        thread, which completes the file."""
        if self.dead:
            return
        self._add(Kind.END, 0, self._t, orjson.dumps({"call": call, "added": added or {}}))
        self._hand_over(call)

    def abandon(self, why: str) -> None:
        """Give up this call's capture (its file is removed); counted and logged once."""
        if self.dead:
            return
        self.dead = True
        self._buf = bytearray()
        self._writer.abandoned(self, why)

    def _hand_over(self, final: str | None) -> None:
        chunk, self._buf = self._buf, bytearray()
        if not self._writer.submit(self, chunk, final):
            self.abandon(
                f"more than {self._writer.settings.max_pending_bytes >> 20} MiB waiting for the "
                "disk"
            )


class CaptureWriter:
    """Every call's capture of one proxy process: a thread that compresses and writes,
    the disk bound, the counts. :meth:`close` waits for what is queued."""

    def __init__(self, settings: CaptureSettings) -> None:
        prepare_directory(settings.directory)
        self.settings = settings
        self.written = 0  # captures completed
        self.failed = 0  # captures abandoned (each logged)
        self.removed = 0  # captures removed to keep the disk bound
        self._pending = 0  # bytes handed to the thread, not yet written
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[tuple[CallCapture, bytearray | None, str | None] | None]
        self._queue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._seq = 0
        # Names of the files being written: unique to this writer (another in this process,
        # a --workers sibling) whatever the calls' ids.
        self._prefix = f".{os.getpid()}-{os.urandom(4).hex()}"
        if settings.max_age_s is not None:
            # Captures of an earlier run past their age go now; the thread then looks
            # again every sweep_interval_s, calls or none.
            self._keep_bound()
            self._start()
        left = sum(1 for p in settings.directory.glob(f".*{SUFFIX}{PART}"))
        if left:
            log.warning(
                "%s holds %d unfinished capture(s) of an earlier run (voxproxy analyze calls "
                "them truncated)",
                settings.directory,
                left,
            )

    def open_call(self, header: CaptureHeader) -> CallCapture:
        return CallCapture(self, header)

    # -- from the loop --------------------------------------------------------------------

    def submit(self, capture: CallCapture, chunk: bytearray, final: str | None) -> bool:
        """Hand a chunk (and, ``final``, the file's name) to the thread; False when too
        much already waits."""
        with self._lock:
            if self._pending + len(chunk) > self.settings.max_pending_bytes:
                return False
            self._pending += len(chunk)
        self._start()
        self._queue.put((capture, chunk, final))
        return True

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="voxproxy-captures", daemon=True)
            self._thread.start()

    def abandoned(self, capture: CallCapture, why: str) -> None:
        self.count_failure()
        log.warning("a call's capture was abandoned (the call goes on): %s", why)
        if self._thread is not None:
            self._queue.put((capture, None, None))  # its file, if any, is removed

    def close(self, timeout_s: float = 30.0) -> None:
        """Write what is queued, then stop the thread."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout_s)

    def count_failure(self) -> None:
        with self._lock:  # (the loop and the thread both count)
            self.failed += 1

    # -- the thread -----------------------------------------------------------------------

    def _run(self) -> None:
        max_age = self.settings.max_age_s
        every = None if max_age is None else sweep_interval_s(max_age)
        while True:
            try:
                item = self._queue.get(timeout=every)
            except queue.Empty:  # (only with an age bound) a look for captures past it
                try:
                    self._keep_bound()
                except OSError as exc:
                    log.warning("old captures could not be removed: %s", exc)
                continue
            if item is None:
                return
            capture, chunk, final = item
            try:
                if chunk is None:
                    _discard(capture)
                elif not capture.dead:
                    self._write(capture, chunk, final)
            except OSError as exc:
                capture.dead = True
                _discard(capture)
                self.count_failure()
                log.warning("a call's capture could not be written (the call goes on): %s", exc)
            finally:
                if chunk is not None:
                    with self._lock:
                        self._pending -= len(chunk)

    def _write(self, capture: CallCapture, chunk: bytearray, final: str | None) -> None:
        if capture._file is None:
            self._seq += 1
            directory = self.settings.directory
            path = directory / f"{self._prefix}-{self._seq}{SUFFIX}{PART}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
            capture._file = open(os.open(path, flags, 0o600), "wb")  # noqa: SIM115
            capture.path = path
            capture._file.write(capture.header.to_bytes())
        out = capture._file
        data = capture._deflate.compress(chunk)
        if final is not None:
            data += capture._deflate.flush()
        out.write(data)
        capture.size += len(data)
        if capture.size > self.settings.max_bytes:
            capture.dead = True
            _discard(capture)
            self.count_failure()
            log.warning(
                "a call's capture was abandoned (the call goes on): larger than "
                "--capture-max-bytes (%d bytes)",
                self.settings.max_bytes,
            )
            return
        if final is not None:
            out.close()
            capture._file = None
            assert capture.path is not None
            capture.path = _publish(capture.path, self.settings.directory, final)
            self.written += 1
            self._keep_bound()

    def _keep_bound(self) -> None:
        """Remove the oldest finished captures while there are more than ``max_calls``
        or they take more than ``max_bytes``, and any older than ``max_age_s``."""
        max_age = self.settings.max_age_s
        oldest = None if max_age is None else time.time_ns() - round(max_age * 1e9)
        found: list[tuple[int, int, str]] = []
        with os.scandir(self.settings.directory) as entries:
            for e in entries:
                if e.name.endswith(SUFFIX) and not e.name.startswith("."):
                    try:
                        st = e.stat()
                    except OSError:
                        continue  # removed meanwhile (another worker's bound)
                    found.append((st.st_mtime_ns, st.st_size, e.path))
        found.sort()
        total = sum(size for _t, size, _p in found)
        count = len(found)
        for t, size, path in found:
            over = count > self.settings.max_calls or total > self.settings.max_bytes
            if not over and (oldest is None or t >= oldest):
                break
            try:
                os.unlink(path)
                self.removed += 1
            except FileNotFoundError:
                pass
            count -= 1
            total -= size


def _publish(part: Path, directory: Path, call: str) -> Path:
    """Give a finished capture its name, ``CALL.vxcap`` (``CALL-2.vxcap`` ... when the
    call id was captured before: a caller that reconnected), never replacing a file."""
    n = 1
    while True:
        target = directory / (f"{call}{SUFFIX}" if n == 1 else f"{call}-{n}{SUFFIX}")
        try:
            os.link(part, target)
        except FileExistsError:
            n += 1
            continue
        except OSError:  # no hard links here: a rename, after a look
            if target.exists():
                n += 1
                continue
            os.rename(part, target)
            return target
        os.unlink(part)
        return target


def _discard(capture: CallCapture) -> None:
    """Close and remove the capture's file, if it has one (thread side)."""
    if capture._file is not None:
        with contextlib.suppress(OSError):
            capture._file.close()
        capture._file = None
    if capture.path is not None:
        with contextlib.suppress(OSError):
            os.unlink(capture.path)
        capture.path = None
