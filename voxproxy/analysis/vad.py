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
   detector in the manner of Rabiner and Sambur, 1975). This removes the
   hangover and the start-up false alarms, and brings edges to within a few
   milliseconds on clean speech.

Positions inside the stream (sample indices) are the source of truth; each
pushed chunk anchors its positions to the shared clock. Chunks that continue
the stream without a gap share one timeline; a chunk that starts after a gap
(agent audio after a pause in playout) begins a new anchor, and the partial
frame before it is completed with the silence that the gap really was.

The detector is pure: it is handed samples with their times and ``advance``
calls when time passes without samples. It emits finished :class:`Spurt`
objects; ``settled_ns`` promises that no later spurt will start before it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import webrtcvad

from voxproxy.audio.levels import frame_active_level
from voxproxy.events import Pcm
from voxproxy.timebase import NS_PER_MS

PAUSE_NS = 100 * NS_PER_MS  # no audio for this long: the partial frame is followed by silence
MIN_VOICED_MS = 40.0  # a spurt with less pitched audio than this is noise, not speech
VOICED_ENOUGH_MS = 100.0  # stop measuring voicing once a spurt has this much
VOICING_THRESHOLD = 0.45  # normalized autocorrelation peak at a pitch lag (80-400 Hz)
SPECTRAL_HOP_MS = 5  # spectral edge refinement (noisy conditions only): hop between frames
SPECTRAL_MARGIN_DB = 8.0  # a bin counts when this far above the learned noise spectrum
SPECTRAL_PRESENCE = 0.06  # ... and a frame is speech when this share of bins does
SPECTRAL_TOLERANCE_MS = 30  # pauses bridged by a spectral walk
# The running level (the mean power of active frames, used before an utterance has its
# own) reads about 1 dB above the P.56 active level of the same speech (P.56 counts
# 200 ms of hangover after each burst as active): +1.0 dB on average over the corpus and
# the fixtures (sd 0.8 dB). An utterance's own level is P.56's rule read from its frames
# (audio.levels.frame_active_level), within 0.4 dB of P.56, and needs no correction.
LEVEL_BIAS_DB = 1.0
# Edges walk this much below the truth's threshold: a level read from frames stands up to
# 0.4 dB off P.56's, and a breath's tail that hovers on the threshold for tens of ms
# (the project's caller_topic_change: 47 ms within 0.3 dB) is kept rather than cut.
LEVEL_SLACK_DB = 0.5
# How far the level read from an utterance may stand from the whole recording's, which
# the truth rule takes (MEASUREMENT.md 2): each edge also carries how far it moves when
# the edge threshold moves this much either way. A steep edge moves a millisecond or
# two; a breath or a slow release hovering near the threshold moves by its length.
# About the level reading's own error on the corpus (0.4 dB): festival's kal voice
# breathes 1-10 dB under the truth's threshold for 200 ms before it speaks; heard on
# 8 kHz mu-law the proxy's onset landed up to 130 ms early there (113 ms stated).
EDGE_LEVEL_DB = 0.5
UTTERANCE_FRAMES = 1500  # an utterance's level is read from at most this many frames
# A talk-spurt this long never had the quiet of a merge gap: the direction is never
# quiet (babble, music, a bed of speech) and its edges are not speech edges.
NEVER_QUIET_NS = 20_000 * NS_PER_MS
UTTERANCE_GAP_NS = 1000 * NS_PER_MS  # a spurt after this much silence starts an utterance
MIN_LEVEL_FRAMES = 5  # an utterance's own level is used from this many active frames
CLOSE_LOOKBACK_NS = 150 * NS_PER_MS  # a spurt closes a merge gap and at most this much later
REWALK_FRAMES = 25  # ... and its onset walked again with it after this many (0.5 s)
NOMINAL_LEVEL_DBFS = -26.0  # assumed before a talker is heard: a usual telephone speech level
# A bed of noise that started with the stream (or after it) is taken for speech while the
# floor assumes quiet, and the floor never learns from speech: a spurt that has run this
# many frames (1 s) with at most one pitched frame among the last NOISE_BED_SAMPLES (one
# sampled every NOISE_BED_STRIDE frames), whose quietest frame over the last ~2 s stands
# above the floor, is that bed: the floor starts again from it.
NOISE_BED_FRAMES = 50
NOISE_BED_STRIDE = 5
NOISE_BED_SAMPLES = 10
SINGLE_WINDOW_MARGIN_DB = 10.0
# (seen down to dB under the level, onset hidden p95 ms, offset hidden p95 ms): the truth
# counts windows within 35 dB of the talker's level, a detector over noise sees down to
# its floor + edge_margin_db; how much of each edge lies between, over the project's
# speech clips and the corpus's voices (tools/calibrate_masking.py; a test keeps it an
# upper bound). Read as a step: the row at or just below what was seen.
MASKING_TABLE: tuple[tuple[float, float, float], ...] = (
    (0.0, 153.0, 213.0),
    (5.0, 153.0, 167.0),
    (10.0, 151.0, 143.0),
    (15.0, 149.0, 137.0),
    (20.0, 134.0, 135.0),
    (25.0, 131.0, 105.0),
    (28.0, 129.0, 77.0),
    (30.0, 129.0, 69.0),
    (31.0, 82.0, 56.0),
    (32.0, 81.0, 52.0),
    (33.0, 81.0, 21.0),
    (34.0, 33.0, 17.0),
    (35.0, 0.0, 0.0),
)


def masked_ms(seen_db: float) -> tuple[float, float]:
    """How much of an onset and of an offset a detector that sees ``seen_db`` under the
    talker's level may miss (p95), from :data:`MASKING_TABLE`."""
    onset, offset = MASKING_TABLE[0][1], MASKING_TABLE[0][2]
    for depth, on, off in MASKING_TABLE:
        if seen_db >= depth:
            onset, offset = on, off
    return onset, offset  # 1 ms windows of steady noise stay within this of its floor


@dataclass(frozen=True, slots=True)
class VadConfig:
    """Detector settings. Defaults are the ones the accuracy tests prove."""

    frame_ms: int = 20
    mode: int = 3
    merge_gap_ms: float = 300.0
    min_speech_ms: float = 60.0
    start_margin_db: float = 12.0
    edge_margin_db: float = 6.0
    floor_clamp_dbfs: float = -56.0  # the start threshold never drops below this + margin
    level_range_db: float = 35.0  # in quiet, edges walk down to the talker's level - this
    edge_floor_dbfs: float = -90.0  # ... but never below this
    floor_window_s: float = 2.0
    edge_tolerance_ms: int = 120  # pause bridged by an edge walk in quiet conditions
    noisy_edge_tolerance_ms: int = 12  # ... and above a noise floor
    edge_smooth_ms: int = 3  # edge walks compare the mean power of this many 1 ms windows
    # Far above the floor, edges follow the truth rule: windows up to merge_gap_ms apart
    # belong together, so the walks reach a merge gap and a frame beyond the decision.
    onset_lookback_ms: int = 320
    offset_lookahead_ms: int = 320

    def __post_init__(self) -> None:
        if self.frame_ms not in (10, 20, 30):
            raise ValueError(f"frame_ms must be 10, 20 or 30 (webrtcvad), got {self.frame_ms}")
        if not 0 <= self.mode <= 3:
            raise ValueError(f"VAD mode must be 0-3, got {self.mode}")
        if self.merge_gap_ms < 0 or self.min_speech_ms < 0:
            raise ValueError("merge_gap_ms and min_speech_ms must not be negative")


@dataclass(frozen=True, slots=True)
class Spurt:
    """One talk-spurt: its true onset and offset on the shared clock."""

    onset_ns: int
    offset_ns: int
    voiced_ms: float = VOICED_ENOUGH_MS  # voiced (pitched) audio seen in it, capped
    # How much of the true edge a bed of noise may hide (the p95 of MASKING_TABLE for
    # how far under the talker's level the detector could see): 0 in quiet.
    masked_onset_ms: float = 0.0
    masked_offset_ms: float = 0.0
    # How far each edge moves when the talker's level reads EDGE_LEVEL_DB off (in quiet:
    # the truth's threshold follows the level of the whole recording).
    ambiguous_onset_ms: float = 0.0
    ambiguous_offset_ms: float = 0.0

    @property
    def never_quiet(self) -> bool:
        """Longer than any utterance: what it holds is a bed that never went quiet."""
        return self.offset_ns - self.onset_ns > NEVER_QUIET_NS

    @property
    def voiced(self) -> bool:
        """Speech has pitch; a cough, a door or a click does not."""
        return self.voiced_ms >= MIN_VOICED_MS

    @property
    def duration_ms(self) -> float:
        return (self.offset_ns - self.onset_ns) / NS_PER_MS


VOICING_BAND_HZ = (60.0, 1000.0)  # where a voice's fundamental and first harmonics lie


def voicing(window: Pcm, lag_lo: int, lag_hi: int, sample_rate_hz: int | None = None) -> float:
    """Periodicity of a window: the highest interior peak of its normalized
    autocorrelation between lags ``lag_lo`` and ``lag_hi`` (pitch 80-400 Hz).

    The autocorrelation is taken over the 60-1000 Hz band only (a mask on the spectrum
    it is computed from), where a voice's fundamental and first harmonics carry its
    periodicity: broadband noise above the band no longer hides it (at 10 dB SNR in
    white noise, 32-64% of the project's and the corpus's speech frames stay voiced,
    against 0-6% with the whole band pre-emphasized), and noise, a cough or a door
    inside the band has no such peak. ``sample_rate_hz`` defaults to ``lag_hi * 80``.
    """
    rate = sample_rate_hz if sample_rate_hz is not None else lag_hi * 80
    f = window.astype(np.float64)
    f -= f.mean()
    if not f.any():
        return 0.0
    nfft = 1 << (2 * f.size - 1).bit_length()
    spec = np.fft.rfft(f, nfft)
    lo_bin = int(VOICING_BAND_HZ[0] * nfft / rate)
    hi_bin = int(VOICING_BAND_HZ[1] * nfft / rate) + 1
    power = np.zeros(spec.size)
    band = spec[lo_bin:hi_bin]
    power[lo_bin:hi_bin] = band.real**2 + band.imag**2
    ac = np.fft.irfft(power, nfft)[: lag_hi + 2]
    if ac[0] <= 0.0:
        return 0.0
    ac /= ac[0]
    r = ac[max(lag_lo - 1, 1) : lag_hi + 2]
    mid = r[1:-1]
    peaks = mid[(mid > r[:-2]) & (mid >= r[2:])]
    return float(peaks.max()) if peaks.size else 0.0


class _Timeline:
    """Maps stream positions to clock times through per-chunk anchors (binary search)."""

    __slots__ = ("_breaks", "_pos", "_rate", "_t")

    def __init__(self, sample_rate_hz: int) -> None:
        self._rate = sample_rate_hz
        self._pos: list[int] = []  # anchor positions, increasing
        self._t: list[int] = []  # clock time of each anchor position
        self._breaks: list[int] = []  # positions where a push followed a gap in time

    def add_break(self, pos: int) -> None:
        if not self._breaks or self._breaks[-1] != pos:
            self._breaks.append(pos)

    def last_break_at_or_before(self, pos: int) -> int | None:
        i = bisect_right(self._breaks, pos) - 1
        return self._breaks[i] if i >= 0 else None

    def add(self, pos: int, t_ns: int) -> None:
        if self._pos and self._pos[-1] == pos:
            self._t[-1] = t_ns  # the previous anchor covered no samples
            return
        self._pos.append(pos)
        self._t.append(t_ns)

    def t_at(self, pos: int) -> int:
        anchors = self._pos
        if anchors and pos >= anchors[-1]:  # the usual question: about the latest audio
            return self._t[-1] + (pos - anchors[-1]) * 1_000_000_000 // self._rate
        i = bisect_right(anchors, pos) - 1
        if i < 0:
            i = 0
        return self._t[i] + (pos - anchors[i]) * 1_000_000_000 // self._rate

    def covers(self, pos: int) -> bool:
        """Whether ``pos`` still maps to a time (its anchor was not pruned)."""
        return bool(self._pos) and pos >= self._pos[0]

    def first_break_after(self, pos: int) -> int | None:
        i = bisect_right(self._breaks, pos)
        return self._breaks[i] if i < len(self._breaks) else None

    def prune_before(self, pos: int) -> None:
        i = bisect_right(self._pos, pos) - 1
        if i > 64:  # trim in batches
            del self._pos[:i]
            del self._t[:i]
        j = bisect_right(self._breaks, pos) - 1
        if j > 64:
            del self._breaks[:j]


class SpeechDetector:
    """Talk-spurt detector for one direction of one call."""

    def __init__(
        self, sample_rate_hz: int, config: VadConfig | None = None, *, batch_ms: float = 0.0
    ) -> None:
        """``batch_ms`` > 0 defers analysis until that much audio is pending (or until
        :meth:`advance`), which spreads numpy's per-call cost over several chunks."""
        if sample_rate_hz not in (8000, 16000, 32000, 48000):
            raise ValueError(f"webrtcvad needs 8, 16, 32 or 48 kHz, got {sample_rate_hz}")
        self.config = cfg = config or VadConfig()
        self.sample_rate_hz = sample_rate_hz
        self._win = sample_rate_hz // 1000  # samples per 1 ms window
        self._frame = self._win * cfg.frame_ms  # samples per VAD frame
        self._vad = webrtcvad.Vad(cfg.mode)
        self._timeline = _Timeline(sample_rate_hz)
        self._pending = np.zeros(0, dtype=np.int16)
        self._chunks: list[Pcm] = []  # pushed since the last analysis
        self._batch = int(batch_ms * sample_rate_hz / 1000)
        self._npending = 0
        self._pos = 0  # stream position of the next sample pushed
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
        self._noise_psd: npt.NDArray[np.float64] | None = None
        self._psd_count = 0
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
        self._utt_db: deque[float] = deque(maxlen=UTTERANCE_FRAMES)
        self._utt_level: float | None = None
        self._first_above_win = 0  # the open spurt's first window above the start threshold
        self._utt_start_pos = 0  # stream position where the current utterance began
        self.silence_ns = 0  # digital silence the caller heard (note_silence)
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
        if pcm.size == 0:
            return
        if not continuous:
            self._pad_partial()
            self._timeline.add_break(self._pos)
        self._timeline.add(self._pos, t_start_ns)
        self._chunks.append(pcm)
        self._npending += pcm.size
        self._pos += pcm.size
        self._last_t_end = t_start_ns + pcm.size * 1_000_000_000 // self.sample_rate_hz
        if self._npending >= self._batch:
            self._gather()
            self._analyse()

    def note_silence(self, duration_ns: int) -> None:
        """``duration_ns`` of digital silence was heard (nothing played): the floor
        learns it without a frame being analysed. The next push should follow with
        ``continuous=False``."""
        if duration_ns <= 0:
            return
        self.silence_ns += duration_ns
        frames = min(duration_ns // (self.config.frame_ms * NS_PER_MS), self._block_frames * 5)
        for _ in range(int(frames)):
            self._update_floor(-100.0)

    def _pad_partial(self) -> None:
        """Complete the last partial frame with the silence that followed it, and analyse."""
        self._gather()
        if self._pending.size % self._frame:
            pad = self._frame - self._pending.size % self._frame
            self._pending = np.concatenate((self._pending, np.zeros(pad, dtype=np.int16)))
            self._pos += pad
        self._analyse()

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
        end = self._last_t_end
        if end is not None and t_ns - end >= PAUSE_NS:
            # Nothing was heard for a while: the stream paused (not mere jitter).
            self._pad_partial()
        elif self._chunks:
            self._gather()
            self._analyse()
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

    def _t_of_win(self, win: int) -> int:
        return self._timeline.t_at(win * self._win)

    def _analyse(self) -> None:
        frame = self._frame
        n_frames = self._pending.size // frame
        if n_frames == 0:
            return
        cfg = self.config
        fm = cfg.frame_ms
        usable = self._pending[: n_frames * frame]
        x = usable.astype(np.float32).reshape(-1, self._win)
        power = np.einsum("ij,ij->i", x, x) * (1.0 / (self._win * 32768.0 * 32768.0))
        np.maximum(power, 1e-10, out=power)
        energies = 10.0 * np.log10(power)  # one value per 1 ms window
        frame_db = (10.0 * np.log10(power.reshape(n_frames, fm).sum(axis=1) * (1.0 / fm))).tolist()
        win_db: list[float] | None = None
        first_win = self._framed // self._win
        # The whole batch's energies and samples are stored before its frames are walked,
        # so an edge walk may look ahead to its end.
        self._written_win = first_win + n_frames * fm
        hist, mask = self._hist, self._hist_mask
        start = first_win & mask
        end = start + energies.size
        if end <= hist.size:
            hist[start:end] = energies
        else:
            hist[(np.arange(first_win, first_win + energies.size)) & mask] = energies
        ring_start = self._framed & self._ring_mask
        ring_end = ring_start + usable.size
        if ring_end <= self._ring.size:
            self._ring[ring_start:ring_end] = usable
        else:
            self._ring[(np.arange(self._framed, self._framed + usable.size)) & self._ring_mask] = (
                usable
            )
        raw = usable.tobytes()
        nbytes = frame * 2
        rate = self.sample_rate_hz
        merge_ns = cfg.merge_gap_ms * NS_PER_MS
        is_speech = self._vad.is_speech
        for f in range(n_frames):
            fdb = frame_db[f]
            if fdb < self._all_block_min:
                self._all_block_min = fdb
            start_thr = self._floor_db + cfg.start_margin_db
            win0 = first_win + f * fm
            self.frames += 1
            loud = fdb > start_thr
            voiced = None
            if loud and not is_speech(raw[f * nbytes : (f + 1) * nbytes], rate):
                # webrtcvad rejects the first frames of a stream that starts on speech: a
                # loud frame with pitch is speech all the same, never noise to learn.
                voiced = self._voicing_of(usable, f) > VOICING_THRESHOLD
                loud = voiced
            if not loud:
                self._update_floor(fdb)
                if self._in_spurt:
                    self._utt_db.append(fdb)
                    self._utt_level = None
                    self._maybe_finish(self._t_of_win(win0), merge_ns)
                elif fdb > self._clamp + 1.0:
                    self._psd_count += 1
                    if self._psd_count % 4 == 1:  # a noise spectrum every 4th quiet frame
                        self._learn_noise(usable[f * frame : (f + 1) * frame])
                continue
            self.active_frames += 1
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
            if self._in_spurt and self._t_of_win(win0) - self._last_active_t > merge_ns:
                # A long pause: does the new onset, walked back, fall within the merge
                # gap of the refined offset of the open spurt?
                onset = self._walk_back(first_above, self._edge_threshold())
                end_win = self._refined_end()
                if self._t_of_win(onset) - self._t_of_end(end_win) > merge_ns:
                    self._close(end_win)
                    self._in_spurt = True
                    self._first_above_win = first_above
                    self._onset_win = onset
                    self._onset_t = self._t_of_win(onset)
                    self._onset_final = False
            elif not self._in_spurt:
                self._in_spurt = True
                if self._t_of_win(first_above) - self._prev_offset_t >= UTTERANCE_GAP_NS:
                    self._utt_frames = 0
                    self._utt_db.clear()
                    self._utt_level = None
                    self._utt_start_pos = first_above * self._win
                self._first_above_win = first_above
                self._onset_win = self._walk_back(first_above, self._edge_threshold())
                self._onset_t = self._t_of_win(self._onset_win)
                self._onset_final = False
                self._voiced_ms = 0.0
                self._spurt_frames = 0
                self._recent_voicing.clear()
            self._count_frame_level(fdb)
            if not self._onset_final and self._utt_frames >= REWALK_FRAMES:
                self._rewalk_onset()
            if self._voiced_ms < VOICED_ENOUGH_MS:
                if voiced is None:
                    voiced = self._voicing_of(usable, f) > VOICING_THRESHOLD
                if voiced:
                    self._voiced_ms += fm
            self._last_active_win = last_above
            self._last_active_t = self._t_of_win(last_above + 1)
            self._spurt_frames += 1
            if self._spurt_frames % NOISE_BED_STRIDE == 0:
                self._recent_voicing.append(
                    voiced if voiced is not None else self._voicing_window(usable, f)
                )
                if self._spurt_frames >= NOISE_BED_FRAMES and self._in_noise_bed():
                    self._restart_floor(win0 + fm)
        self._framed += n_frames * frame
        self._prev_tail = usable[-self._voicing_extra :].copy()
        self._pending = self._pending[n_frames * frame :]
        # Anchors are kept as long as the energy history (an onset is walked again when
        # its spurt closes, up to the history's length later).
        self._timeline.prune_before(self._framed - self._hist.size * self._win)

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
        pitched = 0
        for i, v in enumerate(recent):
            if not isinstance(v, bool):
                v = recent[i] = self._voicing_window_of(v) > VOICING_THRESHOLD
            pitched += v
        return pitched <= 1

    def _restart_floor(self, now_win: int) -> None:
        """Take the bed's quietest frames as the floor; what stands above the new edge
        threshold inside the open spurt (speech that began before the bed was recognised)
        is kept as a spurt, the rest was the bed."""
        self.noise_beds += 1
        floor = self._all_floor()
        self._block_mins.clear()
        self._block_mins.append(floor)
        self._blocks_min = floor
        self._block_min = float("inf")
        self._raw_floor_db = floor
        self._floor_db = floor if floor > self._clamp else self._clamp
        # The bed's frames were counted as the talker's: forget them.
        self._level_pow, self._level_frames = 0.0, 0
        self._utt_frames = 0
        self._utt_db.clear()
        self._utt_level = None
        lo = max(self._onset_win, (self._framed // self._win) - (self._hist.size - 64))
        hits = np.nonzero(self._above(lo, now_win, self._edge_threshold()))[0]
        if hits.size == 0 or not self._timeline.covers(lo * self._win):
            self._in_spurt = False
            self._prev_offset_win = now_win
            self._prev_offset_t = self._t_of_end(now_win)
            return
        onset = lo + int(hits[0])
        self._first_above_win = self._onset_win = onset
        self._onset_t = self._t_of_win(onset)
        self._close(lo + int(hits[-1]) + 1)

    def _rewalk_onset(self) -> None:
        """The onset was walked back before the talker's level was known (with a nominal
        level, which stops short of a quiet talker's soft start). With the utterance's
        own level, walk again."""
        self._onset_final = True
        self._walk_onset_again()

    def _voicing_of(self, usable: Pcm, f: int) -> float:
        """Voicing of frame ``f`` of ``usable`` with the 10 ms before it."""
        frame = self._frame
        lo = max(0, f * frame - self._voicing_extra)
        if f * frame >= self._voicing_extra or self._prev_tail.size == 0:
            window = usable[lo : (f + 1) * frame]
        else:
            window = np.concatenate((self._prev_tail, usable[: (f + 1) * frame]))
        return self._voicing_window_of(window)

    def _voicing_window(self, usable: Pcm, f: int) -> Pcm:
        """Frame ``f`` of ``usable`` with the 10 ms before it (a copy: kept for later)."""
        frame = self._frame
        lo = max(0, f * frame - self._voicing_extra)
        if f * frame >= self._voicing_extra or self._prev_tail.size == 0:
            return usable[lo : (f + 1) * frame].copy()
        return np.concatenate((self._prev_tail, usable[: (f + 1) * frame]))

    def _voicing_window_of(self, window: Pcm) -> float:
        return voicing(window, self._lag_lo, self._lag_hi, self.sample_rate_hz)

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

    def _count_frame_level(self, frame_db: float) -> None:
        power = 10.0 ** (frame_db / 10.0)
        n = self._level_frames = min(self._level_frames + 1, 500)
        self._level_pow += (power - self._level_pow) / n
        self._utt_frames += 1
        self._utt_db.append(frame_db)
        self._utt_level = None

    @property
    def level_dbfs(self) -> float | None:
        """The talker's level: P.56's active level read from the frames of the current
        utterance (spurts less than a second apart), or the mean power of the last ~10 s
        of active frames (less its bias) before it has a few. The truth rule takes the
        level of one recording; a level is a property of what is being said now, not of a
        louder earlier sentence."""
        if self._utt_frames >= MIN_LEVEL_FRAMES:
            if self._utt_level is None:
                db = np.fromiter(self._utt_db, dtype=np.float64, count=len(self._utt_db))
                self._utt_level = frame_active_level(db, self.config.frame_ms)
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

    def _above(self, lo: int, hi: int, threshold: float) -> npt.NDArray[np.bool_]:
        """Which 1 ms windows in ``[lo, hi)`` are above ``threshold``.

        A window counts when both it and the mean power of the
        ``edge_smooth_ms`` windows around it are above, so that neither a single
        noisy window nor a single dip decides an edge.
        """
        # Far above the floor (digital silence, a codec's idle) single windows decide, as
        # in the truth rule; nearer to noise, a window and its neighbours' mean must be.
        far = threshold - self._raw_floor_db >= SINGLE_WINDOW_MARGIN_DB
        n = 1 if far else self.config.edge_smooth_ms
        half = n // 2
        idx = np.arange(lo - half, hi + (n - 1 - half)) & self._hist_mask
        db = self._hist[idx]
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
        if self._noise_psd is None:
            self._noise_psd = spec
        else:
            self._noise_psd = 0.9 * self._noise_psd + 0.1 * spec

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

    def _spectral_back(self, onset_win: int, lower: int) -> int:
        """Move a noisy onset earlier, not before ``lower``, while speech is still
        present in the spectrum."""
        lower = max(lower, (self._framed // self._win) - (self._ring.size // self._win) + 64)
        if lower >= onset_win:
            return onset_win
        hop_ms = SPECTRAL_HOP_MS
        half = self.config.frame_ms // 2
        start, present = self._presence(lower, onset_win + half)
        earliest = onset_win
        misses = 0
        for i in range(present.size - 1, -1, -1):
            centre = start // self._win + i * hop_ms + half
            if centre > onset_win:
                continue
            if present[i]:
                earliest = centre - hop_ms // 2
                misses = 0
            else:
                misses += hop_ms
                if misses > SPECTRAL_TOLERANCE_MS:
                    break
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
        latest = end_win
        misses = 0
        hop_ms = SPECTRAL_HOP_MS
        for i in range(present.size):
            centre = start // self._win + i * hop_ms + half
            if centre < end_win:
                continue
            if present[i]:
                latest = centre + hop_ms // 2
                misses = 0
            else:
                misses += hop_ms
                if misses > SPECTRAL_TOLERANCE_MS:
                    break
        return max(end_win, min(latest, upper))

    def _walk_back(self, win: int, threshold: float, *, lookback: int | None = None) -> int:
        """Earliest window of the run above ``threshold`` that reaches ``win``, at most
        ``lookback`` windows (default: the configured look-back) before it.

        Pauses shorter than the tolerance inside the run are bridged.
        """
        cfg = self.config
        reach = cfg.onset_lookback_ms if lookback is None else lookback
        lower = max(win - reach, self._prev_offset_win, 0)
        lower = max(lower, (self._framed // self._win) - (self._hist.size - 64))
        # Do not walk back across a gap in time (a pause in playout).
        gap = self._timeline.last_break_at_or_before(win * self._win)
        if gap is not None:
            lower = max(lower, -(-gap // self._win))
        if lower >= win:
            return win
        ok = self._above(lower, win, threshold)[::-1]  # ok[i] is window win-1-i
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

    def _walk_forward(self, win: int, threshold: float) -> int:
        """End (exclusive) of the run above ``threshold`` that starts at ``win``."""
        cfg = self.config
        analysed = self._written_win
        upper = min(win + 1 + cfg.offset_lookahead_ms, analysed)
        # Do not walk across a gap in time (a pause in playout); the jitter of a
        # continuous stream's chunk anchors is not a gap.
        gap = self._timeline.first_break_after(win * self._win)
        if gap is not None:
            upper = min(upper, gap // self._win)
        if upper <= win + 1:
            return win + 1
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

    def _t_of_end(self, end_win: int) -> int:
        return self._t_of_win(end_win - 1) + NS_PER_MS

    def _refined_end(self) -> int:
        """The open spurt's offset window; final once the look-ahead has been analysed."""
        win = self._last_active_win
        cached = self._end_cache
        if cached is not None and cached[0] == win:
            return cached[1]
        end = self._walk_forward(win, self._edge_threshold())
        if self._written_win >= win + 1 + self.config.offset_lookahead_ms:
            self._end_cache = (win, end)
        return end

    def _maybe_finish(self, now_ns: int, merge_ns: float) -> None:
        """Close the open spurt once the pause after its refined offset is long enough.

        The wait includes a look-back, so that a later onset walked back into the
        merge gap mostly still merges; it is shorter than the onsets' full look-back,
        which would make every listener (the mock agent's turn-taking above all) hear
        the end of speech later.
        """
        if now_ns - self._last_active_t <= merge_ns:
            return
        end_win = self._refined_end()
        if now_ns - self._t_of_end(end_win) > merge_ns + self._close_lookback_ns():
            self._close(end_win)

    def _close_lookback_ns(self) -> int:
        return min(self.config.onset_lookback_ms * NS_PER_MS, CLOSE_LOOKBACK_NS)

    def _finish_spurt(self) -> None:
        self._close(self._refined_end())

    def _final_onset(self) -> None:
        """Walk the onset again with the level of the whole utterance so far: the level
        read from its first half second can stand several dB off (a quiet talker's
        first syllable), and the truth takes the level of all of it."""
        self._walk_onset_again()

    def _walk_onset_again(self) -> None:
        """Walk from the first loud window again, at the level known now, by up to two
        look-backs (a quiet talker's soft start lies under a nominal level's threshold)."""
        lookback = 2 * self.config.onset_lookback_ms
        first = self._first_above_win
        if not self._timeline.covers(max(first - lookback, 0) * self._win):
            return
        onset = self._walk_back(first, self._edge_threshold(), lookback=lookback)
        # Never later: a level read from part of a recording stands a few dB off that of
        # the whole (which the truth takes), and a later walk at a higher threshold loses
        # a soft first window for good; an earlier walk still stops at the threshold.
        if onset < self._onset_win:
            self._onset_win = onset
            self._onset_t = self._t_of_win(onset)

    def _close(self, end_win: int) -> None:
        cfg = self.config
        self._final_onset()
        amb_on, amb_off = self._edge_ambiguity(end_win)
        self._in_spurt = False
        self._prev_offset_win = end_win
        self._prev_offset_t = self._t_of_end(end_win)
        # Fixed when the onset was decided: by now the anchors that map its window to
        # the clock may have been pruned, and a gap in time may lie after it.
        onset_ns = self._onset_t
        offset_ns = self._t_of_end(end_win)
        if (offset_ns - onset_ns) < cfg.min_speech_ms * NS_PER_MS:
            return
        level = self.level_dbfs
        seen = (NOMINAL_LEVEL_DBFS if level is None else level) - self._raw_floor_db
        masked_on, masked_off = masked_ms(seen - cfg.edge_margin_db)
        voiced = min(self._voiced_ms, VOICED_ENOUGH_MS)
        self.spurts.append(
            Spurt(onset_ns, offset_ns, voiced, masked_on, masked_off, amb_on, amb_off)
        )

    def _edge_ambiguity(self, end_win: int) -> tuple[float, float]:
        """How far (ms) the onset and the offset move when the edge threshold moves
        EDGE_LEVEL_DB either way, where the threshold follows the talker's level (in
        quiet; above a noise floor the floor sets it and MASKING_TABLE covers it)."""
        cfg = self.config
        level = self.level_dbfs
        thr = self._edge_threshold()
        if level is None or thr - EDGE_LEVEL_DB <= self._raw_floor_db + cfg.edge_margin_db:
            return 0.0, 0.0
        first, onset = self._first_above_win, self._onset_win
        lookback = 2 * cfg.onset_lookback_ms
        if not self._timeline.covers(max(first - lookback, 0) * self._win):
            return 0.0, 0.0
        early = self._walk_back(first, thr - EDGE_LEVEL_DB, lookback=lookback)
        late = self._walk_back(first, thr + EDGE_LEVEL_DB, lookback=lookback)
        amb_on = max(onset - early, late - onset, 0)
        last = self._last_active_win
        longer = self._walk_forward(last, thr - EDGE_LEVEL_DB)
        shorter = self._walk_forward(last, thr + EDGE_LEVEL_DB)
        amb_off = max(longer - end_win, end_win - shorter, 0)
        return float(amb_on), float(amb_off)
