"""Ground-truth speech edges on synthetic signals with known edges."""

from __future__ import annotations

import numpy as np
import pytest
from support.noise import BED_KINDS, noise_bed

from voxproxy.clips import load_clips
from voxproxy.core.analysis.truth import (
    TRUTH_RANGE_DB,
    audible_speech_edges,
    audible_windows,
    heard_runs,
    speech_edges,
    truth_threshold_dbfs,
)

RATE = 16000
SPM = RATE // 1000


def bursts(total_ms: float, spans_ms: list[tuple[float, float]], dbfs: float = -20.0) -> np.ndarray:
    """Silence with 440 Hz tone bursts over ``spans_ms`` (edges may fall between ms)."""
    n = round(total_ms * SPM)
    x = np.zeros(n, dtype=np.float64)
    amp = 32768 * 10 ** (dbfs / 20) * np.sqrt(2)  # a sine's power is half its peak's
    t = np.arange(n) / RATE
    tone = amp * np.sin(2 * np.pi * 440 * t)
    for a, b in spans_ms:
        i, j = round(a * SPM), round(b * SPM)
        x[i:j] = tone[i:j]
    return np.clip(np.round(x), -32768, 32767).astype(np.int16)


@pytest.mark.parametrize(
    "spans",
    [
        [(200.0, 700.0)],
        [(0.0, 150.0)],
        [(100.0, 400.0), (900.0, 1300.0)],
        [(123.0, 456.0), (1000.0, 1999.0)],
        [(50.0, 2950.0)],
    ],
)
@pytest.mark.slow
def test_edges_on_ms_boundaries_are_exact(spans: list[tuple[float, float]]) -> None:
    edges = speech_edges(bursts(3000, spans), RATE)
    assert edges == [[a, b] for a, b in spans]


@pytest.mark.parametrize(
    ("span", "expected"),
    [
        ((200.25, 700.5), [200.0, 701.0]),  # partial windows above the threshold count
        ((200.5, 700.75), [200.0, 701.0]),
    ],
)
def test_edges_off_ms_boundaries_are_within_one_ms(
    span: tuple[float, float], expected: list[float]
) -> None:
    (edge,) = speech_edges(bursts(1000, [span], dbfs=-6.0), RATE)
    assert edge == expected
    assert abs(edge[0] - span[0]) <= 1 and abs(edge[1] - span[1]) <= 1


@pytest.mark.parametrize(
    ("gap_ms", "merged"), [(50, True), (250, True), (299, True), (300, False), (600, False)]
)
def test_gaps_shorter_than_300_ms_are_merged(gap_ms: int, merged: bool) -> None:
    a = (100.0, 500.0)
    b = (500.0 + gap_ms, 900.0 + gap_ms)
    edges = speech_edges(bursts(2000, [a, b]), RATE)
    if merged:
        assert edges == [[a[0], b[1]]]
    else:
        assert edges == [list(a), list(b)]


@pytest.mark.parametrize(("length_ms", "kept"), [(10, False), (59, False), (60, True), (61, True)])
def test_runs_shorter_than_60_ms_are_dropped(length_ms: int, kept: bool) -> None:
    span = (500.0, 500.0 + length_ms)
    edges = speech_edges(bursts(1500, [span]), RATE)
    assert edges == ([list(span)] if kept else [])


def test_one_loud_sample_marks_its_window() -> None:
    x = np.zeros(RATE, np.int16)
    x[200 * SPM + 15 : 700 * SPM + 1] = 20000  # the last sample of window 200 to the first of 700
    assert speech_edges(x, RATE) == [[200.0, 701.0]]


def test_a_short_run_close_to_a_long_one_is_merged_not_dropped() -> None:
    # Merging comes first: a 30 ms click 100 ms after speech extends it.
    edges = speech_edges(bursts(2000, [(100.0, 600.0), (700.0, 730.0), (1500.0, 1520.0)]), RATE)
    assert edges == [[100.0, 730.0]]


def test_the_threshold_is_relative_to_the_speech_level() -> None:
    # A -20 dBFS burst sets the level; a burst 40 dB below it is not speech, 30 dB below is.
    x = bursts(1000, [(100.0, 300.0)], dbfs=-20.0) + bursts(1000, [(700.0, 900.0)], dbfs=-60.0)
    assert speech_edges(x, RATE) == [[100.0, 300.0]]
    y = bursts(1000, [(100.0, 300.0)], dbfs=-20.0) + bursts(1000, [(700.0, 900.0)], dbfs=-50.0)
    assert speech_edges(y, RATE) == [[100.0, 300.0], [700.0, 900.0]]
    level = truth_threshold_dbfs(x, RATE)
    # P.56's 200 ms hangover counts up to 200 ms of silence after a short burst as active.
    assert level is not None and -20.0 - TRUTH_RANGE_DB - 4.5 < level < -20.0 - TRUTH_RANGE_DB
    assert speech_edges(x, RATE, threshold_dbfs=-70.0) == [[100.0, 300.0], [700.0, 900.0]]
    assert speech_edges(x, RATE, threshold_dbfs=-10.0) == []


@pytest.mark.parametrize("gain_db", [-20.0, -10.0, 0.0, 10.0])
def test_a_quiet_talker_keeps_the_edges_of_a_loud_one(gain_db: float) -> None:
    # A decaying tail: the edge sits where the tail falls 35 dB below the level.
    n = 1200 * SPM
    t = np.arange(n) / RATE
    env = np.where(t < 0.2, 0.0, np.where(t < 0.6, 1.0, np.exp(-(t - 0.6) * 30)))
    base = 0.1 * np.sin(2 * np.pi * 300 * t) * env * 10 ** (gain_db / 20)
    x = np.round(base * 32767).astype(np.int16)
    ref = 0.1 * np.sin(2 * np.pi * 300 * t) * env
    edges = speech_edges(x, RATE)
    assert edges == speech_edges(np.round(ref * 32767).astype(np.int16), RATE)
    assert edges[0][0] == 200.0 and 600.0 < edges[0][1] < 1000.0


def test_silence_and_custom_rules() -> None:
    assert speech_edges(np.zeros(RATE, np.int16), RATE) == []
    x = bursts(2000, [(100.0, 200.0), (300.0, 340.0)])
    assert speech_edges(x, RATE, merge_gap_ms=50, min_speech_ms=30) == [
        [100.0, 200.0],
        [300.0, 340.0],
    ]
    assert speech_edges(x, RATE, merge_gap_ms=50, min_speech_ms=50) == [[100.0, 200.0]]


def test_8k_edges() -> None:
    n = 8000
    x = np.zeros(n, np.int16)
    x[8 * 250 : 8 * 600] = 8000
    assert speech_edges(x, 8000) == [[250.0, 600.0]]


def test_heard_runs_merge_across_short_pauses_and_drop_a_last_click() -> None:
    ms = 1_000_000
    # Closer than the merge gap: one run.
    assert heard_runs([(0, 500 * ms), (700 * ms, 900 * ms)]) == [(0, 900 * ms)]
    # A merge gap apart: two.
    assert heard_runs([(0, 500 * ms), (800 * ms, 900 * ms)]) == [
        (0, 500 * ms),
        (800 * ms, 900 * ms),
    ]
    # A last run shorter than MIN_SPEECH_MS after a merge gap: a click, dropped.
    assert heard_runs([(0, 500 * ms), (800 * ms, 859 * ms)]) == [(0, 500 * ms)]
    assert heard_runs([(0, 500 * ms), (800 * ms, 860 * ms)]) == [
        (0, 500 * ms),
        (800 * ms, 860 * ms),
    ]
    # A lone run is kept however short; no runs, none.
    assert heard_runs([(0, 5 * ms)]) == [(0, 5 * ms)]
    assert heard_runs([]) == []


# -- under a noise bed: what a listener can hear (MEASUREMENT.md 2) --------------------------


def tone(ms: float, hz: float, dbfs: float) -> np.ndarray:
    """A sine of ``hz`` (a whole number of periods a 1 ms window: exact window powers)."""
    t = np.arange(round(ms * SPM)) / RATE
    return 32768 * 10 ** (dbfs / 20) * np.sqrt(2) * np.sin(2 * np.pi * hz * t)


def ramped(total_ms: int, start_ms: int, rise_ms: int, top_ms: int, fall_ms: int) -> np.ndarray:
    """A 1 kHz tone rising 1 dB a ms from -80.5 dBFS (``rise_ms`` = 60) to -20 and falling
    back, over silence: a window's level is known, half a dB from any whole number."""
    db = np.full(total_ms, -200.0)
    rise = -80.5 + np.arange(rise_ms) * 60.0 / rise_ms
    db[start_ms : start_ms + rise_ms] = rise
    db[start_ms + rise_ms : start_ms + rise_ms + top_ms] = -20.0
    end = start_ms + rise_ms + top_ms
    db[end : end + fall_ms] = rise[::-1]
    amp = np.repeat(10 ** (db / 20), SPM)
    out: np.ndarray = tone(total_ms, 1000, 0.0) * amp
    return out


def test_a_steady_bed_moves_each_edge_to_where_the_speech_rises_out_of_it() -> None:
    # Speech rising 1 dB a ms from -80.5 dBFS at 200 ms to -20.5, and falling likewise from
    # 1260 ms. In quiet, with the threshold at -55 dBFS, its edges are the windows at -54.5:
    # 226 ms and the end of 1293 ms. A 2 kHz bed at -40 dBFS hides what lies under it: the
    # edges move to the windows at -39.5 dBFS (241 ms, the end of 1278), as heard.
    speech = np.round(ramped(1600, 200, 60, 1000, 60)).astype(np.int16)
    quiet = audible_speech_edges(speech, None, RATE, threshold_dbfs=-55.0)
    assert quiet == speech_edges(speech, RATE, threshold_dbfs=-55.0) == [[226.0, 1294.0]]
    bed = tone(1600, 2000, -40.0)
    assert audible_speech_edges(speech, bed, RATE, threshold_dbfs=-55.0) == [[241.0, 1279.0]]
    # A bed under the truth's threshold hides nothing: the quiet rule.
    faint = tone(1600, 2000, -70.0)
    assert audible_speech_edges(speech, faint, RATE, threshold_dbfs=-55.0) == quiet


def test_the_bed_is_compared_window_by_window() -> None:
    # A bed that is loud only where the speech's tail lies hides the tail alone.
    speech = np.round(ramped(1600, 200, 60, 1000, 60)).astype(np.int16)
    bed = np.zeros(speech.size)
    bed[1200 * SPM :] = tone(400, 2000, -30.0)
    (edges,) = audible_speech_edges(speech, bed, RATE, threshold_dbfs=-55.0)
    assert edges == [226.0, 1269.0]  # the fall's window at -29.5 dBFS ends at 1269 ms
    with pytest.raises(ValueError):
        audible_windows(speech, bed[:100], RATE, -55.0)  # a bed shorter than the speech


@pytest.mark.parametrize("kind", BED_KINDS)
def test_audible_edges_lie_inside_the_quiet_ones_and_widen_with_the_snr(kind: str) -> None:
    # Property over the noise's colour and its level: the same bed scaled from 0 to 60 dB
    # SNR under a real clip. A window heard over a louder bed is heard over a quieter one
    # too, so the edges only move outwards as the SNR rises, never past the clip's own
    # (the quiet rule), which they reach once the bed is far below the talker.
    c = load_clips()["caller_thanks"]
    threshold = truth_threshold_dbfs(c.pcm, c.sample_rate_hz)
    assert threshold is not None
    quiet = speech_edges(c.pcm, c.sample_rate_hz)
    unit = noise_bed(kind, c.pcm.size, c.sample_rate_hz, seed=5)
    level = 32768 * 10 ** ((threshold + 35.0) / 20)
    last: list[float] | None = None
    for snr in (0.0, 5.0, 10.0, 20.0, 30.0, 60.0):
        edges = audible_speech_edges(c.pcm, unit * level * 10 ** (-snr / 20), RATE)
        assert edges, (kind, snr)
        span = [edges[0][0], edges[-1][1]]
        assert quiet[0][0] <= span[0] and span[1] <= quiet[-1][1], (kind, snr, span)
        if last is not None:
            assert span[0] <= last[0] and span[1] >= last[1], (kind, snr, span, last)
        last = span
    assert last == [quiet[0][0], quiet[-1][1]]
