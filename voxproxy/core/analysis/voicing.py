"""Periodicity of a short window of speech (voicing): pitched sound is speech, a
cough, a door or a bed of noise is not."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from voxproxy.core.events import Pcm

VOICING_THRESHOLD = 0.45  # normalized autocorrelation peak at a pitch lag (80-400 Hz)
VOICING_BAND_HZ = (60.0, 1000.0)  # where a voice's fundamental and first harmonics lie

Matrix = npt.NDArray[np.float64]

# (window length, lags, rate) -> the two matrices of voicing(), made once. A detector
# asks for two or three window lengths at one rate; the bound only keeps a caller that
# varies them from growing it (at 48 kHz an entry is about 2.3 MB).
_BASES: dict[tuple[int, int, int, int], tuple[Matrix, Matrix, int]] = {}
_MAX_BASES = 16
_SILENT_BAND = 1e-6  # autocorrelation at lag 0 (band energy / nfft) taken for none


def voicing(window: Pcm, lag_lo: int, lag_hi: int, sample_rate_hz: int | None = None) -> float:
    """Periodicity of a window: the highest interior peak of its normalized
    autocorrelation between lags ``lag_lo`` and ``lag_hi`` (pitch 80-400 Hz).

    The autocorrelation is taken over the 60-1000 Hz band only, where a voice's
    fundamental and first harmonics carry its periodicity: broadband noise above the
    band no longer hides it (at 10 dB SNR in white noise, 32-64% of the project's and
    the corpus's speech frames stay voiced, against 0-6% with the whole band
    pre-emphasized), and noise, a cough or a door inside the band has no such peak.
    ``sample_rate_hz`` defaults to ``lag_hi * 80``.

    It is the Wiener-Khinchin autocorrelation of the mean-removed window zero-padded to
    ``nfft`` (a power of two of at least twice its length), its power spectrum masked
    to the band: ``irfft(mask * |rfft(x - mean, nfft)|**2)[:lag_hi + 2]``. Only the
    band's few bins and the lags up to ``lag_hi`` are ever used, so it is computed as two
    small products with matrices made once per window length (the band's DFT, the mean's
    removal folded in; the inverse transform at those lags): the same values to ~1e-14
    (tests/core/analysis/test_voicing.py holds it to the FFT form), in less time than two FFTs
    of ``nfft`` points, numpy's per-call cost dominating at these sizes
    (docs/performance.md, "Choices in the code, measured").
    """
    rate = sample_rate_hz if sample_rate_hz is not None else lag_hi * 80
    n = window.size
    if n < 2:
        return 0.0
    forward, inverse, nb = _bases(n, lag_lo, lag_hi, rate)
    y = forward @ window.astype(np.float64)  # the band's bins: real parts, then imaginary
    y *= y
    ac = inverse @ (y[:nb] + y[nb:])
    a0 = float(ac[0])
    # No energy in the band (silence, or a constant: nothing is left once the mean is
    # removed, but for the products' rounding, far below one sample step's energy).
    if a0 <= _SILENT_BAND:
        return 0.0
    # The highest interior peak among lags max(lag_lo, 2) to lag_hi: a value above the one
    # before it and not below the one after. A loop over a list in the compiled build (six
    # numpy calls on a hundred values cost more than the products above).
    lags: list[float] = ac.tolist()
    best = 0.0
    found = False
    for k in range(max(lag_lo - 1, 1) + 1, lag_hi + 1):
        v = lags[k]
        if v > lags[k - 1] and v >= lags[k + 1] and (not found or v > best):
            best = v
            found = True
    return best / a0 if found else 0.0


def _bases(n: int, lag_lo: int, lag_hi: int, rate: int) -> tuple[Matrix, Matrix, int]:
    key = (n, lag_lo, lag_hi, rate)
    made = _BASES.get(key)
    if made is not None:
        return made
    nfft = 1 << (2 * n - 1).bit_length()
    lo_bin = int(VOICING_BAND_HZ[0] * nfft / rate)
    hi_bin = min(int(VOICING_BAND_HZ[1] * nfft / rate) + 1, nfft // 2 + 1)
    bins = np.arange(lo_bin, hi_bin, dtype=np.float64)
    angle = (2.0 * math.pi / nfft) * np.outer(bins, np.arange(n, dtype=np.float64))
    # Re and -Im of the DFT at the band's bins (the sign is squared away), each row less
    # its mean: row @ x is then row @ (x - mean(x)).
    forward = np.vstack((np.cos(angle), np.sin(angle)))
    forward -= forward.mean(axis=1, keepdims=True)
    # irfft of a real, even spectrum: x[k] = sum_b w_b P_b cos(2 pi b k / nfft), with
    # w_b = 1/nfft at DC and Nyquist and 2/nfft between.
    weight = np.where((bins == 0) | (2 * bins == nfft), 1.0, 2.0) / nfft
    lags = np.arange(lag_hi + 2, dtype=np.float64)
    inverse = weight[None, :] * np.cos((2.0 * math.pi / nfft) * np.outer(lags, bins))
    made = (np.ascontiguousarray(forward), np.ascontiguousarray(inverse), int(bins.size))
    if len(_BASES) >= _MAX_BASES:
        _BASES.clear()
    _BASES[key] = made
    return made
