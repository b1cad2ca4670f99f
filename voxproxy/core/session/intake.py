"""The caller's audio on its way to the caller's speech detector, kept to real time.

MEASUREMENT.md 1: a frame of duration ``d`` that arrives at ``t`` covers ``[t - d, t]``,
and a caller cannot have captured more audio than the time since the call started.
:class:`CallerIntake` hands the detector a message's audio as far as it keeps to that
(within :data:`~voxproxy.core.session.config.CALLER_AHEAD_TOLERANCE_MS`: jitter and a burst
after a network stall stay inside it), counts what runs further ahead, and keeps the
span of audio whose analysis was shed, so the detector never walks across what it
missed. Compiled with the measurement core (``voxproxy/native.py``).
"""

from __future__ import annotations

from collections import Counter, deque
from typing import TYPE_CHECKING

from voxproxy.core.events import CALLER_TO_AGENT, AnomalyKind
from voxproxy.core.session.config import CALLER_AHEAD_TOLERANCE_MS
from voxproxy.core.timebase import NS_PER_MS

if TYPE_CHECKING:  # annotations only
    from voxproxy.core.analysis.vad import SpeechDetector
    from voxproxy.core.audio.resample import Converter
    from voxproxy.core.events import Pcm
    from voxproxy.core.session.evidence import Evidence

AHEAD_NS = int(CALLER_AHEAD_TOLERANCE_MS * NS_PER_MS)
CHUNKS_KEPT = 256  # the last messages' durations, for the receipt's settings


class CallerIntake:
    """One call's caller audio: what was analysed, what ran ahead, what was shed.

    ``chunk_ns``: the durations of the last :data:`CHUNKS_KEPT` messages;
    ``max_chunk_ns``: the longest audio a message has handed the detector (the
    watermark waits that long for audio still to come); ``unanalysed_ns``: caller audio
    not analysed (too far ahead of real time, or shed)."""

    def __init__(self, start_ns: int, anomalies: Counter[str], evidence: Evidence) -> None:
        self._start_ns = start_ns
        self._anomalies = anomalies
        self._evidence = evidence
        self.chunk_ns: deque[int] = deque(maxlen=CHUNKS_KEPT)
        self.analysed_ns = 0  # caller audio handed to analysis (bounded by real time)
        self.unanalysed_ns = 0
        self.max_chunk_ns = 20 * NS_PER_MS
        self._broken = False  # audio was shed: the next push starts afresh

    def take(
        self, det: SpeechDetector, src: Pcm, rate: int, t_ns: int, conv: Converter, dur: int
    ) -> None:
        """A message's audio (``dur`` long, at ``rate``, arrived at ``t_ns``) to ``det``.

        Audio running further ahead of real time than the tolerance is counted
        (``caller_audio_ahead``, ``caller_audio_unanalysed_ms``) and not analysed: the
        analysis a caller can ask for stays within real time. Of a message that overruns,
        its most recent part (ending at ``t_ns``) is analysed."""
        self.chunk_ns.append(dur)
        size = src.size
        budget = t_ns - self._start_ns + AHEAD_NS - self.analysed_ns
        keep = min(size, max(0, budget) * rate // 1_000_000_000)
        if keep < size:
            self._anomalies[AnomalyKind.CALLER_AUDIO_AHEAD.value] += 1
            self.unanalysed_ns += dur - keep * 1_000_000_000 // rate
            src = src[size - keep :]
            splice = t_ns - keep * 1_000_000_000 // rate
            self._evidence.note_unheard(CALLER_TO_AGENT, splice, splice)  # before it: unheard
        kept_ns = dur if keep == size else keep * 1_000_000_000 // rate
        self.analysed_ns += kept_ns
        if kept_ns > self.max_chunk_ns:
            self.max_chunk_ns = kept_ns
        if conv.in_rate_hz == conv.out_rate_hz:  # the detector's rate: as it is
            if keep:
                det.push(src, t_ns - kept_ns, continuous=not self._broken)
                self._broken = False
            return
        pcm = conv.convert(src)
        if pcm.size:
            out_dur = pcm.size * 1_000_000_000 // conv.out_rate_hz
            det.push(pcm, t_ns - out_dur, continuous=not self._broken)
            self._broken = False

    def shed(self, t_ns: int, dur: int) -> None:
        """A message's audio whose analysis was shed: its span is kept, its samples not
        (its share of real time is spent all the same)."""
        self._anomalies[AnomalyKind.MEASUREMENT_SHED.value] += 1
        self.chunk_ns.append(dur)
        self.analysed_ns += dur
        self.unanalysed_ns += dur
        self._evidence.note_shed(CALLER_TO_AGENT, t_ns - dur, t_ns)
        self._broken = True
