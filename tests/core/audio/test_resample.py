"""Rate conversion for the speech detector."""

from __future__ import annotations

import random

import numpy as np
import pytest

from voxproxy.core.audio.resample import VAD_RATES, Converter, vad_rate_for


def feed_in_chunks(conv: Converter, x: np.ndarray, seed: int, max_chunk: int = 2000) -> np.ndarray:
    """Feed ``x`` in random chunk sizes, including empty and one-sample chunks."""
    rng = random.Random(seed)
    out = []
    k = 0
    while k < x.size:
        n = rng.choice([0, 1, 2, 3, 7, rng.randrange(1, max_chunk)])
        out.append(conv.convert(x[k : k + n]))
        k += n
    return np.concatenate(out) if out else np.zeros(0, np.int16)


def noise(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(rng.standard_normal(n) * 4000, -32768, 32767).astype(np.int16)


@pytest.mark.parametrize(
    ("rate", "vad_rate"),
    [
        (8000, 8000),
        (16000, 16000),
        (32000, 32000),
        (48000, 48000),
        (24000, 8000),
        (40000, 8000),
        (96000, 8000),
        (22050, 16000),
        (44100, 16000),
        (11025, 16000),
        (12000, 16000),
    ],
)
def test_vad_rate_for(rate: int, vad_rate: int) -> None:
    assert vad_rate_for(rate) == vad_rate
    assert Converter(rate).out_rate_hz == vad_rate


@pytest.mark.parametrize("rate", VAD_RATES)
def test_detector_rates_pass_through_unchanged(rate: int) -> None:
    conv = Converter(rate)
    assert conv.passthrough
    x = noise(rate // 10)
    np.testing.assert_array_equal(conv.convert(x), x)
    np.testing.assert_array_equal(feed_in_chunks(Converter(rate), x, seed=1), x)


@pytest.mark.parametrize("rate", [0, -8000])
def test_non_positive_rate_is_refused(rate: int) -> None:
    with pytest.raises(ValueError):
        Converter(rate)


def test_24k_to_8k_takes_group_means() -> None:
    conv = Converter(24000)
    assert not conv.passthrough
    x = np.array([3, 6, 9, -30, -60, -90, 0, 1, 2, 32767, 32767, 32767], dtype=np.int16)
    assert conv.convert(x).tolist() == [6, -60, 1, 32767]


def test_24k_to_8k_length_and_values() -> None:
    x = noise(24000 + 2)  # one second and two stray samples
    out = Converter(24000).convert(x)
    assert out.size == 8000
    means = x[:24000].astype(np.float64).reshape(-1, 3).mean(axis=1)
    assert np.all(np.abs(out - means) < 1.0)


@pytest.mark.parametrize("rate", [24000, 40000, 96000])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_decimation_is_chunk_size_independent(rate: int, seed: int) -> None:
    x = noise(rate * 2, seed)
    whole = Converter(rate).convert(x)
    chunked = feed_in_chunks(Converter(rate), x, seed)
    np.testing.assert_array_equal(chunked, whole)
    assert whole.size == x.size // (rate // 8000)


def test_decimation_carries_a_partial_group() -> None:
    conv = Converter(24000)
    assert conv.convert(np.array([3, 6], np.int16)).size == 0
    assert conv.convert(np.array([9, 30], np.int16)).tolist() == [6]
    assert conv.convert(np.array([30, 30], np.int16)).tolist() == [30]


def expected_length(n_in: int, rate: int) -> float:
    return n_in * 16000 / rate


@pytest.mark.parametrize("rate", [22050, 11025, 44100, 88200])
def test_interpolation_length_over_a_long_stream(rate: int) -> None:
    x = noise(rate * 30)  # 30 s
    out = Converter(rate).convert(x)
    assert abs(out.size - expected_length(x.size, rate)) <= 1


@pytest.mark.parametrize("rate", [22050, 11025, 44100, 88200])
@pytest.mark.parametrize("chunk", [1000, 1024, 441, 883])
def test_interpolation_length_with_fixed_chunks(rate: int, chunk: int) -> None:
    x = noise(rate * 10)
    conv = Converter(rate)
    n = sum(conv.convert(x[k : k + chunk]).size for k in range(0, x.size, chunk))
    assert abs(n - expected_length(x.size, rate)) <= 1


@pytest.mark.parametrize("rate", [22050, 11025, 44100, 88200])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_interpolation_is_chunk_size_independent(rate: int, seed: int) -> None:
    x = noise(rate * 3, seed)
    whole = Converter(rate).convert(x)
    chunked = feed_in_chunks(Converter(rate), x, seed)
    assert chunked.size == whole.size
    # The phase accumulates in floating point, so a sample may truncate one LSB apart.
    assert int(np.max(np.abs(chunked.astype(np.int32) - whole))) <= 1


@pytest.mark.parametrize("rate", [22050, 44100])
def test_interpolation_of_a_ramp_is_exact(rate: int) -> None:
    # Linear interpolation reproduces a straight line: output k sits at input k*step.
    x = np.arange(20000, dtype=np.int16)
    step = rate / 16000
    for out in (Converter(rate).convert(x), feed_in_chunks(Converter(rate), x, seed=3)):
        expected = np.arange(out.size) * step
        assert out.size == pytest.approx(19999 / step, abs=1)
        assert np.all(np.abs(out - expected) < 1.0 + 1e-6)


def test_a_recording_is_brought_to_16_khz_without_aliasing() -> None:
    from voxproxy.core.audio.resample import resample_clip

    t = np.arange(44100) / 44100
    tone = np.rint(8000 * np.sin(2 * np.pi * 1000 * t)).astype(np.int16)
    high = np.rint(8000 * np.sin(2 * np.pi * 11000 * t)).astype(np.int16)  # above 8 kHz
    out = resample_clip(tone, 44100, 16000)
    assert out.size == 16000
    spectrum = np.abs(np.fft.rfft(out.astype(np.float64)))
    assert int(np.argmax(spectrum)) == 1000  # 1 Hz bins: the tone stays at 1 kHz
    kept = resample_clip(high, 44100, 16000).astype(np.float64)[100:-100]
    # An 11 kHz tone has no place at 16 kHz: filtered out, not folded to 5 kHz.
    assert np.sqrt(np.mean(kept**2)) < 0.01 * 8000 / np.sqrt(2)
