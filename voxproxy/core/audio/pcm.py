"""16-bit PCM helpers: bytes <-> samples, durations. (The core opens no file: WAV files
are read and written by the shells, :mod:`voxproxy.clips`.)"""

from __future__ import annotations

import numpy as np

from voxproxy.core.events import Pcm
from voxproxy.core.timebase import NS_PER_S


def bytes_to_pcm(data: bytes) -> Pcm:
    """Little-endian 16-bit samples; ``len(data)`` must be even."""
    return np.frombuffer(data, dtype="<i2").astype(np.int16, copy=False)


def pcm_to_bytes(pcm: Pcm) -> bytes:
    return pcm.astype("<i2", copy=False).tobytes()


def duration_ns(n_samples: int, sample_rate_hz: int) -> int:
    return n_samples * NS_PER_S // sample_rate_hz


def samples_for_ms(ms: float, sample_rate_hz: int) -> int:
    return round(ms * sample_rate_hz / 1000)
