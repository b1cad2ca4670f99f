"""Periodicity of a short window of speech (voicing): pitched sound is speech, a
cough, a door or a bed of noise is not."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

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


def voicing_rows(
    windows: npt.NDArray[np.int16], lag_lo: int, lag_hi: int, sample_rate_hz: int
) -> list[float]:
    """:func:`voicing` of each row of ``windows`` (windows of one length), in one pass of
    numpy: the same values (each row's transforms and sums are computed as for one
    window), for a fraction of the per-call cost."""
    f = windows.astype(np.float64)
    f -= f.mean(axis=1, keepdims=True)
    nfft = 1 << (2 * f.shape[1] - 1).bit_length()
    spec = np.fft.rfft(f, nfft, axis=1)
    lo_bin = int(VOICING_BAND_HZ[0] * nfft / sample_rate_hz)
    hi_bin = int(VOICING_BAND_HZ[1] * nfft / sample_rate_hz) + 1
    power = np.zeros(spec.shape)
    band = spec[:, lo_bin:hi_bin]
    power[:, lo_bin:hi_bin] = band.real**2 + band.imag**2
    ac = np.fft.irfft(power, nfft, axis=1)[:, : lag_hi + 2]
    zero = ac[:, :1] <= 0.0  # no energy in the band (or none at all): no pitch
    ac /= np.where(zero, 1.0, ac[:, :1])
    r = ac[:, max(lag_lo - 1, 1) : lag_hi + 2]
    mid = r[:, 1:-1]
    peaks = np.where((mid > r[:, :-2]) & (mid >= r[:, 2:]), mid, -np.inf).max(axis=1)
    peaks[zero[:, 0] | (peaks == -np.inf) | ~f.any(axis=1)] = 0.0
    out: list[float] = peaks.tolist()
    return out
