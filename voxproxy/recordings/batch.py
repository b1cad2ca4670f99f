"""Many recordings at once: one process per core, a progress bar, a line per damaged file.

Each recording is a :class:`Job` (one dual-channel file, or a mono pair with its
offset); :func:`run_batch` hands the jobs to a pool of worker processes
(:mod:`concurrent.futures`), each of which reads, measures and judges its recording
(:func:`analyze_one`) and sends back the receipt as JSON. A file that cannot be read
(empty, truncated, not audio, the wrong channel count) comes back as an
:class:`Outcome` with its one-line error and the batch goes on; so does any failure of
the analysis itself, named but never a traceback. Outcomes keep the order of the jobs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

from voxproxy.core.errors import VoxproxyError
from voxproxy.core.receipt import Receipt
from voxproxy.core.session import SessionConfig
from voxproxy.receipts.policy import Policy
from voxproxy.receipts.verdict import judged
from voxproxy.recordings.files import (
    DEFAULT_CHANNELS,
    SUFFIXES,
    Recording,
    read_pair,
    read_stereo,
)
from voxproxy.recordings.measure import DEFAULT_CHUNK_MS, measure


@dataclass(frozen=True, slots=True)
class Job:
    """One recording to analyse: a dual-channel file (``paths`` of one) or a mono pair
    (caller's file, agent's file) whose agent starts ``offset_ms`` after its caller."""

    paths: tuple[str, ...]
    channels: tuple[str, str] = DEFAULT_CHANNELS
    offset_ms: float = 0.0

    @property
    def label(self) -> str:
        return " + ".join(self.paths)

    def read(self) -> Recording:
        if len(self.paths) == 2:
            return read_pair(self.paths[0], self.paths[1], self.offset_ms)
        return read_stereo(self.paths[0], self.channels)


@dataclass(frozen=True, slots=True)
class Options:
    """What every job is analysed with. It crosses to the worker processes by pickle, so
    it holds no measurement-core object (a compiled core's frozen dataclasses do not
    unpickle): each worker makes its own :class:`SessionConfig`."""

    secret: bytes
    policy: Policy
    chunk_ms: int = DEFAULT_CHUNK_MS
    echo: bool = True


@dataclass(frozen=True, slots=True)
class Outcome:
    """A job's receipt (a JSON line, judged) or the one line that says why it has none;
    ``audio_s``: the recording's length, ``cpu_s``: the CPU its analysis took, ``pid``:
    the process that took it."""

    job: Job
    receipt_json: str | None = None
    error: str | None = None
    audio_s: float = 0.0
    cpu_s: float = 0.0
    pid: int = 0  # the process that analysed it

    @property
    def receipt(self) -> Receipt | None:
        if self.receipt_json is None:
            return None
        return Receipt.model_validate_json(self.receipt_json)


def started_wall_ns(rec: Recording) -> int:
    """When the call started, as far as the files tell: a recorder writes its file as the
    call ends, so the newest file's modification time less the recording's length."""
    mtime = max(Path(p).stat().st_mtime_ns for p in rec.paths)
    return mtime - rec.duration_ns


Measurer = Callable[[Job, Options], tuple[Receipt, float]]
"""Reads and measures one job: its receipt (not yet judged) and its length in seconds."""


@dataclass(frozen=True, slots=True)
class SourceKind:
    """A kind of file ``voxproxy analyze`` reads besides recordings: what its first bytes
    look like (``sniff``), the suffixes a folder is searched for, and its measurer. The
    plug for captures of the proxy's wire (issue 38, part 2): their reader registers one
    (:func:`register_source`) that replays the messages through ``CallSession.on_message``
    and says ``source: capture``; everything else (the batch, the verdicts, the outputs,
    the report) stays as it is."""

    name: str
    sniff: Callable[[bytes], bool]
    suffixes: tuple[str, ...]
    measure: Measurer


SOURCES: list[SourceKind] = []
SNIFF_BYTES = 16


def register_source(kind: SourceKind) -> None:
    """Let ``voxproxy analyze`` read another kind of file (first registered, first asked)."""
    SOURCES.append(kind)


def source_suffixes() -> tuple[str, ...]:
    """Every suffix a folder is searched for: the recordings' and the registered kinds'."""
    return tuple(dict.fromkeys([*SUFFIXES, *(x for k in SOURCES for x in k.suffixes)]))


def _source_of(job: Job) -> SourceKind | None:
    if len(job.paths) != 1 or not SOURCES:
        return None
    try:
        with open(job.paths[0], "rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return None  # the recording reader says what is wrong with it
    return next((k for k in SOURCES if k.sniff(head)), None)


def measure_recording(job: Job, options: Options) -> tuple[Receipt, float]:
    """A recording's receipt: read, measured through the core (``source: recording``)."""
    rec = job.read()
    measured = measure(
        rec,
        secret=options.secret,
        config=SessionConfig(),
        started_wall_ns=started_wall_ns(rec),
        chunk_ms=options.chunk_ms,
        echo=options.echo,
    )
    return measured.receipt, rec.duration_ns / 1e9


def analyze_one(job: Job, options: Options) -> Outcome:
    """Read, measure and judge one recording (or a file of a registered kind). Never
    raises: a failure is the outcome's one-line ``error``."""
    cpu0 = time.process_time()
    try:
        kind = _source_of(job)
        receipt, audio_s = (kind.measure if kind is not None else measure_recording)(job, options)
        receipt = judged(receipt, options.policy)
    except VoxproxyError as exc:
        return Outcome(job, error=str(exc), cpu_s=time.process_time() - cpu0, pid=os.getpid())
    except MemoryError:
        return Outcome(job, error="too large to analyse in this much memory")
    except Exception as exc:  # a bug of ours: named, and the batch goes on
        return Outcome(job, error=f"internal error ({type(exc).__name__}: {exc})")
    return Outcome(
        job,
        receipt_json=receipt.model_dump_json(by_alias=True),
        audio_s=audio_s,
        cpu_s=time.process_time() - cpu0,
        pid=os.getpid(),
    )


def _in_pool(
    pool: ProcessPoolExecutor,
    n: int,
    jobs: Sequence[Job],
    options: Options,
    results: list[Outcome | None],
    on_done: Callable[[Outcome], None] | None,
) -> None:
    """Keep ``2 n`` jobs submitted at a time until every one has its outcome."""
    pending: dict[Future[Outcome], int] = {}
    queue = [i for i in range(len(jobs)) if results[i] is None]
    queue.reverse()

    def submit() -> None:
        i = queue.pop()
        pending[pool.submit(analyze_one, jobs[i], options)] = i

    for _ in range(min(2 * n, len(queue))):  # a few ahead per worker, not all at once
        submit()
    while pending:
        done, _ = wait(pending, return_when=FIRST_COMPLETED)
        for fut in done:
            i = pending.pop(fut)
            out = fut.result()  # analyze_one never raises; a dead worker raises here
            results[i] = out
            if on_done is not None:
                on_done(out)
            if queue:
                submit()


def default_workers() -> int:
    """One worker per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def run_batch(
    jobs: Sequence[Job],
    options: Options,
    *,
    workers: int | None = None,
    on_done: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Every job's outcome, in the jobs' order. ``workers``: processes (default: one per
    core; 1 runs in this process). ``on_done`` is called as each finishes."""
    n = min(workers or default_workers(), max(1, len(jobs)))
    results: list[Outcome | None] = [None] * len(jobs)
    if n == 1:
        for i, job in enumerate(jobs):
            results[i] = out = analyze_one(job, options)
            if on_done is not None:
                on_done(out)
        return [r for r in results if r is not None]
    try:
        with ProcessPoolExecutor(max_workers=n) as pool:
            _in_pool(pool, n, jobs, options, results, on_done)
    except BrokenProcessPool:
        # A worker died (killed, out of memory): what it and the others had not finished is
        # analysed here, one after the other; the batch goes on.
        for i, job in enumerate(jobs):
            if results[i] is None:
                results[i] = out = analyze_one(job, options)
                if on_done is not None:
                    on_done(out)
    return [r for r in results if r is not None]
