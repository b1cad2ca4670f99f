"""The clips' WAV files, read and written by the shells (the core is handed samples)."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import pytest

from voxproxy.clips import read_wav, write_wav
from voxproxy.core.errors import FixtureError


@pytest.mark.parametrize("rate", [8000, 16000, 44100])
def test_wav_round_trip(tmp_path: Path, rate: int) -> None:
    rng = np.random.default_rng(rate)
    pcm = rng.integers(-32768, 32768, size=rate // 3, dtype=np.int16)
    path = tmp_path / "x.wav"
    write_wav(path, pcm, rate)
    back, back_rate = read_wav(path)
    assert back_rate == rate
    assert back.dtype == np.int16
    np.testing.assert_array_equal(back, pcm)
    back[0] = 1  # a writable copy, not a view on a read-only buffer


def _write_raw_wav(path: Path, channels: int, width: int, frames: bytes) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(8000)
        w.writeframes(frames)


def test_stereo_wav_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "stereo.wav"
    _write_raw_wav(path, 2, 2, b"\x00\x00" * 200)
    with pytest.raises(FixtureError, match="mono 16-bit"):
        read_wav(path)


def test_8_bit_wav_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "u8.wav"
    _write_raw_wav(path, 1, 1, b"\x80" * 200)
    with pytest.raises(FixtureError, match="8 bit"):
        read_wav(path)


def test_missing_and_garbage_files_are_fixture_errors(tmp_path: Path) -> None:
    with pytest.raises(FixtureError):
        read_wav(tmp_path / "absent.wav")
    garbage = tmp_path / "garbage.wav"
    garbage.write_bytes(b"this is not a RIFF file at all")
    with pytest.raises(FixtureError):
        read_wav(garbage)


def test_a_stereo_wav_is_mixed_down_when_asked(tmp_path: Path) -> None:
    left = np.array([1000, -2000, 300, 7], dtype=np.int16)
    right = np.array([3000, 2000, -301, 8], dtype=np.int16)
    frames = np.stack([left, right], axis=1).reshape(-1).astype("<i2").tobytes()
    path = tmp_path / "stereo.wav"
    _write_raw_wav(path, 2, 2, frames)
    pcm, rate = read_wav(path, downmix=True)
    assert rate == 8000
    assert pcm.tolist() == [2000, 0, 0, 8]  # the mean of each frame (-0.5 rounds to 0)
    with pytest.raises(FixtureError, match="mono 16-bit"):
        read_wav(path)
