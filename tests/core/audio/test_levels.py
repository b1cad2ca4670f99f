"""dBFS levels of whole signals and of 1 ms windows."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from voxproxy.clips import load_corpus
from voxproxy.core.audio.levels import (
    FLOOR_DB,
    PHASE_SHARE,
    FrameLevels,
    active_speech_level,
    frame_active_level,
    phase_extreme_db,
    rms_dbfs,
    running_max,
    window_energy_db,
)


def square(n: int, amplitude: int = 32767, period: int = 16) -> np.ndarray:
    half = period // 2
    x = np.where((np.arange(n) // half) % 2 == 0, amplitude, -amplitude)
    return x.astype(np.int16)


def test_full_scale_square_wave_is_zero_dbfs() -> None:
    assert rms_dbfs(square(16000)) == pytest.approx(0.0, abs=0.01)
    db = window_energy_db(square(16000), 16)
    assert db.shape == (1000,)
    assert np.allclose(db, 0.0, atol=0.01)


def test_negative_full_scale_is_exactly_zero() -> None:
    x = np.full(160, -32768, dtype=np.int16)
    assert rms_dbfs(x) == pytest.approx(0.0, abs=1e-9)


def test_zeros_are_the_floor() -> None:
    zeros = np.zeros(1600, dtype=np.int16)
    assert rms_dbfs(zeros) == FLOOR_DB == -100.0
    assert np.allclose(window_energy_db(zeros, 16), -100.0, atol=1e-3)


def test_empty_signal() -> None:
    empty = np.zeros(0, dtype=np.int16)
    assert rms_dbfs(empty) == -100.0
    assert window_energy_db(empty, 16).size == 0


@pytest.mark.parametrize("amplitude_db", [-6.0, -20.0, -40.0])
def test_sine_level(amplitude_db: float) -> None:
    rate = 16000
    t = np.arange(rate) / rate
    amp = 32768 * 10 ** (amplitude_db / 20)
    x = np.round(amp * np.sin(2 * np.pi * 1000 * t)).astype(np.int16)
    # A sine's mean power is half its peak power: -3.01 dB.
    assert rms_dbfs(x) == pytest.approx(amplitude_db - 3.01, abs=0.05)
    assert np.allclose(window_energy_db(x, 16), amplitude_db - 3.01, atol=0.05)


def test_windows_only_count_complete_windows_in_order() -> None:
    x = np.concatenate([np.zeros(16, np.int16), square(16), np.zeros(10, np.int16)])
    db = window_energy_db(x, 16)
    assert db.tolist() == pytest.approx([-100.0, 0.0], abs=0.01)
    assert window_energy_db(x[:15], 16).size == 0


def test_half_power_window_is_minus_three_db() -> None:
    x = np.concatenate([square(8), np.zeros(8, np.int16)])
    assert float(window_energy_db(x, 16)[0]) == pytest.approx(-3.01, abs=0.01)


def _sine(seconds: float, dbfs: float, rate: int = 16000) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return np.round(32768 * 10 ** (dbfs / 20) * np.sqrt(2) * np.sin(2 * np.pi * 440 * t)).astype(
        np.int16
    )


@pytest.mark.parametrize("dbfs", [-40.0, -20.0, -6.0])
@pytest.mark.parametrize("rate", [8000, 16000, 48000])
def test_active_speech_level_of_a_steady_tone_is_its_power(dbfs: float, rate: int) -> None:
    level = active_speech_level(_sine(2.0, dbfs, rate), rate)
    assert level is not None and abs(level - dbfs) < 0.3


def test_pauses_do_not_lower_the_active_speech_level() -> None:
    # Four 1 s tones separated by 2 s of silence: the long-term level is 4.8 dB lower,
    # the active level within a dB of the tone (the 200 ms hangover counts a little silence).
    x = _sine(1.0, -20.0)
    track = np.concatenate([np.concatenate([x, np.zeros(32000, np.int16)]) for _ in range(4)])
    level = active_speech_level(track, 16000)
    assert level is not None and -21.3 < level < -19.7
    assert rms_dbfs(track) < -24.0


def test_silence_has_no_active_speech_level() -> None:
    assert active_speech_level(np.zeros(16000, np.int16), 16000) is None
    assert active_speech_level(np.zeros(0, np.int16), 16000) is None


def _frame_db(pcm: np.ndarray, frame: int) -> np.ndarray:
    n = pcm.size // frame
    x = pcm[: n * frame].astype(np.float64).reshape(n, frame)
    return np.asarray(10.0 * np.log10(np.maximum((x**2).mean(axis=1) / 32768.0**2, 1e-10)))


def test_frame_active_level_reads_p56_from_frames_on_every_corpus_clip() -> None:
    """The detector's level of a talker: P.56's rule on 20 ms frame levels, against the
    sample-exact P.56 of each of the corpus's clips (-40 to -6 dBFS, speech and synthetic
    signals). The mean power of frames above -44 dBFS read up to 3.5 dB high here."""
    errors = []
    for clip in load_corpus().values():
        frame = clip.sample_rate_hz // 50
        level = frame_active_level(_frame_db(clip.pcm, frame), 20)
        truth = active_speech_level(clip.pcm, clip.sample_rate_hz)
        assert level is not None and truth is not None
        errors.append(level - truth)
    assert len(errors) >= 20
    assert max(abs(e) for e in errors) <= 0.5, errors
    assert abs(float(np.mean(errors))) <= 0.1


def test_frame_active_level_ignores_pauses_and_silence() -> None:
    """A talker's level is theirs whatever the pauses: the same bursts with ten times the
    silence between them read the same level; silence alone has none."""
    rng = np.random.default_rng(1)
    burst = (rng.standard_normal(16000) * 3000).astype(np.int16)
    gap = np.zeros(8000, dtype=np.int16)
    short = np.concatenate([burst, gap, burst])
    long = np.concatenate([burst, np.zeros(80000, dtype=np.int16), burst])
    a = frame_active_level(_frame_db(short, 320), 20)
    b = frame_active_level(_frame_db(long, 320), 20)
    assert a is not None and b is not None
    assert a == pytest.approx(b, abs=0.3)
    assert a == pytest.approx(20 * np.log10(3000 / 32768), abs=0.5)
    assert frame_active_level(np.zeros(0), 20) is None


def test_running_max_is_the_sliding_window_maximum() -> None:
    rng = np.random.default_rng(5)
    for width in range(1, 24):
        for n in (1, 2, 7, 64, 301):
            x = rng.normal(size=n)
            padded = np.concatenate((np.full(width - 1, -np.inf), x))
            expected = np.lib.stride_tricks.sliding_window_view(padded, width).max(axis=1)
            assert np.array_equal(running_max(x, width), expected)


def test_frame_levels_hold_what_a_bounded_deque_holds() -> None:
    rng = np.random.default_rng(9)
    levels, expected = FrameLevels(7), deque[float](maxlen=7)
    for step in range(100):
        if step in (40, 41, 77):
            levels.clear()
            expected.clear()
        value = float(rng.normal(-30.0, 10.0))
        levels.append(value)
        expected.append(value)
        assert len(levels) == len(expected)
        assert levels.array().tolist() == list(expected)
    assert FrameLevels(3).array().size == 0


def test_frame_levels_count_what_was_appended_and_give_the_last_ones() -> None:
    levels = FrameLevels(5)
    for i in range(12):
        levels.append(float(i))
    assert levels.total == 12  # since the last clear, beyond what is kept
    assert levels.last(3).tolist() == [9.0, 10.0, 11.0]
    assert levels.last(50).tolist() == levels.array().tolist() == [7.0, 8.0, 9.0, 10.0, 11.0]
    assert levels.last(0).size == 0
    levels.clear()
    assert levels.total == 0 and levels.last(3).size == 0


def test_a_window_read_over_the_grids_phase() -> None:
    # A burst shorter than a window, held whole by one window between silent ones: a grid
    # laid PHASE_SHARE of a window off splits it, so its least reading loses that share of
    # its power and each silent neighbour's most reading gains it; a steady level reads
    # the same at any phase.
    burst = np.array([-100.0, -100.0, -40.0, -100.0, -100.0], dtype=np.float32)
    least = phase_extreme_db(burst, most=False)
    most = phase_extreme_db(burst, most=True)
    split = -40.0 + 10.0 * np.log10(1.0 - PHASE_SHARE)
    assert least[1] == pytest.approx(split, abs=0.01)
    assert most[0] == most[2] == pytest.approx(-40.0 + 10.0 * np.log10(PHASE_SHARE), abs=0.01)
    assert most[1] == pytest.approx(-40.0, abs=0.01)
    steady = np.full(6, -30.0, dtype=np.float32)
    assert np.allclose(phase_extreme_db(steady, most=False), -30.0, atol=0.01)
    assert np.allclose(phase_extreme_db(steady, most=True), -30.0, atol=0.01)
