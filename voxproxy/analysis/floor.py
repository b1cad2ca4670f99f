"""The noise floor of one direction: minimum statistics over blocks of quiet frames
(the quietest frame of each of the last four blocks), a bed of noise recognised by its
lack of pitch, and the talker's running level. Rules of
:class:`~voxproxy.analysis.vad.SpeechDetector`, which owns the state (declared here).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from voxproxy.analysis.edges import EdgeWalker
from voxproxy.analysis.vadconfig import EARLY_BED_SPREAD_DB, NOISE_BED_SAMPLES
from voxproxy.analysis.voicing import VOICING_THRESHOLD, voicing
from voxproxy.events import Pcm
from voxproxy.timebase import NS_PER_MS


class NoiseFloor(EdgeWalker):
    """Floor, level and voicing rules of one direction's detector."""

    _frame: int  # samples per VAD frame
    _block_frames: int
    _block_min: float
    _block_count: int
    _block_quiet: int
    _block_mins: deque[float]
    _blocks_min: float
    _all_block_min: float
    _all_block_mins: deque[float]
    _recent_voicing: deque[bool | Pcm]
    _voicing_extra: int
    _prev_tail: Pcm
    _lag_lo: int
    _lag_hi: int
    _spurt_frames: int
    _voiced_ms: float

    def note_silence(self, duration_ns: int) -> None:
        """``duration_ns`` of digital silence was heard (nothing played): the floor
        learns it without a frame being analysed. The next push should follow with
        ``continuous=False``."""
        if duration_ns <= 0:
            return
        frames = min(duration_ns // (self.config.frame_ms * NS_PER_MS), self._block_frames * 5)
        for _ in range(int(frames)):
            self._update_floor(-100.0)

    def _update_floor(self, frame_db: float) -> None:
        """A frame that is not active speech: minimum statistics over blocks of frames."""
        if frame_db < self._block_min:
            self._block_min = frame_db
        self._block_quiet += 1
        self._block_tick()

    def _block_tick(self) -> None:
        """Blocks are time: active frames count too. A block whose quiet frames are too
        few (a stream that starts on speech, whose first frames webrtcvad rejects) says
        nothing about the floor and leaves the earlier blocks in force. Until a block
        has counted, the floor only learns levels that are plainly quiet (below the clamp).
        """
        self._block_count += 1
        if self._block_count >= self._block_frames:
            self._all_block_mins.append(self._all_block_min)
            self._all_block_min = float("inf")
            if self._block_quiet * 4 >= self._block_frames:
                self._block_mins.append(self._block_min)
                self._blocks_min = min(self._block_mins)
            self._block_min = float("inf")
            self._block_count = 0
            self._block_quiet = 0
        known = self._blocks_min
        current = self._block_min
        if known != float("inf"):
            floor = current if current < known else known
        elif current < self._clamp:
            floor = current
        else:
            return  # nothing known yet: quiet is assumed
        self._raw_floor_db = floor
        self._floor_db = floor if floor > self._clamp else self._clamp
        self._set_bed_start()

    def _all_floor(self) -> float:
        mins = [*self._all_block_mins, self._all_block_min]
        return min(mins)

    def _in_noise_bed(self) -> bool:
        """The open spurt has gone on without pitch, and nothing in the last ~2 s was
        quiet against the floor: it is a bed of noise, not speech."""
        recent = self._recent_voicing
        if len(recent) < NOISE_BED_SAMPLES:
            return False
        if self._all_floor() <= self._floor_db + self.config.edge_margin_db:
            return False
        todo = [i for i, v in enumerate(recent) if not isinstance(v, bool)]
        if todo:
            windows = [recent[i] for i in todo]
            for i, v in zip(todo, self._voicings(windows), strict=True):  # type: ignore[arg-type]
                recent[i] = v > VOICING_THRESHOLD
        return sum(1 for v in recent if v) <= 1

    def _early_bed(self) -> bool:
        """The open spurt opened with the stream and has had no pitch and a steady level
        so far: a bed of noise from the first frame, not speech (EARLY_BED_FRAMES)."""
        if self._onset_win > 3 * self.config.frame_ms or self._voiced_ms > 0:
            return False
        levels = self._utt_db.last(self._spurt_frames)
        return levels.size > 0 and float(levels.max() - levels.min()) < EARLY_BED_SPREAD_DB

    def _voicing_of(self, usable: Pcm, f: int) -> float:
        """Voicing of frame ``f`` of ``usable`` with the 10 ms before it."""
        window = self._voicing_window(usable, f, copy=False)
        return voicing(window, self._lag_lo, self._lag_hi, self.sample_rate_hz)

    def _voicing_window(self, usable: Pcm, f: int, *, copy: bool = True) -> Pcm:
        """Frame ``f`` of ``usable`` with the 10 ms before it (``copy``: to keep it)."""
        frame = self._frame
        lo = max(0, f * frame - self._voicing_extra)
        if f * frame >= self._voicing_extra or self._prev_tail.size == 0:
            window = usable[lo : (f + 1) * frame]
            return window.copy() if copy else window
        return np.concatenate((self._prev_tail, usable[: (f + 1) * frame]))

    def _voicings(self, windows: list[Pcm]) -> list[float]:
        """:func:`voicing` of each window."""
        lo, hi, rate = self._lag_lo, self._lag_hi, self.sample_rate_hz
        return [voicing(w, lo, hi, rate) for w in windows]
