"""The noise floor of one direction: minimum statistics over blocks of quiet frames
(the quietest frame of each of the last four blocks), a bed of noise recognised by its
lack of pitch, and the talker's running level. Rules of
:class:`~voxproxy.core.analysis.vad.SpeechDetector`, which owns the state (declared here).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from voxproxy.core.analysis.audible import (
    STEADY_SHIFT_DB,
    UNHEARD_SNR_DB,
    UNRESOLVED_BAND_MS,
)
from voxproxy.core.analysis.edges import EdgeWalker
from voxproxy.core.analysis.vadconfig import (
    BED_SPLIT_FRAMES,
    EARLY_BED_SPREAD_DB,
    LEVEL_BIAS_DB,
    MIN_LEVEL_FRAMES,
    NOISE_BED_SAMPLES,
    NOISE_LEARN_DELAY_MS,
    NOMINAL_LEVEL_DBFS,
)
from voxproxy.core.analysis.voicing import VOICING_THRESHOLD, voicing
from voxproxy.core.events import Pcm
from voxproxy.core.timebase import NS_PER_MS

MASKED_JOIN_NS = 100 * NS_PER_MS  # masked spans this close are one
MAX_MASKED_SPANS = 1024  # kept per direction (past it, later spans are not noted)


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
    _in_spurt: bool
    _opened_quiet: bool
    _prev_offset_t: int
    noise_beds: int
    masked_spans: list[tuple[int, int]]
    # Quiet frames waiting to be learned as noise: their first window, their samples.
    _noise_queue: deque[tuple[int, Pcm, bool]]

    def _close(self, end_win: int) -> None:
        raise NotImplementedError  # (SpeechDetector's: emit the spurt ending there)

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

    # -- a bed of noise recognised: the floor starts again from it ------------------------

    def _floor_from_bed(self) -> None:
        """Take the quietest frame of the last ~2 s (all of them a bed's) as the floor."""
        self.noise_beds += 1
        floor = self._all_floor()
        self._block_mins.clear()
        self._block_mins.append(floor)
        self._blocks_min = floor
        self._block_min = float("inf")
        self._raw_floor_db = floor
        self._floor_db = floor if floor > self._clamp else self._clamp
        self._set_bed_start()
        # The bed's frames were counted as the talker's: forget them.
        self._level_pow, self._level_frames = 0.0, 0
        self._utt_frames = 0
        self._utt_db.clear()
        self._utt_level = None

    def _restart_floor(self, now_win: int) -> None:
        """Take the bed's quietest frames as the floor; what stands above the new edge
        threshold inside the open spurt (speech that began before the bed was recognised)
        is kept as a spurt, the rest was the bed."""
        self._floor_from_bed()
        lo = max(self._onset_win, self._first_kept_win())
        hits = np.nonzero(self._above(lo, now_win, self._edge_threshold()))[0]
        if hits.size == 0 or not self._timeline.covers(lo * self._win):
            self._in_spurt = False
            self._prev_offset_win = now_win
            self._prev_offset_t = self._t_of_end(now_win)
            return
        onset = lo + int(hits[0])
        self._first_above_win = self._onset_win = onset
        self._onset_t = self._t_of_win(onset)
        # Its edges were found against a floor that took the bed for quiet: unresolved.
        self._onset_band, self._offset_band = UNRESOLVED_BAND_MS
        self._close(lo + int(hits[-1]) + 1)

    def _bed_may_end(self) -> bool:
        """The open spurt opened on the stream's first frames, has run BED_SPLIT_FRAMES
        without a pitched frame, its frames' levels within EARLY_BED_SPREAD_DB, and no bed
        is known yet: a bed from the first frame (as :meth:`_early_bed`), so a pitched frame
        now is a talker starting over it, not more of it."""
        if not self._in_spurt or self._voiced_ms > 0.0 or self._bed_start_db < 100.0:
            return False
        frames = self._utt_db.total - self._spurt_from  # (loud or not)
        if self._onset_win > 3 * self.config.frame_ms or frames < BED_SPLIT_FRAMES:
            return False
        levels = self._utt_db.last(frames)
        return float(levels.max() - levels.min()) < EARLY_BED_SPREAD_DB

    def _bed_before_speech(self, start_margin: float) -> float:
        """The open spurt was a bed of noise from the first frame and a talker starts over
        it now (a caller in a street who speaks a quarter second into the call): its
        frames are the noise (the floor, and the noise's mean power the edges are read
        against over a bed), no spurt is kept of them, and the talker's first pitched frame
        is judged against the bed. Without this, bed and speech made one spurt whose edges
        were read against a floor that took the bed for quiet (unresolved: every first turn
        of such a call withheld). Returns the new start threshold."""
        self._noise_pow = 0.0
        self._drop_bed_spurt()
        self._floor_from_bed()
        start_thr = self._floor_db + start_margin
        return min(start_thr, self._bed_start_db)

    def _drop_bed_spurt(self) -> None:
        """The open spurt opened on a bed before the bed was known (the floor still took
        it for quiet) and has no pitch to speak of: it was the bed, not a talker. No spurt
        is kept of it (its edges would be unresolved, and a talker who starts within a
        merge gap of it would merge into it: every first turn of a call over a bed from its
        first frame was withheld); its frames' mean power is the noise's, if none is known."""
        levels = self._utt_db.last(self._utt_db.total - self._spurt_from)
        self._pool_bed_between(self._onset_win, self._last_active_win + 1)
        if self._noise_pow <= 0.0 and levels.size:
            self._noise_pow = float(np.mean(np.power(10.0, levels / 10.0)))
            self._noise_queue.clear()
        self._in_spurt = False
        self._level_pow, self._level_frames = 0.0, 0
        self._utt_frames = 0
        self._utt_db.clear()
        self._utt_level = None
        self._set_bed_start()

    # -- the noise's mean power, learned from quiet frames -------------------------------

    def _queue_noise(self, win: int, frame: Pcm, learn: bool) -> None:
        """A quiet frame (its first window ``win``) heard outside any spurt: kept as the
        bed's (its windows pooled for the bed's dips) and, if ``learn``, learned as noise,
        NOISE_LEARN_DELAY_MS later, unless a spurt's onset is walked back to within a
        frame of it meanwhile (:meth:`_forget_noise_after`: the soft start of speech
        before its first loud frame). Before, one such frame at 8 dB over a bed, learned
        the moment it came, raised the learned mean 2 dB and the talker read as at 7.4 dB
        SNR, not 10; pooled, such frames read a pink bed's dips 10 dB, not 7."""
        queue = self._noise_queue
        queue.append((win, frame.copy(), learn))
        while queue[0][0] + NOISE_LEARN_DELAY_MS <= win:
            _, quiet, learned = queue.popleft()
            self._pool_bed(quiet)
            if learned:
                self._learn_noise(quiet)

    def _forget_noise_after(self, onset_win: int) -> None:
        """A spurt's onset was placed at ``onset_win`` (final, at its close): the quiet
        frames waiting to be learned that reach within a frame of it held its soft start."""
        queue = self._noise_queue
        reach = 2 * self.config.frame_ms
        while queue and queue[-1][0] + reach > onset_win:
            queue.pop()

    def _bed_level_db(self) -> float:
        """The bed's mean power (dBFS) a talker's SNR is judged against: as learned from
        quiet frames, or as read after the spurt's offset if that stood more than
        STEADY_SHIFT_DB higher (a bed whose level drifts: the learned mean follows it a
        second or two late). Less is a swell of a steady bed: the 120 ms read there
        stands up to 3 dB over the learned mean of the demo's recorded pink noise, and a
        caller 8.6 dB over it was judged at 7.7 and left unresolved. (Not the noise read
        before the onset: for a long utterance it is a stale reading between its words.)"""
        level = self._noise_level_db()
        after = self._offset_noise
        if after is not None and after.mean > 0.0:
            beside = 10.0 * float(np.log10(after.mean))
            level = beside if beside > level + STEADY_SHIFT_DB else level
        return level

    def _note_masking(self, lo_win: int, hi_win: int) -> None:
        """Windows ``[lo_win, hi_win)`` were heard over a bed: if it stood within
        UNHEARD_SNR_DB of the talker's level (or at a usual speech level, before the
        talker was heard), a talker could have spoken there unheard (SNR near 0 dB: the
        few frames that rise out of the bed make no turn), and ``masked_spans`` says when."""
        bed = self._noise_level_db()
        if self._level_frames >= MIN_LEVEL_FRAMES:
            # The talker's level over their last ~10 s, not the last utterance's: a
            # barge-in is a new utterance, and a short quiet answer ("yes, please", 3 dB
            # under the caller's first sentence) said nothing of how loud the next would be.
            running = 10.0 * float(np.log10(max(self._level_pow, 1e-10))) - LEVEL_BIAS_DB
            masked = running - bed < UNHEARD_SNR_DB
        elif self._utt_frames >= MIN_LEVEL_FRAMES:
            level = self.level_dbfs
            masked = level is None or level - bed < UNHEARD_SNR_DB
        else:
            masked = bed >= NOMINAL_LEVEL_DBFS
        if not masked:
            return
        start, end = self._t_of_win(lo_win), self._t_of_end(hi_win)
        spans = self.masked_spans
        if spans and start - spans[-1][1] <= MASKED_JOIN_NS:
            spans[-1] = (spans[-1][0], end)
        elif len(spans) < MAX_MASKED_SPANS:
            spans.append((start, end))
