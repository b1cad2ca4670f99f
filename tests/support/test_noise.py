"""The steady noise beds (``support.noise``): their level, colour and drift."""

from __future__ import annotations

import numpy as np
import pytest

from support.noise import BED_KINDS, STREET_DRIFT_DB, noise_bed

RATE = 16000


def _octave_db(x: np.ndarray, lo: float) -> float:
    """Power (dB) in the octave from ``lo`` Hz."""
    spec = np.abs(np.fft.rfft(x)) ** 2
    freqs = np.fft.rfftfreq(x.size, 1 / RATE)
    return float(10 * np.log10(spec[(freqs >= lo) & (freqs < 2 * lo)].sum()))


@pytest.mark.parametrize("kind", BED_KINDS)
def test_every_bed_has_unit_rms_and_is_seeded(kind: str) -> None:
    x = noise_bed(kind, RATE * 4, RATE, seed=3)
    assert x.size == RATE * 4
    assert abs(float(np.sqrt(np.mean(x**2))) - 1.0) < 1e-9
    assert np.array_equal(x, noise_bed(kind, RATE * 4, RATE, seed=3))
    assert not np.array_equal(x, noise_bed(kind, RATE * 4, RATE, seed=4))


@pytest.mark.parametrize(("kind", "slope_db"), [("white", 3.0), ("pink", 0.0), ("brown", -3.0)])
def test_the_colours_fall_as_named(kind: str, slope_db: float) -> None:
    # Power an octave: white rises 3 dB an octave, pink is flat, brown falls 3 dB.
    x = noise_bed(kind, RATE * 8, RATE, seed=1)
    octaves = [_octave_db(x, lo) for lo in (125, 250, 500, 1000, 2000)]
    slope = float(np.polyfit(np.arange(5), octaves, 1)[0])
    assert abs(slope - slope_db) < 0.5, (kind, octaves)
    assert _octave_db(x, 2.0) < _octave_db(x, 250) - 20  # nothing below 20 Hz


def test_the_street_bed_drifts_over_seconds() -> None:
    x = noise_bed("street", RATE * 20, RATE, seed=2)
    level = 10 * np.log10(np.mean(x.reshape(-1, RATE // 2) ** 2, axis=1))  # half seconds
    spread = float(level.max() - level.min())
    depth = sum(d for d, _period in STREET_DRIFT_DB)
    assert 0.8 * depth < spread / 2 < 1.3 * depth, level
    steady = noise_bed("pink", RATE * 20, RATE, seed=2)
    steady_level = 10 * np.log10(np.mean(steady.reshape(-1, RATE // 2) ** 2, axis=1))
    assert float(steady_level.max() - steady_level.min()) < 3.0


def test_an_unknown_bed_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown noise bed"):
        noise_bed("babble", 100, RATE)
