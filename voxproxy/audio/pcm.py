"""16-bit PCM helpers: bytes <-> samples, durations, WAV files."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np

from voxproxy.errors import FixtureError
from voxproxy.events import Pcm
from voxproxy.timebase import NS_PER_S


def bytes_to_pcm(data: bytes) -> Pcm:
    """Little-endian 16-bit samples; ``len(data)`` must be even."""
    return np.frombuffer(data, dtype="<i2").astype(np.int16, copy=False)


def pcm_to_bytes(pcm: Pcm) -> bytes:
    return pcm.astype("<i2", copy=False).tobytes()


def duration_ns(n_samples: int, sample_rate_hz: int) -> int:
    return n_samples * NS_PER_S // sample_rate_hz


def samples_for_ms(ms: float, sample_rate_hz: int) -> int:
    return round(ms * sample_rate_hz / 1000)


def read_wav(path: str | Path, downmix: bool = False) -> tuple[Pcm, int]:
    """Read a mono 16-bit WAV file. Returns ``(samples, sample_rate_hz)``.

    ``downmix``: also take a 16-bit file of several channels, as their mean."""
    try:
        with wave.open(str(path), "rb") as w:
            channels = w.getnchannels()
            if (channels != 1 and not downmix) or w.getsampwidth() != 2:
                raise FixtureError(
                    f"{path}: need {'' if downmix else 'mono '}16-bit PCM, got {channels} "
                    f"channel(s) of {8 * w.getsampwidth()} bit"
                )
            rate = w.getframerate()
            data = w.readframes(w.getnframes())
    except (OSError, wave.Error, EOFError) as exc:
        raise FixtureError(f"{path}: cannot read WAV: {exc}") from exc
    pcm = bytes_to_pcm(data)
    if channels > 1:  # interleaved frames: the mean of each frame's samples
        frames = pcm[: pcm.size // channels * channels].reshape(-1, channels)
        mono: Pcm = np.rint(frames.astype(np.float64).mean(axis=1)).astype(np.int16)
        return mono, rate
    return pcm.copy(), rate


def write_wav(path: str | Path, pcm: Pcm, sample_rate_hz: int) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate_hz)
        w.writeframes(pcm_to_bytes(pcm))
