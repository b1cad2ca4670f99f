"""The playout model for agent audio (MEASUREMENT.md section 3).

For each agent chunk of duration ``d`` arriving at ``t``::

    start = max(t, cursor); cursor = start + d      # audible over [start, start + d)

A flush at ``t`` drops what is queued beyond ``t`` and sets
``cursor = min(cursor, t)``. The model keeps queued audio until time passes
it, so the speech detector only ever hears what was really audible: audio that
a flush dropped is never analysed. ``downstream_offset_ns`` shifts the whole
timeline by a constant the proxy cannot see (jitter buffer, handset); it is
reported beside the figures it moves.

What the model needs of audio due minutes from now is where it plays, not its
samples. A chunk that would start playing more than ``max_ahead_ns`` after it
arrived (an agent sending far ahead of real time), or that finds
``max_queued_chunks`` chunks already queued, is kept as its span only: the cursor
advances exactly as before, flushes cut it the same way, and when it plays it is
released as :class:`Released` with ``pcm=None`` (audible, but not analysable).
So the samples held stay within ``max_ahead_ns`` (plus one chunk) of audio,
however far ahead the agent runs.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from voxproxy.core.events import Pcm
from voxproxy.core.timebase import NS_PER_S

MAX_AHEAD_NS = 60 * NS_PER_S  # samples due later than this after their arrival are not kept
MAX_QUEUED_CHUNKS = 8192  # chunks queued with their samples (more: kept as spans only)


# _Queued and Released are made for every chunk of agent audio: plain classes, which the
# compiled build makes native (a dataclass's generated __init__ stays interpreted there).
class _Queued:
    __slots__ = ("pcm", "span_end_ns", "start_ns")

    def __init__(self, start_ns: int, pcm: Pcm | None, span_end_ns: int = 0) -> None:
        self.start_ns = start_ns
        self.pcm = pcm  # None: too far ahead to keep; only its span is known
        self.span_end_ns = span_end_ns  # the end of a span kept without its samples


class Released:
    """Audio that became audible: ``pcm`` plays from ``start_ns`` for ``duration_ns``.

    ``pcm`` is None for audio that played but whose samples were not kept (it was queued
    too far ahead of real time): it cannot be analysed. Read-only."""

    __slots__ = ("continuous", "duration_ns", "pcm", "start_ns")

    def __init__(self, start_ns: int, pcm: Pcm | None, continuous: bool, duration_ns: int) -> None:
        self.start_ns = start_ns
        self.pcm = pcm
        self.continuous = continuous  # it starts exactly where the previous release ended
        self.duration_ns = duration_ns

    def __repr__(self) -> str:
        size = None if self.pcm is None else self.pcm.size
        return (
            f"Released(start_ns={self.start_ns}, samples={size}, "
            f"continuous={self.continuous}, duration_ns={self.duration_ns})"
        )


@dataclass(frozen=True, slots=True)
class FlushResult:
    t_ns: int
    dropped_ns: int  # queued audio the flush discarded
    cut_audible: bool  # audio was playing at the flush (the flush ended it)


class Playout:
    """Playout timeline of one agent->caller stream."""

    def __init__(
        self,
        sample_rate_hz: int,
        downstream_offset_ns: int = 0,
        *,
        max_ahead_ns: int = MAX_AHEAD_NS,
        max_queued_chunks: int = MAX_QUEUED_CHUNKS,
    ) -> None:
        self.sample_rate_hz = sample_rate_hz
        self.offset_ns = downstream_offset_ns
        self.max_ahead_ns = max_ahead_ns
        self.max_queued_chunks = max_queued_chunks
        self.cursor_ns: int | None = None
        self._queue: deque[_Queued] = deque()
        self._released_until: int | None = None  # end time of the last released sample
        self.chunks = 0
        self.audio_ns = 0  # total audio received
        self.dropped_ns = 0  # total audio discarded by flushes
        self.unkept_chunks = 0  # chunks queued as spans only (too far ahead)
        self.unkept_ns = 0  # ... and their audio
        self.first_audible_ns: int | None = None

    def _dur(self, n: int) -> int:
        return n * NS_PER_S // self.sample_rate_hz

    def _end(self, q: _Queued) -> int:
        return q.span_end_ns if q.pcm is None else q.start_ns + self._dur(q.pcm.size)

    def add(self, pcm: Pcm, t_ns: int) -> int:
        """Queue one chunk; returns its start on the playout timeline."""
        t = t_ns + self.offset_ns
        start = t if self.cursor_ns is None else max(t, self.cursor_ns)
        d = self._dur(pcm.size)
        self.cursor_ns = start + d
        self.chunks += 1
        self.audio_ns += d
        if not pcm.size:
            return start
        queue = self._queue
        if start - t <= self.max_ahead_ns and len(queue) < self.max_queued_chunks:
            queue.append(_Queued(start, pcm))
            return start
        self.unkept_chunks += 1
        self.unkept_ns += d
        last = queue[-1] if queue else None
        if last is not None and last.pcm is None and last.span_end_ns == start:
            last.span_end_ns = start + d  # one span for a run of chunks too far ahead
        else:
            queue.append(_Queued(start, None, start + d))
        return start

    def add_span(self, duration_ns: int, t_ns: int) -> int:
        """Queue a chunk by its duration only (its samples are not analysed: measurement
        shed it); it takes its place on the timeline exactly as :meth:`add` would, and is
        released with ``pcm=None``. Returns its start on the playout timeline."""
        t = t_ns + self.offset_ns
        start = t if self.cursor_ns is None else max(t, self.cursor_ns)
        self.cursor_ns = start + duration_ns
        self.chunks += 1
        self.audio_ns += duration_ns
        if duration_ns <= 0:
            return start
        queue = self._queue
        last = queue[-1] if queue else None
        if last is not None and last.pcm is None and last.span_end_ns == start:
            last.span_end_ns = start + duration_ns
        else:
            queue.append(_Queued(start, None, start + duration_ns))
        return start

    def queued_ns(self, t_ns: int) -> int:
        """How much audio is still to play after ``t_ns``."""
        if self.cursor_ns is None:
            return 0
        return max(0, self.cursor_ns - (t_ns + self.offset_ns))

    def playing_at(self, t_ns: int) -> bool:
        return self.queued_ns(t_ns) > 0

    def flush(self, t_ns: int) -> FlushResult:
        """Drop what would play after ``t_ns``."""
        t = t_ns + self.offset_ns
        dropped = 0
        cut = self.cursor_ns is not None and self.cursor_ns > t
        keep: deque[_Queued] = deque()
        for q in self._queue:
            end = self._end(q)
            if end <= t:
                keep.append(q)
            elif q.start_ns >= t:
                dropped += end - q.start_ns
            elif q.pcm is None:
                dropped += end - t
                keep.append(_Queued(q.start_ns, None, t))
            else:
                n = (t - q.start_ns) * self.sample_rate_hz // NS_PER_S
                dropped += end - (q.start_ns + self._dur(n))
                if n:
                    keep.append(_Queued(q.start_ns, q.pcm[:n]))
        self._queue = keep
        if self.cursor_ns is not None:
            self.cursor_ns = min(self.cursor_ns, t)
        self.dropped_ns += dropped
        return FlushResult(t_ns=t, dropped_ns=dropped, cut_audible=bool(cut))

    def release(self, until_ns: int) -> list[Released]:
        """Hand over the audio that has become audible by ``until_ns`` (playout time)."""
        out: list[Released] = []
        queue = self._queue
        while queue and queue[0].start_ns < until_ns:
            q = queue[0]
            start = q.start_ns
            end = self._end(q)
            if end <= until_ns:
                queue.popleft()
                out.append(self._mark(start, q.pcm, end - start))
                continue
            if q.pcm is None:
                q.start_ns = until_ns
                out.append(self._mark(start, None, until_ns - start))
                break
            n = (until_ns - start) * self.sample_rate_hz // NS_PER_S
            if n <= 0:
                break
            pcm = q.pcm[:n]
            q.pcm = q.pcm[n:]
            q.start_ns = start + self._dur(n)
            out.append(self._mark(start, pcm, q.start_ns - start))
            break
        return out

    def release_all(self) -> list[Released]:
        return self.release(1 << 62)

    def drop_queued(self) -> None:
        """Forget what is still queued (the call is over: it will never be heard)."""
        self._queue.clear()

    def _mark(self, start_ns: int, pcm: Pcm | None, duration_ns: int) -> Released:
        continuous = self._released_until is not None and abs(start_ns - self._released_until) < (
            NS_PER_S // self.sample_rate_hz + 1
        )
        self._released_until = start_ns + duration_ns
        if self.first_audible_ns is None:
            self.first_audible_ns = start_ns
        return Released(start_ns, pcm, continuous, duration_ns)

    @property
    def audible_until_ns(self) -> int | None:
        return self._released_until
