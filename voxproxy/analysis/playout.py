"""The playout model for agent audio (MEASUREMENT.md section 3).

For each agent chunk of duration ``d`` arriving at ``t``::

    start = max(t, cursor); cursor = start + d      # audible over [start, start + d)

A flush at ``t`` drops what is queued beyond ``t`` and sets
``cursor = min(cursor, t)``. The model keeps queued audio until time passes
it, so the speech detector only ever hears what was really audible: audio that
a flush dropped is never analysed. ``downstream_offset_ns`` shifts the whole
timeline by a constant the proxy cannot see (jitter buffer, handset); it is
reported beside the figures it moves.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from voxproxy.events import Pcm

NS_PER_S = 1_000_000_000


@dataclass(slots=True)
class _Queued:
    start_ns: int
    pcm: Pcm


@dataclass(frozen=True, slots=True)
class Released:
    """Audio that became audible: ``pcm`` plays from ``start_ns``."""

    start_ns: int
    pcm: Pcm
    continuous: bool  # True when it starts exactly where the previous release ended


@dataclass(frozen=True, slots=True)
class FlushResult:
    t_ns: int
    dropped_ns: int  # queued audio the flush discarded
    cut_audible: bool  # audio was playing at the flush (the flush ended it)


class Playout:
    """Playout timeline of one agent->caller stream."""

    def __init__(self, sample_rate_hz: int, downstream_offset_ns: int = 0) -> None:
        self.sample_rate_hz = sample_rate_hz
        self.offset_ns = downstream_offset_ns
        self.cursor_ns: int | None = None
        self._queue: deque[_Queued] = deque()
        self._released_until: int | None = None  # end time of the last released sample
        self.chunks = 0
        self.audio_ns = 0  # total audio received
        self.dropped_ns = 0  # total audio discarded by flushes
        self.first_audible_ns: int | None = None

    def _dur(self, n: int) -> int:
        return n * NS_PER_S // self.sample_rate_hz

    def add(self, pcm: Pcm, t_ns: int) -> int:
        """Queue one chunk; returns its start on the playout timeline."""
        t = t_ns + self.offset_ns
        start = t if self.cursor_ns is None else max(t, self.cursor_ns)
        d = self._dur(pcm.size)
        self.cursor_ns = start + d
        self.chunks += 1
        self.audio_ns += d
        if pcm.size:
            self._queue.append(_Queued(start, pcm))
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
            end = q.start_ns + self._dur(q.pcm.size)
            if end <= t:
                keep.append(q)
            elif q.start_ns >= t:
                dropped += end - q.start_ns
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
            d = self._dur(q.pcm.size)
            if q.start_ns + d <= until_ns:
                queue.popleft()
                pcm = q.pcm
            else:
                n = (until_ns - q.start_ns) * self.sample_rate_hz // NS_PER_S
                if n <= 0:
                    break
                pcm = q.pcm[:n]
                q.pcm = q.pcm[n:]
                start = q.start_ns
                q.start_ns = start + self._dur(n)
                out.append(self._mark(start, pcm))
                break
            out.append(self._mark(q.start_ns, pcm))
        return out

    def release_all(self) -> list[Released]:
        return self.release(1 << 62)

    def _mark(self, start_ns: int, pcm: Pcm) -> Released:
        continuous = self._released_until is not None and abs(start_ns - self._released_until) < (
            NS_PER_S // self.sample_rate_hz + 1
        )
        self._released_until = start_ns + self._dur(pcm.size)
        if self.first_audible_ns is None:
            self.first_audible_ns = start_ns
        return Released(start_ns, pcm, continuous)

    @property
    def audible_until_ns(self) -> int | None:
        return self._released_until
