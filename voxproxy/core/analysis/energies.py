"""The energies of a detector's batch: every 1 ms window's and every frame's power in dB.

This is the numpy part of :meth:`SpeechDetector._analyse <voxproxy.core.analysis.vad>`, for
one batch of whole frames or for several at once. Numpy's cost here is mostly per call
(about ten calls a batch, each a few thousand instructions, for a hundred windows), so
batches analysed at the same moment (a call's two directions at each pump) share one
pass: every operation is elementwise or per window, so each batch's values are the ones
it would have had alone (``benchmarks/measurement.py``'s receipts digest is the same).
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from voxproxy.core.events import Pcm

F32 = npt.NDArray[np.float32]

# numpy's functions and the float32 constants, looked up once.
_MULTIPLY: Final = np.multiply
_MAXIMUM: Final = np.maximum
_LOG10: Final = np.log10
_ADD_REDUCE: Final = np.add.reduce
_EMPTY: Final = np.empty
_CONCATENATE: Final = np.concatenate
_F32: Final = np.dtype(np.float32)
_POWER_FLOOR: Final = np.array(1e-10, dtype=np.float32)
_TEN: Final = np.array(10.0, dtype=np.float32)


def window_scale(win: int) -> F32:
    """What a window's sum of squares is multiplied by: its mean power re full scale."""
    return np.array(1.0 / (win * 32768.0 * 32768.0), dtype=np.float32)


def frame_scale(frame_ms: int) -> F32:
    """What the sum of a frame's windows' powers is multiplied by: their mean."""
    return np.array(1.0 / frame_ms, dtype=np.float32)


def batch_energies(
    batches: list[Pcm], win: int, frame_ms: int, win_scale: F32, frm_scale: F32
) -> list[tuple[F32, F32]]:
    """For each batch of whole frames (``win * frame_ms`` samples each), its windows' and
    its frames' power in dBFS: ``(window_db, frame_db)``, views of one array.

    A window's power is its mean square re full scale, at least 1e-10; a frame's, the mean
    of its windows' powers. In place, with the constants float32 arrays made once: the
    same float32 operations as ``power *= 1.0 / ...`` and so on, for less of numpy's
    per-call cost. The windows' and the frames' powers share one array, so that one log10
    and one product make both in dB."""
    x = batches[0].astype(_F32) if len(batches) == 1 else _CONCATENATE(batches, dtype=_F32)
    frame = win * frame_ms
    n_frames = x.size // frame
    n_win = n_frames * frame_ms
    rows = x.reshape(n_win, win)
    both = _EMPTY(n_win + n_frames, _F32)
    power = both[:n_win]
    np.einsum("ij,ij->i", rows, rows, out=power)
    _MULTIPLY(power, win_scale, out=power)
    _MAXIMUM(power, _POWER_FLOOR, out=power)
    frame_pow = both[n_win:]
    _ADD_REDUCE(power.reshape(n_frames, frame_ms), axis=1, out=frame_pow)  # (= .sum)
    _MULTIPLY(frame_pow, frm_scale, out=frame_pow)
    _LOG10(both, out=both)
    _MULTIPLY(both, _TEN, out=both)
    if len(batches) == 1:
        return [(power, frame_pow)]
    out: list[tuple[F32, F32]] = []
    w = f = 0
    for batch in batches:
        nf = batch.size // frame
        out.append((power[w : w + nf * frame_ms], frame_pow[f : f + nf]))
        w += nf * frame_ms
        f += nf
    return out
