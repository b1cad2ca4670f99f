"""Steady noise beds to put under a caller: white, pink, brown and a street-like bed
whose level drifts, each seeded so that a run can be repeated.

What real callers have around them, for the accuracy benchmark and the tests of the
detector under noise (MEASUREMENT.md 2: under a noise bed, the truth is what a listener
can hear). Every bed comes at unit RMS; the caller scales it to its SNR.

- ``white``: flat spectrum (a fan, hiss).
- ``pink``: power falling 3 dB an octave from 20 Hz (HVAC, a room, rain).
- ``brown``: 6 dB an octave from 20 Hz (a car's cabin, distant traffic, wind rumble).
- ``street``: pink and brown together under a level that drifts by up to about 8 dB
  over seconds (traffic passing by), the drift a sum of two slow sines with random
  phases.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Bed = npt.NDArray[np.float64]

BED_KINDS = ("white", "pink", "brown", "street")
_LOW_HZ = 20.0  # coloured beds have nothing below this (no drift of the mean)
STREET_DRIFT_DB = ((5.0, 6.5), (3.0, 2.3))  # (depth dB, period s) of the street bed's drift


def _coloured(rng: np.random.Generator, n: int, rate: int, exponent: float) -> Bed:
    """Gaussian noise whose power falls as ``f ** -exponent`` above 20 Hz, none below."""
    spectrum = np.fft.rfft(rng.standard_normal(n))
    freqs = np.fft.rfftfreq(n, 1.0 / rate)
    gain = np.zeros_like(freqs)
    keep = freqs >= _LOW_HZ
    gain[keep] = freqs[keep] ** (-exponent / 2.0)
    x: Bed = np.fft.irfft(spectrum * gain, n)
    return x


def _unit(x: Bed) -> Bed:
    rms = float(np.sqrt(np.mean(x**2)))
    out: Bed = x / rms if rms > 0 else x
    return out


def noise_bed(kind: str, n: int, sample_rate_hz: int, seed: int = 0) -> Bed:
    """``n`` samples of the ``kind`` bed (one of :data:`BED_KINDS`) at unit RMS."""
    rng = np.random.default_rng(seed)
    if kind == "white":
        return _unit(rng.standard_normal(n))
    if kind == "pink":
        return _unit(_coloured(rng, n, sample_rate_hz, 1.0))
    if kind == "brown":
        return _unit(_coloured(rng, n, sample_rate_hz, 2.0))
    if kind == "street":
        rumble = _unit(_coloured(rng, n, sample_rate_hz, 2.0))
        hiss = _unit(_coloured(rng, n, sample_rate_hz, 1.0))
        t = np.arange(n) / sample_rate_hz
        drift_db = np.zeros(n)
        for depth, period in STREET_DRIFT_DB:
            drift_db += depth * np.sin(2 * np.pi * t / period + rng.uniform(0, 2 * np.pi))
        return _unit((rumble + hiss) * 10 ** (drift_db / 20))
    raise ValueError(f"unknown noise bed {kind!r}; have {', '.join(BED_KINDS)}")
