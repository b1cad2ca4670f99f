"""The speech detector's settings (:class:`VadConfig`), what it emits (:class:`Spurt`)
and the constants its rules are written in (:mod:`voxproxy.core.analysis.vad` says how it
works). The masking table bounds how much of an edge a faint floor may hide.
"""

from __future__ import annotations

from dataclasses import dataclass

from voxproxy.core.timebase import NS_PER_MS

PAUSE_NS = 100 * NS_PER_MS  # no audio for this long: the partial frame is followed by silence
MIN_VOICED_MS = 40.0  # a spurt with less pitched audio than this is noise, not speech
VOICED_ENOUGH_MS = 100.0  # stop measuring voicing once a spurt has this much
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
# A wire that carries the talker band-limited (under FULL_BAND_RATE_HZ, the recordings'
# rate, or G.711) carries less of them than the recording the truth takes its level from
# (MEASUREMENT.md 2), mostly a release's energy (fricatives, affricates, breath lie high):
# the level the detector reads stands up to BAND_LOSS_DB under the recording's (over the
# clips and the corpus, p95 0.43 dB at 8 kHz). caller_topic_change's release, 0.26-0.45 dB
# under the truth's threshold for 47 ms on those wires, is kept by the detector
# (LEVEL_SLACK_DB) and not by the truth. A wire at or above FULL_BAND_RATE_HZ carries all
# of the recording's band, and the truth keeps its edges, whatever rate the detector reads
# it at (24 kHz averaged down to 8).
BAND_LOSS_DB = 0.5
FULL_BAND_RATE_HZ = 16000
# A spurt of an utterance (spurts < UTTERANCE_GAP apart) whose own level stands this far
# from the utterance's may be an utterance of its own (a barge-in soon after the caller's
# last words): its edges' ambiguity then spans its own level too. Within one recording
# of the project's clips and the corpus, a spurt's own level stood at most 0.9 dB from
# the whole's (caller_topic_change); barge-ins in the space test stood 10-17 dB apart.
SPURT_APART_DB = 2.0
# A flush cuts an answer at an instant the listener places a little differently from the
# proxy (the forwarding leg's jitter between the audio and the flush after it). Where the
# speech ran up to the cut, its end is the cut, a few ms either way; but a cut that fell
# just after a pause in the answer (the first ms of the next word) ends the speech there
# for the proxy and at the pause for a listener who heard the cut this much earlier. Live
# (accuracy benchmark, a contended machine): a Twilio caller heard the cut 6 ms before the
# proxy did, 0.5 ms into a word after a 40 ms pause, and the stop read 39 ms late.
CUT_JITTER_MS = 10
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
# A bed that starts with the stream (a caller in a car or a street from the first frame)
# and is taken for speech by a floor that assumes quiet: a spurt that opened on the
# stream's first frames and has run this many frames (500 ms) without one pitched frame,
# its frames' levels within EARLY_BED_SPREAD_DB, is that bed, before the talker's first
# words merge into it (the scripted calls' callers start 0.75 s in). Shorter unpitched
# sounds from the first frame (a burst of noise) stay spurts of their own.
EARLY_BED_FRAMES = 25
EARLY_BED_SPREAD_DB = 15.0  # brown noise's 20 ms frames span up to 14 dB over 500 ms
# ... and one whose first pitched frame comes after this many frames (100 ms) of it is that
# bed with a talker starting over it (the load generator's callers speak 250 ms in).
BED_SPLIT_FRAMES = 5
# A quiet frame is learned as noise this long after it was heard, unless a spurt's onset
# was walked back to it meanwhile (the onset walk reaches back onset_lookback_ms).
NOISE_LEARN_DELAY_MS = 400
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


# How far the level of an answer's first ``heard`` ms may stand from the whole answer's
# (which the truth takes): p95 over the project's speech clips and the corpus's voices,
# P.56 read from 20 ms frames at 8 kHz
# (tests/core/session/test_evidence_withheld.py re-measures it).
# An answer cut by a flush was heard only so far. Read as a step: the row at or just
# below what was heard.
LEVEL_SPREAD_TABLE: tuple[tuple[float, float], ...] = (
    (0.0, 6.0),
    (200.0, 4.8),
    (300.0, 3.7),
    (400.0, 3.0),
    (700.0, 1.9),
    (1000.0, 1.7),
    (1500.0, 1.2),
    (2000.0, 1.1),
    (3000.0, 0.6),
)


def level_spread_db(heard_ms: float) -> float:
    """How far (dB, p95) a level read from ``heard_ms`` of an answer may stand from the
    whole answer's, from :data:`LEVEL_SPREAD_TABLE`."""
    spread = LEVEL_SPREAD_TABLE[0][1]
    for heard, db in LEVEL_SPREAD_TABLE:
        if heard_ms >= heard:
            spread = db
    return spread


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
    # How far noise may put the true edge from this one: over a bed, how far the heard
    # edge moves with the speech estimate 3 dB off (analysis/audible.py); over a faint
    # floor or at SNR near 0 dB, the p95 of MASKING_TABLE for how far under the talker's
    # level the detector could see; 0 in quiet.
    masked_onset_ms: float = 0.0
    masked_offset_ms: float = 0.0
    # How far each edge moves when the talker's level reads EDGE_LEVEL_DB off (in quiet:
    # the truth's threshold follows the level of the whole recording).
    ambiguous_onset_ms: float = 0.0
    ambiguous_offset_ms: float = 0.0
    # Each edge read over a steady bed (audible.STEADY_DIP_DB) against the noise beside
    # it: its band bounds the heard truth even where it is too wide to publish.
    steady_onset: bool = False
    steady_offset: bool = False

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
