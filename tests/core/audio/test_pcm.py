"""16-bit PCM helpers (WAV files: tests/test_clips.py)."""

from __future__ import annotations

import numpy as np
import pytest

from voxproxy.core.audio.pcm import bytes_to_pcm, duration_ns, pcm_to_bytes, samples_for_ms


def test_bytes_are_little_endian_signed() -> None:
    assert bytes_to_pcm(b"\x01\x00\xff\xff\x00\x80\xff\x7f").tolist() == [1, -1, -32768, 32767]
    pcm = np.array([1, -1, -32768, 32767], dtype=np.int16)
    assert pcm_to_bytes(pcm) == b"\x01\x00\xff\xff\x00\x80\xff\x7f"


def test_bytes_round_trip_every_value() -> None:
    pcm = np.arange(-32768, 32768, dtype=np.int16)
    back = bytes_to_pcm(pcm_to_bytes(pcm))
    assert back.dtype == np.int16
    np.testing.assert_array_equal(back, pcm)


@pytest.mark.parametrize(
    ("n", "rate", "expected_ns"),
    [
        (160, 8000, 20_000_000),
        (320, 16000, 20_000_000),
        (480, 24000, 20_000_000),
        (1, 3, 333_333_333),
    ],
)
def test_duration_ns(n: int, rate: int, expected_ns: int) -> None:
    assert duration_ns(n, rate) == expected_ns


@pytest.mark.parametrize(
    ("ms", "rate", "expected"),
    [(20, 16000, 320), (20, 8000, 160), (10, 44100, 441), (0.5, 16000, 8)],
)
def test_samples_for_ms(ms: float, rate: int, expected: int) -> None:
    assert samples_for_ms(ms, rate) == expected
