"""voxproxy.core.analysis.energies: every 1 ms window's and every frame's power in dBFS,
for one batch or several in one pass, against a plain float64 computation."""

from __future__ import annotations

import numpy as np

from voxproxy.core.analysis.energies import batch_energies, frame_scale, window_scale

WIN, FRAME_MS = 16, 10  # 16 kHz: 16 samples a window, 10 ms frames


def _naive(x: np.ndarray, win: int, frame_ms: int) -> tuple[np.ndarray, np.ndarray]:
    n_frames = x.size // (win * frame_ms)
    rows = x[: n_frames * win * frame_ms].astype(np.float64).reshape(-1, win)
    power = np.maximum((rows**2).mean(axis=1) / 32768.0**2, 1e-10)
    frames = power.reshape(n_frames, frame_ms).mean(axis=1)
    return 10 * np.log10(power), 10 * np.log10(frames)


def _energies(batches: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    return batch_energies(batches, WIN, FRAME_MS, window_scale(WIN), frame_scale(FRAME_MS))


def _batch(seed: int, frames: int, amplitude: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(frames * WIN * FRAME_MS) * amplitude
    return np.clip(np.round(x), -32768, 32767).astype(np.int16)


def test_window_and_frame_powers_are_their_mean_squares_in_dbfs() -> None:
    x = _batch(1, 5, 3000.0)
    ((win_db, frame_db),) = _energies([x])
    want_win, want_frame = _naive(x, WIN, FRAME_MS)
    assert win_db.dtype == np.float32 and win_db.shape == (50,) and frame_db.shape == (5,)
    np.testing.assert_allclose(win_db, want_win, atol=1e-3)
    np.testing.assert_allclose(frame_db, want_frame, atol=1e-3)


def test_full_scale_is_about_zero_db_and_silence_sits_on_the_floor() -> None:
    full = np.full(WIN * FRAME_MS, -32768, dtype=np.int16)
    silent = np.zeros(WIN * FRAME_MS, dtype=np.int16)
    ((loud_win, loud_frame),) = _energies([full])
    ((quiet_win, quiet_frame),) = _energies([silent])
    np.testing.assert_allclose(loud_win, 0.0, atol=1e-4)
    np.testing.assert_allclose(quiet_win, -100.0, atol=1e-3)  # the 1e-10 power floor
    np.testing.assert_allclose(quiet_frame, -100.0, atol=1e-3)
    assert loud_frame[0] > quiet_frame[0]


def test_batches_in_one_pass_get_exactly_what_each_gets_alone() -> None:
    batches = [_batch(2, 3, 500.0), _batch(3, 1, 12000.0), _batch(4, 4, 40.0)]
    together = _energies(batches)
    for batch, (win_db, frame_db) in zip(batches, together, strict=True):
        ((alone_win, alone_frame),) = _energies([batch])
        assert np.array_equal(win_db, alone_win) and np.array_equal(frame_db, alone_frame)
        assert frame_db.size == batch.size // (WIN * FRAME_MS)
