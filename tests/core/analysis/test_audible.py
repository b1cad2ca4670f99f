"""Speech edges under a bed of noise, judged against what a listener hears
(``voxproxy.core.analysis.audible``; MEASUREMENT.md 2)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from support.noise import noise_bed
from support.underbed import heard_under_bed

from voxproxy.clips import load_clips
from voxproxy.core.analysis.audible import (
    AUDIBLE_SEEN_DB,
    HIGHPASS_HZ,
    TAIL_HIDDEN_MS,
    NoiseStats,
    audible_edge_band,
    hidden_ms,
    highpass,
    noise_stats,
    tail_hidden_ms,
    window_power,
)
from voxproxy.core.analysis.truth import audible_speech_edges
from voxproxy.core.analysis.vad import Spurt
from voxproxy.core.session.evidence import EDGE_BASE_MS

RATE = 16000
MS = 1_000_000
LEAD_MS = 2000
CALLERS = sorted(n for n, c in load_clips().items() if c.role == "caller" and c.kind == "speech")


def test_the_high_pass_keeps_speech_and_drops_rumble() -> None:
    t = np.arange(RATE) / RATE
    for hz, lo, hi in ((20.0, -40.0, -25.0), (50.0, -20.0, -10.0), (1000.0, -0.5, 0.5)):
        x = np.sin(2 * np.pi * hz * t)
        y = highpass(x, RATE)[RATE // 10 : -RATE // 10]
        gain = 10 * np.log10(np.mean(y**2) / np.mean(x[RATE // 10 : -RATE // 10] ** 2))
        assert lo < gain < hi, (hz, gain)
    assert HIGHPASS_HZ == 150.0


def _ramp_call(noise: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[list[float]]]:
    """A 1 kHz tone rising 1 dB a ms from -80.5 to -20.5 dBFS from 1000 ms, held, and
    falling likewise from 2060 ms, over ``noise``: the mixture's window powers (whole band,
    high-passed) and the heard truth (threshold -55 dBFS)."""
    n_ms = 3000
    db = np.full(n_ms, -200.0)
    rise = -80.5 + np.arange(60.0)
    db[1000:1060], db[1060:2060], db[2060:2120] = rise, rise[-1], rise[::-1]
    t = np.arange(n_ms * 16) / RATE
    speech = np.sqrt(2) * 32768 * np.repeat(10 ** (db / 20), 16) * np.sin(2 * np.pi * 1000 * t)
    clean = np.round(speech).astype(np.int16)
    truth = audible_speech_edges(clean, noise, RATE, threshold_dbfs=-55.0)
    x = speech + noise
    return window_power(x, 16), window_power(highpass(x, RATE), 16), truth


@pytest.mark.parametrize("kind", ["white", "pink", "brown"])
@pytest.mark.parametrize("noise_dbfs", [-30.0, -40.0, -50.0])
def test_an_edge_is_found_where_it_rises_out_of_any_steady_bed(
    kind: str, noise_dbfs: float
) -> None:
    # Property over the bed's colour and level: a tone rising and falling 1 dB a ms through
    # the bed and the truth's threshold of -55 dBFS. The edges walked from the held tone,
    # against the noise read from the 800 ms before it, lie within 10 ms of the heard
    # truth (brown noise's dips let the truth start a few ms before the mixture shows it),
    # with a band (how far they move with the speech estimate 3 dB off) as narrow.
    noise = noise_bed(kind, 3000 * 16, RATE, seed=3) * 32768 * 10 ** (noise_dbfs / 20)
    power, power_hp, truth = _ramp_call(noise)
    assert len(truth) == 1
    stats = noise_stats(power[100:900], power_hp[100:900])
    assert stats is not None
    threshold = 10 ** (-55.5 / 10)
    onset, band_on = audible_edge_band(power, power_hp, 1300, stats, threshold, -1)
    offset, band_off = audible_edge_band(power, power_hp, 1900, stats, threshold, +1)
    assert abs(onset - truth[0][0]) <= 10 and abs(offset - truth[0][1]) <= 10, (
        onset,
        offset,
        truth,
    )
    # (Plus what the bed's dips may hide of real speech: none for white noise, up to 90 ms
    # for brown; test_how_far_a_bed_dips_is_how_much_of_an_edge_it_may_hide. And past an
    # offset, a release the truth may count over the bed's dips once the talker stands
    # high enough over it: test_no_offset_over_a_bed_..._is_published_outside_its_band.)
    hidden = hidden_ms(stats)
    tail = max(hidden, tail_hidden_ms(stats, threshold))
    assert band_on <= 10 + hidden and band_off <= 10 + tail, (band_on, band_off, hidden, tail)


def test_too_little_noise_to_read_gives_no_estimate() -> None:
    assert noise_stats(np.ones(30), np.ones(30)) is None


@functools.cache
def _spurts(name: str, kind: str, snr_db: float, rate: int) -> tuple[tuple[Spurt, ...], tuple]:
    """The detector's voiced spurts of a caller clip (2 s of the bed alone before it) at
    ``snr_db`` under a ``kind`` bed from the stream's first sample, and the heard truth."""
    heard = heard_under_bed(load_clips()[name], kind, snr_db, rate, LEAD_MS)
    return tuple(heard.spurts), tuple(tuple(e) for e in heard.truth)


def _published_last_offsets(
    kind: str, snr_db: float, rate: int
) -> tuple[int, list[tuple[str, int, float]]]:
    """How many callers' last offsets under ``kind`` at ``snr_db`` state a band narrow
    enough to publish (10 ms plus it within the 50 ms bound: what noise may hide of the
    edge and how far it moves with the level read off, as the session adds them), and
    those of them that lie outside it: (name, error ms, band)."""
    published, wrong = 0, []
    for name in CALLERS:
        spurts, truth = _spurts(name, kind, snr_db, rate)
        assert spurts and truth, name
        last = spurts[-1]
        err = last.offset_ns / MS - LEAD_MS - truth[-1][1]
        band = last.masked_offset_ms + last.ambiguous_offset_ms
        if 10.0 + band <= 50.0:
            published += 1
            if abs(err) > EDGE_BASE_MS + band:
                wrong.append((name, round(err), band))
    return published, wrong


def _published_first_onsets_outside(
    kind: str, snr_db: float, rate: int
) -> list[tuple[str, int, float]]:
    """The callers whose first onset under ``kind`` at ``snr_db`` states a band narrow
    enough to publish (as :func:`_published_last_offsets`) and lies outside it."""
    wrong = []
    for name in CALLERS:
        spurts, truth = _spurts(name, kind, snr_db, rate)
        first = spurts[0]
        err = first.onset_ns / MS - LEAD_MS - truth[0][0]
        band = first.masked_onset_ms + first.ambiguous_onset_ms
        if 10.0 + band <= 50.0 and abs(err) > 10.0 + band:
            wrong.append((name, round(err), band))
    return wrong


def _published_last_offsets_outside(
    kind: str, snr_db: float, rate: int
) -> list[tuple[str, int, float]]:
    """The callers whose last offset is published and lies outside its band."""
    return _published_last_offsets(kind, snr_db, rate)[1]


@pytest.mark.slow
@pytest.mark.parametrize("rate", [16000, 8000])
@pytest.mark.parametrize(("kind", "snr_db"), [("white", 10.0), ("pink", 10.0), ("white", 20.0)])
def test_every_caller_is_heard_within_its_stated_band(kind: str, snr_db: float, rate: int) -> None:
    # Scripted: each of the project's caller clips under a steady bed from the stream's
    # first sample, its true edges the ones a listener hears over it. The first onset and
    # the last offset lie within an edge's base (EDGE_BASE_MS) plus the band the detector
    # states for them (both in a figure's uncertainty), and half of them within 8 ms. Before,
    # the edges walked to the bed's floor + 6 dB (and a spectral presence under it): on
    # white noise at 10 dB SNR the last offsets came 40-120 ms early (p95 99 ms) and every
    # edge stated 150-213 ms.
    errors: list[float] = []
    bands: list[float] = []
    onset_bands: list[float] = []
    offset_bands: list[float] = []
    outside = []
    for name in CALLERS:
        spurts, truth = _spurts(name, kind, snr_db, rate)
        assert spurts and truth, name
        on = spurts[0].onset_ns / MS - LEAD_MS - truth[0][0]
        off = spurts[-1].offset_ns / MS - LEAD_MS - truth[-1][1]
        onset_bands.append(spurts[0].masked_onset_ms)
        offset_bands.append(spurts[-1].masked_offset_ms)
        for err, band in ((on, spurts[0].masked_onset_ms), (off, spurts[-1].masked_offset_ms)):
            errors.append(abs(err))
            bands.append(band)
            if abs(err) > EDGE_BASE_MS + band:
                outside.append((name, round(err), band))
    print(
        f"{kind} {snr_db:g} dB {rate} Hz: |error| p50 {np.median(errors):.1f} ms, p95 "
        f"{np.percentile(errors, 95):.1f}; outside base + band: {outside}"
    )
    assert len(outside) <= 1, outside
    assert float(np.median(errors)) <= 8.0
    # Narrow enough to publish for a third at least (the masking table that stood for
    # every edge under noise before: 150-213 ms, nothing published); on an 8 kHz wire 10 dB
    # over the bed, of the first onsets: every last offset there states what a word-final
    # burst under the bed may add (test_no_8_khz_offset_10_db_over_a_bed_...).
    if rate == 8000 and snr_db == 10.0:
        assert all(b >= TAIL_HIDDEN_MS for b in offset_bands), offset_bands
        bands = onset_bands
    assert sum(1 for b in bands if b <= 40.0) >= len(bands) / 3, bands


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["white", "pink"])
def test_at_0_db_snr_no_edge_is_stated_better_than_a_listener_could_place_it(kind: str) -> None:
    # SNR near 0 dB: no listener follows the words' edges. What the detector finds there
    # carries the masking table's band (withheld past the default bound), never a few ms.
    found = 0
    for name in CALLERS:
        spurts, _truth = _spurts(name, kind, 0.0, RATE)
        for s in spurts:
            found += 1
            assert s.masked_onset_ms >= 100.0 and s.masked_offset_ms >= 100.0, (name, s)
    assert AUDIBLE_SEEN_DB > 0 and found >= 0


def test_how_far_a_bed_dips_is_how_much_of_an_edge_it_may_hide() -> None:
    # The heard truth counts a 1 ms window of speech wherever the noise dips under it.
    # White noise's windows dip 3-4.5 dB under its mean one time in twenty: what it hides,
    # the walk sees. Brown noise's dip 13-15 dB: the truth counts a tail far under the bed
    # that no reading of the mixture shows, so every edge over it states up to 90 ms.
    for rate in (16000, 8000):
        stats = {}
        for kind in ("white", "pink", "street", "brown"):
            x = noise_bed(kind, 2 * rate, rate, seed=5) * 3000.0
            win = rate // 1000
            s = noise_stats(window_power(x, win), window_power(highpass(x, rate), win))
            assert s is not None
            stats[kind] = hidden_ms(s)
        assert stats["white"] <= 10 and stats["pink"] <= 35, stats
        assert stats["white"] <= stats["pink"] <= stats["street"] <= stats["brown"], stats
        assert stats["brown"] >= 80, stats
        # The truth counts no speech under its level threshold: a bed whose mean stands at
        # that threshold (a rumble 35 dB under the talker) hides nothing past the edge, one
        # 20 dB over it all its dips do.
        for kind in ("pink", "street", "brown"):
            x = noise_bed(kind, 2 * rate, rate, seed=5) * 3000.0
            win = rate // 1000
            s = noise_stats(window_power(x, win), window_power(highpass(x, rate), win))
            assert s is not None
            assert hidden_ms(s, threshold=s.mean) == 0, kind
            assert hidden_ms(s, threshold=s.mean / 100.0) == stats[kind], kind


@pytest.mark.slow
@pytest.mark.parametrize("rate", [16000, 8000])
def test_no_edge_over_brown_noise_is_published_outside_its_band(rate: int) -> None:
    # Brown noise at 10 dB SNR. Before the bands said how far the bed dips, the last offsets
    # of caller_es_pedido and caller_thanks lay 58-96 ms before the heard truth (it counted
    # a breath 12-22 dB under the bed's mean where the bed dipped) while stating 0-1 ms:
    # published (10 ms + band under the 50 ms bound), and wrong. Now every edge over the
    # bed states what its dips may hide: none is narrow enough to publish and wrong.
    wrong = _published_last_offsets_outside("brown", 10.0, rate)
    assert not wrong, wrong


@pytest.mark.slow
@pytest.mark.parametrize("rate", [16000, 8000])
@pytest.mark.parametrize("kind", ["white", "pink", "street"])
@pytest.mark.parametrize("snr_db", [15.0, 20.0, 25.0])
def test_no_offset_over_a_bed_15_to_25_db_down_is_published_outside_its_band(
    kind: str, snr_db: float, rate: int
) -> None:
    # The project's callers end on a voiced release: 100-130 ms of pulses 15-24 dB under
    # their level. Over a bed 15-25 dB down, the truth counts those pulses wherever the
    # bed dips under them, and the detector, which sees the mixture only, ends the
    # utterance at the last syllable: before tail_hidden_ms, the last offsets of
    # caller_hello, caller_order_number and others lay 40-110 ms before the heard truth
    # while stating 1-40 ms (the noise sweep: 72-93% of pink's published figures inside
    # their band at 15-25 dB, 73-86% of the street bed's, 91-92% of white's at 20 dB).
    # No last offset narrow enough to publish may lie outside its band.
    wrong = _published_last_offsets_outside(kind, snr_db, rate)
    assert not wrong, wrong


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["white", "pink"])
def test_no_8_khz_offset_10_db_over_a_bed_is_published_outside_its_band(kind: str) -> None:
    # On an 8 kHz wire a 1 ms window holds 8 samples and the bed's windows dip 7-10 dB
    # under its mean one time in 100 to 1,000: the final /t/ of caller_no_dont, under the
    # bed, beats it in some window in some realisations and the truth's join carries the
    # offset out to it. Before NARROW_TAIL_RISK_DB, 2 of 8 realisations of each bed put
    # that last offset 40-100 ms before the truth stating 7-32 ms, published. (Twilio
    # callers in the noise sweep at 10 dB: 19 of 137 published ttfs figures outside.)
    clip = load_clips()["caller_no_dont"]
    wrong = []
    for seed in range(8):
        heard = heard_under_bed(clip, kind, 10.0, 8000, LEAD_MS, seed=seed)
        last = heard.spurts[-1]
        err = last.offset_ns / MS - LEAD_MS - heard.truth[-1][1]
        band = last.masked_offset_ms + last.ambiguous_offset_ms
        if 10.0 + band <= 50.0 and abs(err) > EDGE_BASE_MS + band:
            wrong.append((seed, round(err), band))
    assert not wrong, wrong
    # ... and the rule is the wire's: the same realisations on a 16 kHz wire keep the
    # narrow band where the mixture shows the burst.
    assert any(
        heard_under_bed(clip, kind, 10.0, 16000, LEAD_MS, seed=seed).spurts[-1].masked_offset_ms
        < TAIL_HIDDEN_MS
        for seed in range(8)
    )


def test_a_release_is_stated_once_the_talker_stands_high_enough_over_the_bed() -> None:
    # The rule on its own: a talker 10 dB over white noise (dips 3 dB) states nothing for
    # a hidden release, 20 dB over it does; a bed that dips 7 dB brings the rule down to
    # 11 dB; none under it.
    bed = 10 ** (-41.0 / 10)

    def stats(dip: float) -> NoiseStats:
        return NoiseStats(mean_hp=bed, top_hp=2 * bed, low=bed / 2, mean=bed, dip=dip)

    def threshold(talker_dbfs: float) -> float:
        return float(10 ** ((talker_dbfs - 35.5) / 10))

    assert tail_hidden_ms(stats(3.0), threshold(-31.0)) == 0
    assert tail_hidden_ms(stats(3.0), threshold(-21.0)) == TAIL_HIDDEN_MS
    assert tail_hidden_ms(stats(7.0), threshold(-30.0)) == TAIL_HIDDEN_MS
    assert tail_hidden_ms(stats(7.0), threshold(-31.0)) == 0
    # On an 8 kHz wire (8 samples a window) from a talker 8 dB over the bed up.
    assert tail_hidden_ms(stats(3.0), threshold(-31.0), 8) == TAIL_HIDDEN_MS
    assert tail_hidden_ms(stats(3.0), threshold(-33.0), 8) == TAIL_HIDDEN_MS
    assert tail_hidden_ms(stats(3.0), threshold(-41.0), 8) == 0


@pytest.mark.slow
@pytest.mark.parametrize("rate", [16000, 8000])
@pytest.mark.parametrize(("kind", "snr_db"), [("brown", 35.0), ("brown", 40.0), ("street", 35.0)])
def test_a_rumble_whose_quiet_frames_read_as_quiet_does_not_carry_an_offset_on(
    kind: str, snr_db: float, rate: int
) -> None:
    # A rumble 35-40 dB under the talker: its quietest frames lie under the floor's clamp,
    # so the floor read quiet and the offset walked down to the truth's threshold, which
    # the rumble's swells reach (brown noise 35 dB down: a third of its 1 ms windows):
    # before, last offsets came 200-300 ms late while stating 0-10 ms (the noise sweep:
    # 0-8% of brown's published figures at 35-40 dB inside their band). Now such a bed
    # is read between the spurts, and an offset walked in quiet down to a threshold it
    # reaches is read again over the bed: none narrow enough to publish lies outside.
    wrong = _published_last_offsets_outside(kind, snr_db, rate)
    assert not wrong, wrong


@pytest.mark.slow
@pytest.mark.parametrize("rate", [16000, 8000])
@pytest.mark.parametrize(("kind", "snr_db"), [("brown", 40.0), ("street", 35.0)])
def test_an_offset_over_a_rumble_that_reads_as_quiet_is_read_where_speech_falls_into_it(
    kind: str, snr_db: float, rate: int
) -> None:
    # The same rumble: an offset walked in quiet through its swells stated that it was not
    # found, and every last offset was withheld (0 of 10 published at each rate: a room or
    # a car 35-40 dB under the caller, the commonest real condition, measured nothing).
    # Now such an offset is read again where the speech falls into the bed (the audible
    # walk), with the band that walk states: most are published, and inside it.
    published, wrong = _published_last_offsets(kind, snr_db, rate)
    assert not wrong, wrong
    assert published >= 4, published


@pytest.mark.slow
@pytest.mark.parametrize("rate", [16000, 8000])
@pytest.mark.parametrize(("kind", "snr_db"), [("brown", 35.0), ("street", 35.0), ("street", 40.0)])
def test_an_onset_over_a_rumble_that_reads_as_quiet_is_not_walked_back_through_it(
    kind: str, snr_db: float, rate: int
) -> None:
    # The same rumble before an onset: the walk in quiet went back through its swells, up
    # to its whole look-back, and stated 0-26 ms. Before, the first onsets came 400-640 ms
    # early: at brown 35 dB 6 of 10 published at 16 kHz and 8 of 10 at 8 kHz, every one
    # outside its band; street 35-40 dB 2-5 of 6 (a barge-in's onset is a stop figure's
    # edge). Now such an onset is read where the speech rises out of the bed.
    wrong = _published_first_onsets_outside(kind, snr_db, rate)
    assert not wrong, wrong


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "snr_db", "rate"),
    [("pink", 45.0, 8000), ("brown", 45.0, 8000), ("street", 40.0, 16000)],
)
def test_a_faint_bed_s_swells_are_in_a_quiet_offset_s_band(
    kind: str, snr_db: float, rate: int
) -> None:
    # A bed 40-50 dB under the talker reads as quiet, and the offset is walked down to the
    # truth's threshold. A 1 ms window of the bed swells far over its mean (8 kHz pink noise
    # 45 dB down: 12 dB, where the band allowed BED_SWELL_DB, 6) and lifts a release under
    # the threshold over it: before, caller_where_is_order and caller_topic_change ended
    # 33-58 ms late, outside the band they stated (street 40 dB at 16 kHz:
    # caller_where_is_order 262 ms late). Now the band takes the swell from the bed read
    # before the onset (EdgeWalker.read_bed_before, now read before the band).
    wrong = _published_last_offsets_outside(kind, snr_db, rate)
    assert not wrong, wrong


@pytest.mark.slow
def test_the_offset_of_an_utterance_longer_than_the_timeline_states_its_band() -> None:
    # caller_iban speaks for 10 s: by its close its onset has left the timeline the edge
    # walks keep, and the band used to be skipped for both edges. Over brown noise 45 dB
    # down its offset walked on 141 ms through the bed's swells stating 0 ms. The offset's
    # band does not need the onset's audio: it is read now.
    spurts, truth = _spurts("caller_iban", "brown", 45.0, RATE)
    last = spurts[-1]
    err = last.offset_ns / MS - LEAD_MS - truth[-1][1]
    band = last.masked_offset_ms + last.ambiguous_offset_ms
    assert abs(err) <= 10.0 + band, (err, band)


def test_the_bed_pool_keeps_the_last_windows_whatever_the_chunks() -> None:
    # The ring of a bed's 1 ms windows (for its dips between spurts) holds the last
    # BED_POOL_WINDOWS written, in chunks of any size, including ones longer than it.
    from voxproxy.core.analysis.audible import BED_POOL_WINDOWS
    from voxproxy.core.analysis.vad import SpeechDetector

    det = SpeechDetector(8000)
    rng = np.random.default_rng(3)
    written: list[float] = []
    for size in [*rng.integers(1, 300, 200), BED_POOL_WINDOWS + 17, 5]:
        chunk = rng.random(int(size))
        det._pool_windows(chunk)
        written.extend(chunk.tolist())
    n = det._bed_pool_n  # (of a chunk longer than the ring, its last windows count)
    ring = np.roll(det._bed_pool, -(n % BED_POOL_WINDOWS))
    assert np.array_equal(ring, np.array(written[-BED_POOL_WINDOWS:]))
