"""voicing: the band-limited autocorrelation peak, computed as two small matrix products,
is the FFT form's (Wiener-Khinchin, the spectrum masked to 60-1000 Hz) to rounding."""

from __future__ import annotations

import numpy as np
import pytest

from voxproxy.clips import load_clips
from voxproxy.core.analysis.voicing import VOICING_BAND_HZ, VOICING_THRESHOLD, voicing
from voxproxy.core.events import Pcm


def fft_voicing(window: Pcm, lag_lo: int, lag_hi: int, rate: int) -> float:
    """The definition, written out with numpy's FFT (the form voicing() had before)."""
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


def windows_of(length: int, rate: int, per_clip: int) -> list[Pcm]:
    rng = np.random.default_rng(17)
    out: list[Pcm] = []
    for clip in load_clips().values():
        pcm = clip.pcm if rate == clip.sample_rate_hz else clip.pcm[::2]
        for start in rng.integers(0, pcm.size - length, size=per_clip):
            out.append(pcm[start : start + length].copy())
    # A pure tone in the band, white noise, a click: pitched, not, not.
    t = np.arange(length) / rate
    out.append((8000 * np.sin(2 * np.pi * 180 * t)).astype(np.int16))
    out.append((rng.standard_normal(length) * 3000).astype(np.int16))
    click = np.zeros(length, dtype=np.int16)
    click[length // 2] = 20000
    out.append(click)
    return out


@pytest.mark.parametrize(("length", "rate"), [(240, 8000), (480, 16000), (160, 8000), (200, 8000)])
def test_matrix_form_is_the_fft_form(length: int, rate: int) -> None:
    lo, hi = rate // 400, rate // 80
    values = []
    for w in windows_of(length, rate, per_clip=40):
        got, want = voicing(w, lo, hi, rate), fft_voicing(w, lo, hi, rate)
        assert got == pytest.approx(want, abs=1e-12)
        assert (got > VOICING_THRESHOLD) == (want > VOICING_THRESHOLD)
        values.append(got)
    # Speech clips carry pitched frames; the tone is pitched, the noise and click are not.
    assert sum(v > VOICING_THRESHOLD for v in values) > len(values) // 10
    assert values[-3] > 0.7  # (a biased estimate: one period in, (n - lag) / n of it overlaps)
    assert values[-2] < VOICING_THRESHOLD
    assert values[-1] < VOICING_THRESHOLD


@pytest.mark.parametrize("length", [240, 160])
def test_silence_and_a_constant_have_no_pitch(length: int) -> None:
    assert voicing(np.zeros(length, dtype=np.int16), 20, 100, 8000) == 0.0
    assert voicing(np.full(length, 300, dtype=np.int16), 20, 100, 8000) == 0.0
    assert voicing(np.full(length, -32768, dtype=np.int16), 20, 100, 8000) == 0.0
    assert voicing(np.zeros(1, dtype=np.int16), 20, 100, 8000) == 0.0


def test_every_detector_rate_and_window_length_keeps_to_the_fft_form() -> None:
    """The matrices are made per window length and rate, and their cache stays bounded."""
    from voxproxy.core.analysis import voicing as module

    rng = np.random.default_rng(5)
    for rate in (8000, 16000, 32000, 48000):
        for ms in (10, 20, 30):
            n = rate * ms // 1000
            t = np.arange(n) / rate
            w = (4000 * np.sin(2 * np.pi * 140 * t) + 600 * rng.standard_normal(n)).astype(np.int16)
            lo, hi = rate // 400, rate // 80
            assert voicing(w, lo, hi, rate) == pytest.approx(
                fft_voicing(w, lo, hi, rate), abs=1e-12
            )
    assert len(module._BASES) <= module._MAX_BASES
