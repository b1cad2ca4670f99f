"""What the caller hears of the agent, handed to the agent's speech detector.

MEASUREMENT.md 2: the agent's detector hears what the caller hears. Agent audio reaches
it one of two ways: released from the playout timeline as it plays
(:meth:`AgentHearing.release`, the default model) or, for an agent that paces its own
audio, at its arrival (:meth:`AgentHearing.on_arrival`). Either way a short gap in what
plays is heard as that much silence, a longer one starts a new stretch after silence
counted without a frame of work, and audio that played with its samples not kept (too
far ahead of real time) is heard as nothing at all: its span is noted as unheard in the
evidence. Compiled with the measurement core (``voxproxy/native.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from voxproxy.core.events import AGENT_TO_CALLER
from voxproxy.core.timebase import NS_PER_MS

if TYPE_CHECKING:  # annotations only
    from voxproxy.core.analysis.playout import Playout
    from voxproxy.core.analysis.vad import SpeechDetector
    from voxproxy.core.events import Pcm
    from voxproxy.core.session.evidence import Evidence

FILL_GAP_NS = 100 * NS_PER_MS  # gaps in what plays up to this long reach the detector as silence


class AgentHearing:
    """The agent detector's side of one call: where its last audio ended, what played
    unheard. ``silence_from_ns``: the call's start as the caller hears it (silence before
    the agent's first audio is heard from there)."""

    def __init__(self, evidence: Evidence, silence_from_ns: int) -> None:
        self._evidence = evidence
        self._silence_from_ns = silence_from_ns
        self.unanalysed_ns = 0  # agent audio that played without its samples kept
        self._skipped = False  # the detector's last audio was before such a span
        self.arrival_end_ns: int | None = None  # paced: end of the last chunk heard

    def release(self, playout: Playout, det: SpeechDetector, until_ns: int) -> None:
        """Hand ``det`` what the playout timeline has played up to ``until_ns``."""
        end = playout.audible_until_ns
        rate = playout.sample_rate_hz
        for piece in playout.release(until_ns):
            if piece.pcm is None:
                # It played, but too far ahead of real time for its samples to be kept: the
                # detector hears nothing of it (neither audio nor silence).
                piece_end = piece.start_ns + piece.duration_ns
                self.unanalysed_ns += piece.duration_ns
                self._evidence.note_unheard(AGENT_TO_CALLER, piece.start_ns, piece_end)
                self._skipped = True
                end = piece_end
                continue
            continuous = piece.continuous
            if self._skipped:
                # After an unheard span the detector starts afresh; a pause after the span
                # was silence that the caller heard.
                self._skipped = False
                if end is not None and piece.start_ns > end:
                    det.note_silence(piece.start_ns - end)
                continuous = False
            elif not continuous and end is not None and 0 < piece.start_ns - end <= FILL_GAP_NS:
                # A short underrun (audio paced in real time, arriving with jitter): the far
                # end played silence that long, so the detector hears exactly that.
                gap = np.zeros((piece.start_ns - end) * rate // 1_000_000_000, dtype=np.int16)
                det.push(gap, end, continuous=True)
                continuous = True
            elif not continuous:
                self.heard_silence(det, end, piece.start_ns)
            det.push(piece.pcm, piece.start_ns, continuous=continuous)
            end = piece.start_ns + piece.pcm.size * 1_000_000_000 // rate

    def on_arrival(self, det: SpeechDetector, pcm: Pcm, rate: int, start_ns: int) -> None:
        """Paced agent audio, audible from its arrival (MEASUREMENT.md 3, the identity):
        ``pcm`` heard from ``start_ns``. Each chunk is anchored at its own arrival, so
        jitter never accumulates; a pause in arrivals up to :data:`FILL_GAP_NS` is heard
        as that much silence, a longer one starts a new stretch."""
        end = self.arrival_end_ns
        continuous = end is not None and start_ns - end <= FILL_GAP_NS
        if end is not None and 0 < start_ns - end <= FILL_GAP_NS:
            det.push(np.zeros((start_ns - end) * rate // 1_000_000_000, dtype=np.int16), end)
        elif not continuous:
            self.heard_silence(det, end, start_ns)
        det.push(pcm, start_ns, continuous=continuous)
        self.arrival_end_ns = start_ns + pcm.size * 1_000_000_000 // rate

    def heard_silence(self, det: SpeechDetector, end_ns: int | None, start_ns: int) -> None:
        """Nothing played from ``end_ns`` (the call's start, before any agent audio) to
        ``start_ns``: the caller heard silence, and so does the detector, without a frame
        of work."""
        since = self._silence_from_ns if end_ns is None else end_ns
        det.note_silence(start_ns - since)
