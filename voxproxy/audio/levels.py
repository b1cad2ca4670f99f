"""Signal levels in dBFS."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voxproxy.events import Pcm

FLOOR_DB = -100.0
_FULL_SCALE_SQ = 32768.0 * 32768.0


def window_energy_db(pcm: Pcm, window: int) -> npt.NDArray[np.float32]:
    """Mean power of each complete ``window``-sample window, in dBFS (floor -100)."""
    n = (pcm.size // window) * window
    if n == 0:
        return np.zeros(0, dtype=np.float32)
    x = pcm[:n].astype(np.float32).reshape(-1, window)
    power = np.einsum("ij,ij->i", x, x) / (window * _FULL_SCALE_SQ)
    db: npt.NDArray[np.float32] = (10.0 * np.log10(np.maximum(power, 1e-10))).astype(np.float32)
    return db


def rms_dbfs(pcm: Pcm) -> float:
    if pcm.size == 0:
        return FLOOR_DB
    x = pcm.astype(np.float64)
    power = float(np.dot(x, x)) / (pcm.size * _FULL_SCALE_SQ)
    return max(FLOOR_DB, 10.0 * float(np.log10(max(power, 1e-10))))
