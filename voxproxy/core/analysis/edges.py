"""Where a talk-spurt's edges lie: walks over the 1 ms window energies from a loud
window back to the onset and forward to the offset, against a threshold that follows
the noise floor and, in quiet, the talker's level (the truth rule of MEASUREMENT.md 2);
under noise, a spectral walk refines them. Also how far an edge moves when the
talker's level reads off (its ambiguity).

:class:`EdgeWalker` holds these rules for :class:`~voxproxy.core.analysis.vad.SpeechDetector`,
which owns the state they read (declared here).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voxproxy.core.analysis.audible import (
    AUDIBLE_SEEN_DB,
    BED_START_DB,
    CENSORED_MS,
    UNRESOLVED_BAND_MS,
    AudibleEdges,
)
from voxproxy.core.analysis.timeline import Timeline
from voxproxy.core.analysis.vadconfig import (
    BAND_LOSS_DB,
    CUT_JITTER_MS,
    EDGE_LEVEL_DB,
    FULL_BAND_RATE_HZ,
    LEVEL_BIAS_DB,
    LEVEL_SLACK_DB,
    MIN_LEVEL_FRAMES,
    NOMINAL_LEVEL_DBFS,
    SINGLE_WINDOW_MARGIN_DB,
    SPECTRAL_HOP_MS,
    SPECTRAL_MARGIN_DB,
    SPECTRAL_PRESENCE,
    SPECTRAL_TOLERANCE_MS,
    SPURT_APART_DB,
    VadConfig,
    level_spread_db,
)
from voxproxy.core.audio.g711 import G711_ENCODINGS, quantization_band_db
from voxproxy.core.audio.levels import FrameLevels, frame_active_level, phase_extreme_db
from voxproxy.core.events import Pcm
from voxproxy.core.timebase import NS_PER_MS

# A bed reaches the truth's threshold when this share of its 1 ms windows stand above it
# (white noise 40 dB under the talker: about 0.015%; brown noise 40 dB under: about 9%, 45 dB
# under: 0.2%). It is read between spurts (before the first, from the stream's start): up to a
# second before a spurt's first loud window, ending BED_REACH_GAP_MS before it, and after an
# offset from BED_REACH_AFTER_MS on (a release may hover that long), at least BED_REACH_MIN_MS
# of it, cut BED_REACH_ONSET_MS before the first window BED_REACH_SPEECH_DB over the threshold
# (speech, its soft start, a breath). A bed at all: its median window BED_REACH_MEDIAN_DB or
# less under the threshold, its windows' quartiles BED_REACH_SPREAD_DB apart: noise moves
# (white noise's 1 ms windows 2-3 dB, pink 3.5-5, a street 5-8, brown 8-10), a codec's idle
# does not, and sound that comes and goes (a leak of the other side, a cough) moves by more.
BED_REACH_SHARE = 0.001
BED_REACH_GAP_MS = 300
BED_REACH_AFTER_MS = 300
BED_REACH_MIN_MS = 100
BED_REACH_ONSET_MS = 300
BED_REACH_SPEECH_DB = 15.0
BED_REACH_MEDIAN_DB = 15.0
BED_REACH_SPREAD_DB = (1.0, 14.0)
BED_SWELL_DB = 6.0  # a faint bed's 1 ms windows reach this far over its mean
# A noise whose mean (learned from quiet frames) stands less than this under the truth's
# threshold is a bed an offset walked in quiet walks on through (a rumble 30-35 dB under
# the talker whose quietest frames read as quiet): such an offset is read over the bed.
BED_AT_THRESHOLD_DB = 3.0


class EdgeWalker(AudibleEdges):
    """Edge rules of one direction's detector (a base of ``SpeechDetector``)."""

    config: VadConfig
    sample_rate_hz: int
    # The encoding the audio crossed the wire in (voxproxy's names: ulaw, alaw, ...), or
    # None: a G.711 codec moves a quiet window's level, which widens an edge's ambiguity.
    codec: str | None
    wire_rate_hz: int  # the rate it crossed the wire at (24 kHz: the detector runs at 8)
    _win: int  # samples per 1 ms window
    _timeline: Timeline
    _hist: npt.NDArray[np.float32]  # 1 ms window energies (dBFS), a ring
    _hist_mask: int
    _ring: Pcm  # the last ~2 s of samples
    _ring_mask: int
    _nfft: int
    _band: npt.NDArray[np.bool_]
    _taper: npt.NDArray[np.float64]
    _noise_psd: npt.NDArray[np.float64] | None
    _bed_top_db: float  # how high a bed read before or between spurts reached (-200: none)
    _bed_median_db: float  # ... and its median
    _noise_pow: float  # mean power of the noise frames learned with _noise_psd
    _bed_start_db: float  # the start threshold of pitched frames over a bed (100: none)
    _framed: int
    _written_win: int
    _clamp: float
    _floor_db: float
    _raw_floor_db: float
    _level_pow: float
    _level_frames: int
    _utt_frames: int
    _utt_db: FrameLevels
    _utt_level: float | None
    _spurt_from: int  # the utterance's frames (``_utt_db.total``) when the spurt opened
    _cut_ns: int  # when the audio was last cut short (a flush), -1: never
    _onset_t: int  # the open spurt's onset, on the clock
    _first_above_win: int
    _onset_win: int
    _last_active_win: int
    _prev_offset_win: int

    @property
    def level_dbfs(self) -> float | None:
        """The talker's level: P.56's active level read from the frames of the current
        utterance (spurts less than a second apart), or the mean power of the last ~10 s
        of active frames (less its bias) before it has a few. The truth rule takes the
        level of one recording; a level is a property of what is being said now, not of a
        louder earlier sentence."""
        if self._utt_frames >= MIN_LEVEL_FRAMES:
            if self._utt_level is None:
                self._utt_level = frame_active_level(self._utt_db.array(), self.config.frame_ms)
            if self._utt_level is not None:
                return self._utt_level
        if self._level_frames >= MIN_LEVEL_FRAMES:
            return 10.0 * float(np.log10(max(self._level_pow, 1e-10))) - LEVEL_BIAS_DB
        # Too little speech heard to know the talker: the first frames of an onset are
        # weaker than the speech, so assume at least the nominal level of speech.
        if self._level_frames == 0:
            return NOMINAL_LEVEL_DBFS
        level = 10.0 * float(np.log10(max(self._level_pow, 1e-10)))
        return level if level > NOMINAL_LEVEL_DBFS else NOMINAL_LEVEL_DBFS

    def note_cut(self, t_ns: int) -> None:
        """The audio was cut short at ``t_ns`` (a flush truncated the answer playing)."""
        self._cut_ns = t_ns

    def _edge_threshold(self) -> float:
        """Where an edge walk stops: ``edge_margin_db`` above the noise floor, and in
        quiet conditions ``level_range_db`` below the talker's level (the truth rule of
        MEASUREMENT.md 2), never below ``edge_floor_dbfs``."""
        cfg = self.config
        thr = self._raw_floor_db + cfg.edge_margin_db
        level = self.level_dbfs
        if level is not None and level - cfg.level_range_db - LEVEL_SLACK_DB > thr:
            thr = level - cfg.level_range_db - LEVEL_SLACK_DB
        return thr if thr > cfg.edge_floor_dbfs else cfg.edge_floor_dbfs

    def _quiet(self) -> bool:
        return self._floor_db <= self.config.floor_clamp_dbfs + 1.0

    def _tolerance(self, threshold: float) -> int:
        """The longest pause an edge walk bridges: a merge gap far above the floor (the
        truth rule's own), less in quiet, a few milliseconds above noise."""
        cfg = self.config
        if threshold - self._raw_floor_db >= SINGLE_WINDOW_MARGIN_DB:
            return int(cfg.merge_gap_ms)
        return cfg.edge_tolerance_ms if self._quiet() else cfg.noisy_edge_tolerance_ms

    def _first_kept_win(self) -> int:
        """The earliest 1 ms window the history holds, with a margin (none before the stream's)."""
        return max((self._framed // self._win) - (self._hist.size - 64), 0)

    def _store(self, first_win: int, window_db: npt.NDArray[np.float32], samples: Pcm) -> None:
        """Keep a batch's window energies from window ``first_win`` on, and its samples
        (from stream position ``_framed``), in the rings the walks read."""
        hist, mask = self._hist, self._hist_mask
        start = first_win & mask
        end = start + window_db.size
        if end <= hist.size:
            hist[start:end] = window_db
        else:
            hist[(np.arange(first_win, first_win + window_db.size)) & mask] = window_db
        ring, ring_mask = self._ring, self._ring_mask
        ring_start = self._framed & ring_mask
        ring_end = ring_start + samples.size
        if ring_end <= ring.size:
            ring[ring_start:ring_end] = samples
        else:
            ring[(np.arange(self._framed, self._framed + samples.size)) & ring_mask] = samples

    def _above(self, lo: int, hi: int, threshold: float, phase: int = 0) -> npt.NDArray[np.bool_]:
        """Which 1 ms windows in ``[lo, hi)`` are above ``threshold``.

        A window counts when both it and the mean power of the ``edge_smooth_ms`` windows
        around it are above (no single noisy window or dip decides an edge). ``phase`` 1
        (-1): each at its most (least) over the grid's phase (``phase_extreme_db``)."""
        # Far above the floor (digital silence, a codec's idle) single windows decide, as
        # in the truth rule; nearer to noise, a window and its neighbours' mean must be.
        far = threshold - self._raw_floor_db >= SINGLE_WINDOW_MARGIN_DB
        n = 1 if far else self.config.edge_smooth_ms
        half = n // 2
        pad = 1 if phase else 0
        idx = np.arange(lo - half - pad, hi + (n - 1 - half) + pad) & self._hist_mask
        db = self._hist[idx]
        if phase:
            db = phase_extreme_db(db, phase > 0)
        raw = db[half : half + (hi - lo)]
        ok: npt.NDArray[np.bool_] = raw > threshold
        if n <= 1:
            return ok
        power = np.power(10.0, db / 10.0)
        smooth = np.convolve(power, np.ones(n) / n, mode="valid")
        ok &= 10.0 * np.log10(np.maximum(smooth, 1e-10)) > threshold
        return ok

    def _learn_noise(self, frame: Pcm) -> None:
        spec = np.abs(np.fft.rfft(frame * self._taper, self._nfft)) ** 2
        x = frame.astype(np.float64)
        power = float(np.dot(x, x)) / (x.size * 32768.0 * 32768.0)
        if self._noise_psd is None:
            self._noise_psd = spec
            # (The mean power of a bed's frames, if it was taken for speech at first.)
            self._noise_pow = (
                power if self._noise_pow <= 0.0 else 0.9 * self._noise_pow + 0.1 * power
            )
        else:
            self._noise_psd = 0.9 * self._noise_psd + 0.1 * spec
            self._noise_pow = 0.9 * self._noise_pow + 0.1 * power
        self._set_bed_start()

    def _set_bed_start(self) -> None:
        """Over a bed (the floor above the clamp) only a pitched frame counts as active,
        from BED_START_DB above the noise's mean, not from the start margin above its
        quietest frames: at 10 dB SNR the talker's frames stand about that far above the
        floor (a short utterance was missed whole), and noise has no pitch (white, pink,
        brown, street: under 1% of 30 ms frames above VOICING_THRESHOLD) whatever its
        level does. 100 dBFS: not over a bed."""
        noisy = self._floor_db > self._clamp + 1.0
        self._bed_start_db = self._noise_level_db() + BED_START_DB if noisy else 100.0

    def _presence(self, first_win: int, last_win: int) -> tuple[int, npt.NDArray[np.bool_]]:
        """Spectral speech presence in hops of SPECTRAL_HOP_MS over windows
        ``[first_win, last_win)``: a hop counts when enough frequency bins stand
        SPECTRAL_MARGIN_DB above the learned noise spectrum (speech is narrow-band
        in time-frequency; broadband noise spreads thin, so speech is found well
        below the broadband noise level)."""
        assert self._noise_psd is not None
        length = self._win * self.config.frame_ms
        hop = self._win * SPECTRAL_HOP_MS
        start = first_win * self._win
        stop = last_win * self._win
        n_hops = max(0, (stop - start - length) // hop + 1)
        if n_hops == 0:
            return start, np.zeros(0, dtype=np.bool_)
        idx = start + np.arange(n_hops)[:, None] * hop + np.arange(length)[None, :]
        frames = self._ring[idx & self._ring_mask].astype(np.float64) * self._taper
        power = np.abs(np.fft.rfft(frames, self._nfft, axis=1)) ** 2
        limit = self._noise_psd * 10 ** (SPECTRAL_MARGIN_DB / 10)
        score = np.mean((power > limit)[:, self._band], axis=1)
        present: npt.NDArray[np.bool_] = score >= SPECTRAL_PRESENCE
        return start, present

    def _spectral_ok(self) -> bool:
        return self._noise_psd is not None and self._floor_db > self._clamp + 1.0

    def _audible_ok(self) -> bool:
        """A bed of noise lies under the talker (less than AUDIBLE_SEEN_DB under its
        level): edges are where the speech rises out of it (``analysis/audible.py``)."""
        if self._floor_db <= self._clamp + 1.0:
            return False  # quiet (digital silence, a codec's idle, a faint hiss)
        noise_db = self._noise_level_db()
        level = self.level_dbfs
        return level is not None and level - noise_db < AUDIBLE_SEEN_DB

    def read_bed_before(self) -> None:
        """Read the noise before the open spurt's first loud window (its onset, walked in quiet,
        may lie in a rumble), past the last offset or from the stream's start."""
        hi = self._first_above_win - BED_REACH_GAP_MS
        floor = max(self._prev_offset_win + BED_REACH_AFTER_MS, self._first_kept_win())
        self._read_bed(max(floor, hi - 1000), hi)

    def offset_unfound(self, end_win: int, quiet: bool) -> bool:
        """The offset ``end_win`` was not found: its walk ran on to the end of its
        look-ahead (what it walked on was a bed standing at the edge threshold, a rumble's
        swells, and the speech's end lies somewhere before), or it was walked in quiet
        (``quiet``) down to a threshold that the bed read between the spurts reaches."""
        ran_on = end_win - self._last_active_win - 1
        if ran_on >= self.config.offset_lookahead_ms - CENSORED_MS:
            return True
        return quiet and self.bed_reached_after(end_win)

    def offset_over_bed(self, end_win: int) -> tuple[int, float] | None:
        """An offset ``end_win`` walked in quiet over a bed that reaches the truth's
        threshold (its mean stands within BED_AT_THRESHOLD_DB of it, or a bed read
        between the spurts reaches it: :meth:`bed_reached_after`): the walk went on
        through the bed's swells, 200-300 ms past the speech. Read again where the
        speech falls into the bed (the audible walk, ``analysis/audible.py``), with its
        band: ``(end_win, band_ms)``, or None when the walk in quiet stands (no such bed)
        or the bed could not be read beside the speech."""
        if self.level_dbfs is None:
            return None
        if not (self._bed_at_threshold() or self.bed_reached_after(end_win)):
            return None
        last = self._last_active_win
        upper = self._forward_upper(last)
        if upper <= last + 1:
            return None
        found = self._audible_forward(last, upper, self._truth_threshold())
        if found is None:
            return None
        return max(found, last + 1), self._offset_band

    def bed_reached_after(self, end_win: int) -> bool:
        """Whether a bed read between spurts (before them and after the offset ``end_win``:
        one that swelled after a lull) reaches the truth's threshold in BED_REACH_SHARE of
        its 1 ms windows: a bed whose quietest frames lie under the floor's clamp, so that
        the floor read as quiet, while its swells stand where a walk in quiet down to the
        threshold would walk on through them."""
        lo = end_win + BED_REACH_AFTER_MS
        self._read_bed(lo, min(lo + 1000, self._written_win))
        return self._bed_reaches()

    def _bed_reaches(self) -> bool:
        """A bed read so far (:meth:`_read_bed`) reaches the truth's threshold."""
        thr = self._truth_threshold()
        return self._bed_top_db > thr and self._bed_median_db >= thr - BED_REACH_MEDIAN_DB

    def _bed_at_threshold(self) -> bool:
        """The noise's mean stands within BED_AT_THRESHOLD_DB of the truth's threshold."""
        return self._noise_level_db() > self._truth_threshold() - BED_AT_THRESHOLD_DB

    def onset_over_bed(self) -> float | None:
        """The open spurt's onset, walked in quiet over a bed that reaches the truth's
        threshold (read before the onset: :meth:`read_bed_before`, or its mean near the
        threshold): the walk went back through the bed's swells, up to its whole
        look-back (400-640 ms early over a rumble 30-45 dB under the talker), and a
        barge-in's onset is a figure's edge. Read again where the speech rises out of the
        bed (moving ``_onset_win``) and return its band; unresolved when the audio has
        left the ring; None when the walk in quiet stands (no such bed)."""
        if self.level_dbfs is None or not (self._bed_at_threshold() or self._bed_reaches()):
            return None
        first = self._first_above_win
        lower = self._back_lower(first, 2 * self.config.onset_lookback_ms)
        found = self._audible_back(first, lower, self._truth_threshold())
        if found is None:
            return float(UNRESOLVED_BAND_MS[0])
        self._onset_win = min(found, first)
        self._onset_t = self._t_of_win(self._onset_win)
        return self._onset_band

    def _read_bed(self, lo: int, hi: int) -> None:
        """Remember how high a bed in windows ``[lo, hi)`` reaches (the level over which
        BED_REACH_SHARE of its windows stand) and its median, if they hold one: at least
        BED_REACH_MIN_MS windows, cut BED_REACH_ONSET_MS before the first that stands
        BED_REACH_SPEECH_DB over the truth's threshold (speech, its soft start), whose
        quartiles lie as far apart as a bed's (BED_REACH_SPREAD_DB: a level that does not
        move is a codec's idle, one that moves by more comes and goes)."""
        if hi - lo < BED_REACH_MIN_MS:
            return
        db = self._hist[np.arange(lo, hi) & self._hist_mask]
        loud = np.flatnonzero(db > self._truth_threshold() + BED_REACH_SPEECH_DB)
        if loud.size:
            db = db[: max(int(loud[0]) - BED_REACH_ONSET_MS, 0)]
        if db.size < BED_REACH_MIN_MS:
            return
        q1, median, q3, top = np.percentile(db, (25.0, 50.0, 75.0, 100.0 * (1 - BED_REACH_SHARE)))
        if not BED_REACH_SPREAD_DB[0] <= q3 - q1 <= BED_REACH_SPREAD_DB[1]:
            return
        self._bed_top_db = max(self._bed_top_db, float(top))
        self._bed_median_db = max(self._bed_median_db, float(median))

    def _noise_level_db(self) -> float:
        """The noise's mean power (dBFS) as learned from quiet frames, and no less than
        the floor (its quietest frames, all there is before a quiet frame was learned):
        a rumble's frames swing far below its mean."""
        learned = 10.0 * float(np.log10(max(self._noise_pow, 1e-12)))
        return learned if learned > self._raw_floor_db else self._raw_floor_db

    def _truth_threshold(self) -> float:
        """The truth's level threshold: the talker's level less 35 dB (and the slack)."""
        level = self.level_dbfs
        assert level is not None
        return level - self.config.level_range_db - LEVEL_SLACK_DB

    def _spectral_back(self, onset_win: int, lower: int) -> int:
        """Move a noisy onset earlier, not before ``lower``, while speech is still
        present in the spectrum."""
        lower = max(lower, (self._framed // self._win) - (self._ring.size // self._win) + 64)
        if lower >= onset_win:
            return onset_win
        half = self.config.frame_ms // 2
        start, present = self._presence(lower, onset_win + half)
        earliest = self._spectral_walk(start, present, onset_win, -1)
        return max(lower, min(onset_win, earliest))

    def _spectral_forward(self, end_win: int) -> int:
        """Move a noisy offset later while speech is still present in the spectrum."""
        analysed = self._written_win
        upper = min(end_win + self.config.offset_lookahead_ms, analysed)
        gap = self._timeline.first_break_after(end_win * self._win)
        if gap is not None:
            upper = min(upper, gap // self._win)
        half = self.config.frame_ms // 2
        lo = max(end_win - half, 0)
        if upper - lo <= self.config.frame_ms:
            return end_win
        start, present = self._presence(lo, upper)
        latest = self._spectral_walk(start, present, end_win, 1)
        return max(end_win, min(latest, upper))

    def _spectral_walk(
        self, start: int, present: npt.NDArray[np.bool_], edge_win: int, step: int
    ) -> int:
        """From ``edge_win`` outwards (``step`` -1: earlier, 1: later), the outer side of
        the farthest spectral frame (``present``, analysed from ``start``) still holding
        speech, across gaps of up to ``SPECTRAL_TOLERANCE_MS``; ``edge_win`` if none."""
        hop_ms = SPECTRAL_HOP_MS
        first = start // self._win + self.config.frame_ms // 2  # the first frame's centre
        found = edge_win
        misses = 0
        for i in range(present.size - 1, -1, -1) if step < 0 else range(present.size):
            centre = first + i * hop_ms
            if (centre - edge_win) * step < 0:  # on the inner side of the edge
                continue
            if present[i]:
                found = centre + step * (hop_ms // 2)
                misses = 0
            else:
                misses += hop_ms
                if misses > SPECTRAL_TOLERANCE_MS:
                    break
        return found

    def _back_lower(self, win: int, reach: int) -> int:
        """How far back an onset walk from ``win`` may read: ``reach`` windows, not past
        the last offset or what the history keeps, and never across a gap in time (a
        pause in playout)."""
        lower = max(win - reach, self._prev_offset_win, 0, self._first_kept_win())
        gap = self._timeline.last_break_at_or_before(win * self._win)
        return lower if gap is None else max(lower, -(-gap // self._win))

    def _walk_back(
        self, win: int, threshold: float, *, lookback: int | None = None, phase: int = 0
    ) -> int:
        """Earliest window of the run above ``threshold`` that reaches ``win``, at most
        ``lookback`` windows (default: the configured look-back) before it.

        Pauses shorter than the tolerance inside the run are bridged.
        """
        cfg = self.config
        lower = self._back_lower(win, cfg.onset_lookback_ms if lookback is None else lookback)
        if lower >= win:
            return win
        if self._audible_ok():
            if win <= self._ring_start_win():
                return win  # (its audio is gone: the onset walked while it was here stands)
            found = self._audible_back(win, lower, self._truth_threshold())
            if found is not None:
                return min(found, win)
        ok = self._above(lower, win, threshold, phase)[::-1]  # ok[i] is window win-1-i
        # Backwards, never more than the quiet bridge: the head of a response may carry a
        # few samples of the one before (a resampler's memory), a merge gap earlier.
        tolerance = min(self._tolerance(threshold), self.config.edge_tolerance_ms)
        hits = np.nonzero(ok)[0]
        onset = win
        if hits.size and hits[0] < tolerance:
            gaps = np.diff(hits)
            cut = np.nonzero(gaps > tolerance)[0]
            last = hits[cut[0]] if cut.size else hits[-1]
            onset = win - 1 - int(last)
        if self._spectral_ok():
            onset = self._spectral_back(onset, lower)
        return onset

    def _forward_upper(self, win: int) -> int:
        """How far an offset walk from ``win`` may read: its look-ahead, what is analysed,
        and never across a gap in time (a pause in playout; the jitter of a continuous
        stream's chunk anchors is not a gap)."""
        upper = min(win + 1 + self.config.offset_lookahead_ms, self._written_win)
        gap = self._timeline.first_break_after(win * self._win)
        return upper if gap is None else min(upper, gap // self._win)

    def _walk_forward(self, win: int, threshold: float) -> int:
        """End (exclusive) of the run above ``threshold`` that starts at ``win``."""
        upper = self._forward_upper(win)
        if upper <= win + 1:
            return win + 1
        if self._audible_ok():
            found = self._audible_forward(win, upper, self._truth_threshold())
            if found is not None:
                return max(found, win + 1)
        ok = self._above(win + 1, upper, threshold)  # ok[i] is window win+1+i
        hits = np.nonzero(ok)[0]
        end = win + 1
        if hits.size and hits[0] < self._tolerance(threshold):
            gaps = np.diff(hits)
            cut = np.nonzero(gaps > self._tolerance(threshold))[0]
            last = hits[cut[0]] if cut.size else hits[-1]
            end = win + 2 + int(last)
        if self._spectral_ok():
            end = self._spectral_forward(end)
        return end

    def _t_of_win(self, win: int) -> int:
        return self._timeline.t_at(win * self._win)

    def _t_of_end(self, end_win: int) -> int:
        return self._t_of_win(end_win - 1) + NS_PER_MS

    def _edge_ambiguity(self, end_win: int) -> tuple[float, float]:
        """How far (ms) the onset and the offset move when the edge threshold moves
        EDGE_LEVEL_DB either way, where the threshold follows the talker's level (in
        quiet; above a noise floor the floor sets it and MASKING_TABLE covers it). The
        band is wider where the level itself is less sure: an answer cut short by a
        flush (read from its part heard), a spurt at another level than its utterance,
        and on a G.711 wire, as far as the codec may move a window's level at the
        threshold (``audio.g711.quantization_band_db``: a -40 dBFS talker's soft edges).
        On a band-limited wire (G.711, or a wire, not the detector, under FULL_BAND_RATE_HZ)
        the offset's upper side reaches past the detector's slack by the level's error,
        BAND_LOSS_DB and the codec's lift: a release hovering just under the truth's
        threshold there is kept by the detector and not by the truth (at or above the
        recording's rate the truth keeps the recording's edges, and the release: no
        widening). ``docs/measurement.md``, Uncertainty."""
        cfg = self.config
        level = self.level_dbfs
        thr = self._edge_threshold()
        if level is None or thr - EDGE_LEVEL_DB <= self._raw_floor_db + cfg.edge_margin_db:
            return 0.0, 0.0
        first, onset = self._first_above_win, self._onset_win
        lookback = 2 * cfg.onset_lookback_ms
        # (An utterance longer than the timeline keeps: its onset stands as walked, but its
        # offset's band is read all the same; before, a 10 s one stated none.)
        onset_seen = self._timeline.covers(max(first - lookback, 0) * self._win)
        down = up = EDGE_LEVEL_DB
        cut = (
            self._onset_t
            <= self._cut_ns
            <= self._t_of_end(end_win) + int(cfg.merge_gap_ms * NS_PER_MS)
        )
        if cut:
            # Cut short (a flush during it): its level was read from what was heard of it,
            # the truth takes the whole answer's.
            spread = level_spread_db(self._utt_frames * cfg.frame_ms)
            down = max(down, spread)
            up = max(up, spread)
        # A spurt more than a merge gap from the last but within UTTERANCE_GAP of it shares
        # its utterance's level; if it stands apart (SPURT_APART_DB) it may be an utterance
        # of its own (a barge-in soon after the caller's last words, a louder retort), whose
        # edges lie where its own level puts them: the threshold may stand that far off.
        spurt_db = self._utt_db.last(self._utt_db.total - self._spurt_from)
        if spurt_db.size >= MIN_LEVEL_FRAMES and spurt_db.size < self._utt_db.total:
            own = frame_active_level(spurt_db, cfg.frame_ms)
            if own is not None and own - level > SPURT_APART_DB:
                up = max(up, own - level)
            elif own is not None and level - own > SPURT_APART_DB:
                down = max(down, level - own)
        codec_down, codec_up = quantization_band_db(self.codec, thr)
        down = max(down, codec_down)
        up = max(up, codec_up)
        # A release on a band-limited wire (BAND_LOSS_DB): the walk comes back up from its
        # slack, through the level's error and what the band took from the level, and over
        # how far the codec lifts a single window at the threshold.
        up_off = up
        if self.codec in G711_ENCODINGS or self.wire_rate_hz < FULL_BAND_RATE_HZ:
            up_off = max(up, LEVEL_SLACK_DB + EDGE_LEVEL_DB + BAND_LOSS_DB + codec_up)
        # A faint bed under it adds its power to every window near the threshold: at its
        # swells (BED_SWELL_DB over its mean, or as high as a bed read between the spurts
        # reached: a 1 ms window of 8 kHz pink noise 45 dB down swells 12 dB) a window
        # under the truth's threshold reads above.
        swell = max(self._noise_level_db() + BED_SWELL_DB, self._bed_top_db) - thr
        bed = 10.0 * float(np.log10(1.0 + 10.0 ** (swell / 10.0)))
        up += bed
        up_off += bed
        amb_on = 0
        if onset_seen:  # each walk also reads the windows over the grid's phase (levels.py)
            early = self._walk_back(first, thr - down, lookback=lookback, phase=1)
            late = self._walk_back(first, thr + up, lookback=lookback, phase=-1)
            amb_on = max(onset - early, late - onset, 0)
        last = self._last_active_win
        longer = self._walk_forward(last, thr - down)
        # At a higher threshold the end may lie before the last active window itself (a
        # breathy tail hovering on the threshold, above the start threshold): it is the
        # end of the last window above it.
        shorter = min(
            self._walk_forward(last, thr + up_off), self._end_of_last_above(end_win, thr + up_off)
        )
        amb_off = max(longer - end_win, end_win - shorter, 0)
        if cut:
            amb_off = max(amb_off, self._cut_sensitivity(end_win, thr))
        return float(amb_on), float(amb_off)

    def _cut_sensitivity(self, end_win: int, threshold: float) -> int:
        """For speech that ran up to a cut: how much earlier it would have ended, had the
        cut come CUT_JITTER_MS earlier (0 for speech that went on up to then; from the cut
        back to the pause for a cut just into the word after it)."""
        if self._t_of_end(end_win) < self._cut_ns - self.config.frame_ms * NS_PER_MS:
            return 0  # it ended before the cut: the cut took silence
        back = end_win - CUT_JITTER_MS
        return end_win - last if (last := self._end_of_last_above(back, threshold)) < back else 0

    def _end_of_last_above(self, end_win: int, threshold: float) -> int:
        """The end of the last window above ``threshold`` before ``end_win``, looking back
        a merge gap at most (and not before the spurt's onset)."""
        lo = max(end_win - int(self.config.merge_gap_ms), self._onset_win)
        lo = max(lo, self._first_kept_win())
        if end_win <= lo:
            return end_win
        hits = np.flatnonzero(self._above(lo, end_win, threshold))
        return lo + int(hits[-1]) + 1 if hits.size else lo
