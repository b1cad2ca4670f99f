"""Talk-spurt detection for one direction, with edges backdated to the true edge.

Two layers work together:

1. **webrtcvad** decides, frame by frame (10, 20 or 30 ms), whether a frame
   sounds like speech. It is robust to steady noise, but its decisions are
   late at offsets (its internal hangover holds "speech" for 60-140 ms) and
   unreliable in the first frames of a stream.
2. **Energy** in 1 ms windows, against a noise floor tracked by minimum
   statistics (the minimum frame energy over the last few seconds), gates and
   refines those decisions. A frame is *active* when webrtcvad calls it speech
   and its energy stands ``start_margin_db`` above the floor. A spurt's onset
   is then walked back, and its offset walked forward, over 1 ms windows while
   they stay ``edge_margin_db`` above the floor (a double-threshold endpoint
   detector in the manner of Rabiner and Sambur, 1975), in quiet; over a bed of
   noise, where the speech rises out of it (``audible.py``).

Positions inside the stream (sample indices) are the source of truth; each pushed
chunk anchors its positions to the shared clock; a chunk after a gap in time (agent
audio after a pause in playout) begins a new anchor, the partial frame before it
completed with the silence that the gap really was.

The detector is pure: it is handed samples with their times, and ``advance`` calls when
time passes without samples; ``settled_ns`` promises no later spurt starts before it.
"""

from __future__ import annotations

from collections import deque
from typing import Final

import numpy as np
import numpy.typing as npt

from voxproxy.core.analysis.audible import (
    BED_POOL_WINDOWS,
    NO_NEXT_ONSET,
    UNRESOLVED_BAND_MS,
    UNRESOLVED_SNR_DB,
    NoiseStats,
)
from voxproxy.core.analysis.closing import SpurtClosing
from voxproxy.core.analysis.energies import F32, batch_energies, frame_scale, window_scale
from voxproxy.core.analysis.framevad import frame_classifier
from voxproxy.core.analysis.timeline import Timeline
from voxproxy.core.analysis.vadconfig import (
    EARLY_BED_FRAMES,
    EDGE_LEVEL_DB,
    LEVEL_BIAS_DB,
    LEVEL_SLACK_DB,
    MASKING_TABLE,
    MIN_LEVEL_FRAMES,
    MIN_VOICED_MS,
    NEVER_QUIET_NS,
    NOISE_BED_FRAMES,
    NOISE_BED_SAMPLES,
    NOISE_BED_STRIDE,
    NOMINAL_LEVEL_DBFS,
    PAUSE_NS,
    REWALK_FRAMES,
    UTTERANCE_FRAMES,
    UTTERANCE_GAP_NS,
    VOICED_ENOUGH_MS,
    Spurt,
    VadConfig,
    masked_ms,
)
from voxproxy.core.analysis.voicing import VOICING_BAND_HZ, VOICING_THRESHOLD, voicing
from voxproxy.core.audio.levels import FrameLevels
from voxproxy.core.events import Pcm
from voxproxy.core.timebase import NS_PER_MS

_NO_SAMPLES: Final = np.zeros(0, dtype=np.int16)  # (never written to: shared)

__all__ = [
    "EDGE_LEVEL_DB",
    "LEVEL_BIAS_DB",
    "LEVEL_SLACK_DB",
    "MASKING_TABLE",
    "MIN_LEVEL_FRAMES",
    "MIN_VOICED_MS",
    "NEVER_QUIET_NS",
    "NOMINAL_LEVEL_DBFS",
    "VOICED_ENOUGH_MS",
    "VOICING_BAND_HZ",
    "VOICING_THRESHOLD",
    "SpeechDetector",
    "Spurt",
    "VadConfig",
    "masked_ms",
    "voicing",
]


class SpeechDetector(SpurtClosing):
    """Talk-spurt detector for one direction of one call."""

    def __init__(
        self,
        sample_rate_hz: int,
        config: VadConfig | None = None,
        *,
        batch_ms: float = 0.0,
        codec: str | None = None,
        wire_rate_hz: int = 0,
    ) -> None:
        """``batch_ms`` > 0 defers analysis until that much audio is pending (or until
        :meth:`advance`), which spreads numpy's per-call cost over several chunks.
        ``codec`` and ``wire_rate_hz``: the encoding (``ulaw``, ``alaw``, ...) and rate the
        audio crossed the wire in, when known (the rate, before ``audio.resample`` converted
        it; 0: the detector's): a band-limited wire widens an edge's band (``EdgeWalker``)."""
        if sample_rate_hz not in (8000, 16000, 32000, 48000):
            raise ValueError(f"webrtcvad needs 8, 16, 32 or 48 kHz, got {sample_rate_hz}")
        self.config = cfg = config or VadConfig()
        self.sample_rate_hz = sample_rate_hz
        self.codec = codec
        self.wire_rate_hz = wire_rate_hz or sample_rate_hz
        self._win = sample_rate_hz // 1000  # samples per 1 ms window
        self._frame = self._win * cfg.frame_ms  # samples per VAD frame
        self._is_speech = frame_classifier(cfg.mode, sample_rate_hz)  # webrtcvad's, on a frame
        self._timeline = Timeline(sample_rate_hz)
        self._pending = np.zeros(0, dtype=np.int16)
        self._chunks: list[Pcm] = []  # pushed since the last analysis
        self._batch = int(batch_ms * sample_rate_hz / 1000)
        self._npending = 0
        self._pos = 0  # stream position of the next sample pushed
        self.samples_in = 0  # samples pushed (what the detector was handed to analyse)
        self._framed = 0  # stream position up to which frames were analysed
        self._written_win = 0  # 1 ms windows stored in the energy history (and ring)
        self._last_t_end: int | None = None  # clock time just after the last sample pushed
        # 1 ms window energies (dBFS), a ring indexed by absolute window number.
        self._hist = np.full(1 << 13, -100.0, dtype=np.float32)
        # The last ~2 s of samples, for the spectral edge refinement under noise.
        self._ring = np.zeros(1 << (int(2 * sample_rate_hz).bit_length()), dtype=np.int16)
        self._ring_mask = self._ring.size - 1
        self._nfft = 1 << (self._win * cfg.frame_ms - 1).bit_length()
        freqs = np.fft.rfftfreq(self._nfft, 1 / sample_rate_hz)
        self._band = (freqs >= 150) & (freqs <= min(3800, sample_rate_hz // 2 - 100))
        self._taper = np.hanning(self._win * cfg.frame_ms)
        self._win_scale = window_scale(self._win)
        self._frame_scale = frame_scale(cfg.frame_ms)
        self._noise_psd: npt.NDArray[np.float64] | None = None
        self._noise_pow = 0.0
        self._bed_top_db = self._bed_median_db = -200.0
        self._bed_start_db = 100.0  # start threshold of pitched frames over a bed (none)
        self._opened_quiet = True  # the open spurt began before a bed was known
        self._onset_noise: NoiseStats | None = None  # the noise an onset was heard over
        self._offset_noise: NoiseStats | None = None  # ... and an offset
        self._next_onset_win = NO_NEXT_ONSET  # the next spurt's onset, once it has come
        self._bed_pool = np.zeros(BED_POOL_WINDOWS)
        self._bed_pool_n = 0
        self._bed_pool_ref = 0.0
        self._onset_band = self._offset_band = 0.0  # how far edges move (audible.py)
        self._psd_count = 0
        self._noise_queue: deque[tuple[int, Pcm, bool]] = deque()
        # When a talker could have gone unheard under a bed ([start, end) ns, in order).
        self.masked_spans: list[tuple[int, int]] = []
        self._hist_mask = self._hist.size - 1
        # Noise floor: minimum statistics over blocks of frames.
        self._block_frames = max(1, int(cfg.floor_window_s * 1000 / cfg.frame_ms / 4))
        # Only frames that are not active speech count, so the floor never learns from
        # the speech it detects; until one is heard the direction is taken to be quiet.
        self._block_min = float("inf")  # min of the current block's quiet frames
        self._block_count = 0
        self._block_quiet = 0  # quiet frames in the current block
        self._block_mins: deque[float] = deque(maxlen=4)
        self._blocks_min = float("inf")  # min of the finished blocks
        # The same over every frame, speech included: only to recognise a bed of noise.
        self._all_block_min = float("inf")
        self._all_block_mins: deque[float] = deque(maxlen=4)
        self._spurt_frames = 0  # active frames of the open spurt
        # Each sampled frame's voicing, or its window while nobody has asked (a bed is
        # only looked for when nothing in the last ~2 s was quiet: mostly never).
        self._recent_voicing: deque[bool | Pcm] = deque(maxlen=NOISE_BED_SAMPLES)
        self.noise_beds = 0  # beds of noise recognised (the floor started again)
        self._clamp = cfg.floor_clamp_dbfs
        self._floor_db = cfg.floor_clamp_dbfs  # for the start threshold (clamped)
        self._raw_floor_db = -100.0  # unclamped: for edges in quiet conditions
        # The talker's level: mean power of the active frames (running; about 10 s).
        self._level_pow = 0.0
        self._level_frames = 0
        self._utt_frames = 0  # active frames of the current utterance (spurts < 1 s apart)
        # Every frame heard in the utterance's spurts, for its P.56 level (cached).
        self._utt_db = FrameLevels(UTTERANCE_FRAMES)
        self._utt_level: float | None = None
        self._spurt_from = 0
        self._cut_ns = -1
        self._first_above_win = 0  # the open spurt's first window above the start threshold
        # Spurt state, in 1 ms window numbers.
        self._in_spurt = False
        self._onset_win = 0
        self._onset_t = 0  # clock time of the open spurt's onset, fixed when it is decided
        self._onset_final = True  # walked again once the utterance's level is known
        self._last_active_win = 0  # last window above the start threshold, in an active frame
        self._last_active_t = 0  # clock time at the end of that window
        self._prev_offset_win = -(10**9)
        self._prev_offset_t = -(10**18)
        self._end_cache: tuple[int, int] | None = None
        self._voiced_ms = 0.0
        # Voicing looks at each active frame plus the 10 ms before it (a 30 ms window
        # holds two periods of an 80 Hz voice at 20 ms frames).
        self._voicing_extra = 10 * self._win
        self._prev_tail = np.zeros(0, dtype=np.int16)
        self._lag_lo = sample_rate_hz // 400
        self._lag_hi = sample_rate_hz // 80
        self.spurts: deque[Spurt] = deque()
        self.frames = 0
        self.active_frames = 0

    # -- input ---------------------------------------------------------------------------

    def push(self, pcm: Pcm, t_start_ns: int, *, continuous: bool = True) -> None:
        """Add samples whose first one is heard at ``t_start_ns``.

        ``continuous=False`` says the chunk follows a gap in time: the partial
        frame before it is completed with silence, and a new anchor is taken.
        """
        n = pcm.size
        if n == 0:
            return
        self.samples_in += n
        if not continuous:
            self._pad_partial()
            self._timeline.add_break(self._pos)
        self._timeline.add(self._pos, t_start_ns)
        self._chunks.append(pcm)
        self._npending += n
        self._pos += n
        self._last_t_end = t_start_ns + n * 1_000_000_000 // self.sample_rate_hz
        if self._npending >= self._batch:
            self._gather()
            self._analyse()

    def _pad_partial(self) -> None:
        """Complete the last partial frame with the silence that followed it, and analyse."""
        self._gather()
        self._pad()
        self._analyse()

    def _pad(self) -> None:
        if self._pending.size % self._frame:
            pad = self._frame - self._pending.size % self._frame
            self._pending = np.concatenate((self._pending, np.zeros(pad, dtype=np.int16)))
            self._pos += pad

    def _gather(self) -> None:
        """Join the chunks pushed since the last analysis onto the pending samples."""
        if not self._chunks:
            return
        parts = [self._pending, *self._chunks] if self._pending.size else self._chunks
        self._pending = np.concatenate(parts) if len(parts) > 1 else parts[0]
        self._chunks = []
        self._npending = 0

    def advance(self, t_ns: int) -> None:
        """Time has reached ``t_ns``: analyse what is pending; close a spurt gone quiet."""
        if self._prepare(t_ns):
            self._analyse()
        self._advanced(t_ns)

    def _prepare(self, t_ns: int) -> bool:
        """Make ready what :meth:`advance` analyses at ``t_ns``; whether it analyses."""
        end = self._last_t_end
        if end is not None and t_ns - end >= PAUSE_NS:
            # Nothing was heard for a while: the stream paused (not mere jitter).
            self._gather()
            self._pad()
            return True
        if self._chunks:
            self._gather()
            return True
        return False

    def _advanced(self, t_ns: int) -> None:
        if self._in_spurt:
            self._maybe_finish(t_ns, self.config.merge_gap_ms * NS_PER_MS)

    def finish(self, t_ns: int) -> None:
        """The stream is over at ``t_ns``: close any open spurt."""
        self._pad_partial()
        if self._in_spurt:
            self._finish_spurt()
        del t_ns

    # -- state for the session -----------------------------------------------------------

    @property
    def energy_shape(self) -> tuple[int, int]:
        """(samples a 1 ms window, ms a frame): batches of the same shape may share
        :func:`batch_energies`' pass."""
        return self._win, self.config.frame_ms

    @property
    def speaking(self) -> bool:
        return self._in_spurt

    @property
    def speaking_voiced(self) -> bool:
        """A spurt is open and has enough pitched audio to be speech (not a cough)."""
        return self._in_spurt and self._voiced_ms >= MIN_VOICED_MS

    def settled_ns(self) -> int | None:
        """No spurt emitted later will have an onset before this time."""
        if self._in_spurt:
            # The onset is walked again when the spurt closes (at the utterance's level),
            # never earlier than two look-backs before its first loud window.
            first = self._t_of_win(self._first_above_win)
            return min(self._onset_t, first - 2 * self.config.onset_lookback_ms * NS_PER_MS)
        if self._last_t_end is None:
            return None
        # Audio not yet analysed may hold an onset, walked back by up to the look-back.
        unanalysed = self._pending.size + self._npending
        unanalysed_ns = unanalysed * 1_000_000_000 // self.sample_rate_hz
        # Twice: an onset is walked back once when found and once more at its level.
        margin = (2 * self.config.onset_lookback_ms + self.config.frame_ms) * NS_PER_MS
        return self._last_t_end - unanalysed_ns - margin

    def deadline_ns(self) -> int | None:
        """When an open spurt will close if no more audio is heard."""
        if not self._in_spurt:
            return None
        cfg = self.config
        # The same rule as _maybe_finish: the pause counts from the refined offset,
        # which may lie after the last active window.
        end_ns = self._t_of_end(self._refined_end())
        return end_ns + int(cfg.merge_gap_ms * NS_PER_MS) + self._close_lookback_ns() + 1

    # -- analysis ------------------------------------------------------------------------

    def _whole_frames(self) -> Pcm | None:
        """The pending samples' whole frames (None: not one)."""
        frame = self._frame
        pending = self._pending
        n_frames = pending.size // frame
        if n_frames == 0:
            return None
        # (Whole frames pending, as a wire's 20 ms chunks leave them: no slice to make.)
        return pending if pending.size == n_frames * frame else pending[: n_frames * frame]

    def _analyse(self, batch: tuple[Pcm, F32, F32] | None = None) -> None:
        """Walk the pending whole frames; ``batch``: them with their energies (windows',
        frames'), computed with another detector's (``analysis/together.py``)."""
        if batch is None:
            found = self._whole_frames()
            if found is None:
                return
            usable = found
            power, frame_pow = batch_energies(
                [usable], self._win, self.config.frame_ms, self._win_scale, self._frame_scale
            )[0]
        else:
            usable, power, frame_pow = batch
        frame = self._frame
        n_frames = usable.size // frame
        cfg = self.config
        fm = cfg.frame_ms
        pending = self._pending
        frame_db: list[float] = frame_pow.tolist()
        energies = power  # one value per 1 ms window, in dB
        win_db: list[float] | None = None
        first_win = self._framed // self._win
        # The whole batch's energies and samples are stored before its frames are walked,
        # so an edge walk may look ahead to its end.
        self._written_win = first_win + n_frames * fm
        self._store(first_win, energies, usable)
        raw = usable.tobytes()
        nbytes = frame * 2
        merge_ns = cfg.merge_gap_ms * NS_PER_MS
        is_speech = self._is_speech
        start_margin = cfg.start_margin_db
        timeline = self._timeline  # (its methods called on it: a compiled call)
        win = self._win
        self.frames += n_frames
        for f in range(n_frames):
            fdb = frame_db[f]
            if fdb < self._all_block_min:
                self._all_block_min = fdb
            start_thr = self._floor_db + start_margin
            win0 = first_win + f * fm
            loud = fdb > start_thr
            voiced = None
            if self._bed_start_db < 100.0:
                if self._in_spurt and self._opened_quiet and self._voiced_ms < MIN_VOICED_MS:
                    self._drop_bed_spurt()  # (opened on the bed before it was known)
                # Over a bed only a pitched frame counts, from BED_START_DB above its mean:
                # noise has no pitch, whatever its level does (audible.py).
                loud = fdb > self._bed_start_db
                if loud:
                    voiced = loud = self._voicing_of(usable, f) > VOICING_THRESHOLD
                    start_thr = min(start_thr, self._bed_start_db)
            if loud and voiced is None and not is_speech(raw[f * nbytes : (f + 1) * nbytes], frame):
                # webrtcvad rejects the first frames of a stream that starts on speech: a
                # loud frame with pitch is speech all the same, never noise to learn.
                voiced = self._voicing_of(usable, f) > VOICING_THRESHOLD
                loud = voiced
            if loud and self._bed_may_end():
                if voiced is None:
                    voiced = self._voicing_of(usable, f) > VOICING_THRESHOLD
                if voiced:  # pitch after a bed from the first frame: the bed ends the spurt
                    start_thr = self._bed_before_speech(start_margin)
                    loud = fdb > start_thr
            if not loud:
                self._update_floor(fdb)
                if self._in_spurt:
                    self._utt_db.append(fdb)
                    self._utt_level = None
                    self._maybe_finish(self._t_of_win(win0), merge_ns)
                elif fdb > self._clamp + 1.0:
                    self._psd_count += 1
                    # (a noise spectrum learned from every 4th quiet frame)
                    quiet = usable[f * frame : (f + 1) * frame]
                    self._queue_noise(win0, quiet, self._psd_count % 4 == 1)
                continue
            self.active_frames += 1
            if self._block_count + 1 < self._block_frames:
                self._block_count += 1  # (no new block: the floor stays as it is)
            else:
                self._block_tick()
            if win_db is None:
                win_db = energies.tolist()
            base = f * fm
            end = base + fm
            first = base
            while first < end and not win_db[first] > start_thr:
                first += 1
            if first == end:
                raise IndexError("a loud frame without a loud window")  # (as it always did)
            last = end - 1
            while not win_db[last] > start_thr:
                last -= 1
            first_above = win0 + first - base
            last_above = win0 + last - base
            if self._in_spurt and timeline.t_at(win0 * win) - self._last_active_t > merge_ns:
                # A long pause: does the new onset, walked back, fall within the merge
                # gap of the refined offset of the open spurt? (The walk over a bed reads
                # the noise before it, here between words: it leaves the open spurt's.)
                kept = self._onset_band, self._onset_noise
                onset = self._walk_back(first_above, self._edge_threshold())
                self._onset_band, self._onset_noise = kept
                self._cap_reference(first_above)
                end_win = self._refined_end()
                if self._t_of_win(onset) - self._t_of_end(end_win) > merge_ns:
                    self._close(end_win)
                    self._in_spurt = True
                    self._onset_band, self._offset_band = UNRESOLVED_BAND_MS
                    self._opened_quiet = self._bed_start_db >= 100.0
                    self._spurt_from = self._utt_db.total
                    self._first_above_win = first_above
                    self._onset_win = onset
                    self._onset_t = self._t_of_win(onset)
                    self._onset_final = False
                self._next_onset_win = NO_NEXT_ONSET
            elif not self._in_spurt:
                self._in_spurt = True  # (its edges unresolved until walked over a bed)
                self._onset_band, self._offset_band = UNRESOLVED_BAND_MS
                self._opened_quiet = self._bed_start_db >= 100.0  # (no bed known yet)
                if self._t_of_win(first_above) - self._prev_offset_t >= UTTERANCE_GAP_NS:
                    self._utt_frames = 0
                    self._utt_db.clear()
                    self._utt_level = None
                self._spurt_from = self._utt_db.total
                self._first_above_win = first_above
                self._onset_win = self._walk_back(first_above, self._edge_threshold())
                self._onset_t = self._t_of_win(self._onset_win)
                self._onset_final = False
                self._voiced_ms = 0.0
                self._spurt_frames = 0
                self._recent_voicing.clear()
            # The talker's running level (about 10 s of active frames) and the utterance's.
            n = self._level_frames = min(self._level_frames + 1, 500)
            self._level_pow += (10.0 ** (fdb / 10.0) - self._level_pow) / n
            self._utt_frames += 1
            self._utt_db.append(fdb)
            self._utt_level = None
            if not self._onset_final and self._utt_frames >= REWALK_FRAMES:
                self._rewalk_onset()
            if self._voiced_ms < VOICED_ENOUGH_MS:
                if voiced is None:
                    voiced = self._voicing_of(usable, f) > VOICING_THRESHOLD
                if voiced:
                    self._voiced_ms += fm
            self._last_active_win = last_above
            self._last_active_t = timeline.t_at((last_above + 1) * win)
            self._spurt_frames += 1
            if self._spurt_frames % NOISE_BED_STRIDE == 0:
                self._recent_voicing.append(
                    voiced if voiced is not None else self._voicing_window(usable, f)
                )
                if self._spurt_frames >= NOISE_BED_FRAMES and self._in_noise_bed():
                    self._restart_floor(win0 + fm)
            if self._spurt_frames == EARLY_BED_FRAMES and self._early_bed():
                self._restart_floor(win0 + fm)
        if self._bed_start_db < 100.0:  # over a bed: could a talker go unheard under it?
            self._note_masking(first_win, first_win + n_frames * fm)
        self._framed += n_frames * frame
        self._prev_tail = usable[-self._voicing_extra :].copy()
        self._pending = _NO_SAMPLES if usable is pending else pending[n_frames * frame :]
        # Anchors are kept as long as the energy history (an onset is walked again when
        # its spurt closes, up to the history's length later).
        self._timeline.prune_before(self._framed - self._hist.size * self._win)

    def _close(self, end_win: int) -> None:
        cfg = self.config
        self._walk_onset_again()
        self._forget_noise_after(self._onset_win)
        self.read_bed_before()  # (before the last offset moves past this spurt)
        amb_on, amb_off = self._edge_ambiguity(end_win)
        audible = self._audible_ok()
        # Walked in quiet over a bed reaching the threshold: read over it, with its bands.
        onset_bed = None if audible else self.onset_over_bed()
        over_bed = None if audible else self.offset_over_bed(end_win)
        amb_on = amb_on if onset_bed is None else 0.0
        end_win, amb_off = (end_win, amb_off) if over_bed is None else (over_bed[0], 0.0)
        self._in_spurt = False
        self._prev_offset_win = end_win
        self._prev_offset_t = self._t_of_end(end_win)
        # Fixed when the onset was decided: by now the anchors that map its window to
        # the clock may have been pruned, and a gap in time may lie after it.
        onset_ns = self._onset_t
        # Speech is as long as its audio, not as the clock spans it: a whole utterance
        # that arrived in one burst (a sender that buffers) maps to the 20 ms its last
        # chunk covers (MEASUREMENT.md 1), and was dropped as too short to be speech.
        # There its offset, later in the audio, may fall earlier in its chunk than the
        # onset in its own: both stand at the burst's arrival, the offset never before.
        offset_ns = max(self._t_of_end(end_win), onset_ns)
        if end_win - self._onset_win < cfg.min_speech_ms:
            return
        level = self.level_dbfs
        seen = (NOMINAL_LEVEL_DBFS if level is None else level) - self._raw_floor_db
        masked_on, masked_off = masked_ms(seen - cfg.edge_margin_db)
        # Over a bed, the edges' band; unresolved if the talker stands too near the bed (or
        # its level rests on fewer frames than P.56 is read from: at SNR near 0 dB the few
        # frames that rise out of the bed read 7-13 dB above it), or the spurt began before
        # the bed was known (its frames took noise for speech).
        resolved = (
            level is not None
            and self._utt_frames >= MIN_LEVEL_FRAMES
            and level - self._bed_level_db() >= UNRESOLVED_SNR_DB
        )
        if resolved and audible:
            bands = UNRESOLVED_BAND_MS if self._opened_quiet else None
            masked_on, masked_off = bands or (self._onset_band, self._offset_band)
        masked_on = masked_on if onset_bed is None else max(masked_on, onset_bed)
        unfound = over_bed is None and self.offset_unfound(end_win, quiet=not audible)
        if over_bed is not None:
            masked_off = max(masked_off, over_bed[1])
        elif unfound:
            masked_off = max(masked_off, UNRESOLVED_BAND_MS[1])
        voiced = min(self._voiced_ms, VOICED_ENOUGH_MS)
        walked = resolved and audible
        on, off = self.steady_edges(masked_on, masked_off, walked=walked, offset_found=not unfound)
        self.spurts.append(
            Spurt(onset_ns, offset_ns, voiced, masked_on, masked_off, amb_on, amb_off, on, off)
        )
