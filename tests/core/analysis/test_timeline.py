"""Timeline.earliest bounds the clock from below, and the detector's use of it (skipping
an offset refinement that cannot close a spurt) changes no spurt."""

from __future__ import annotations

import random

import numpy as np
import pytest

from voxproxy.clips import load_clips
from voxproxy.core.analysis.timeline import Timeline
from voxproxy.core.analysis.vad import SpeechDetector, Spurt

MS = 1_000_000


def test_earliest_is_a_lower_bound_reached_within_the_range() -> None:
    rng = random.Random(3)
    for _ in range(200):
        tl = Timeline(8000)
        pos, t = rng.randrange(0, 500), rng.randrange(0, 10**9)
        for _ in range(rng.randrange(1, 12)):
            tl.add(pos, t)
            pos += rng.choice((0, 80, 160, 160, 160, 1600))
            t += 20 * MS + rng.randrange(-3 * MS, 3 * MS)  # jitter: times may step back
        lo = rng.randrange(0, pos + 200)
        hi = lo + rng.randrange(0, 2000)
        times = [tl.t_at(p) for p in range(lo, hi + 1)]
        bound = tl.earliest(lo, hi)
        assert bound <= min(times)
        # ... and not a loose one: an anchor's own time or the range's first position.
        assert bound == min(times) or bound in tl._t


def _spurts(
    pcm: np.ndarray, jitter_seed: int, exact: bool, mp: pytest.MonkeyPatch, calls: list[int]
) -> list[Spurt]:
    real = Timeline.earliest

    def earliest(self: Timeline, lo: int, hi: int) -> int:
        calls.append(lo)
        # exact: never skip (every quiet frame refines the offset, as before the shortcut)
        return -(10**18) if exact else real(self, lo, hi)

    mp.setattr(Timeline, "earliest", earliest)
    det = SpeechDetector(8000, batch_ms=200)
    rng = random.Random(jitter_seed)
    t = 0
    for k in range(0, pcm.size, 160):
        det.push(pcm[k : k + 160], t + rng.randrange(0, 3 * MS))
        t += 20 * MS
        if k % 800 == 0:
            det.advance(t)
    det.finish(t)
    mp.undo()
    return list(det.spurts)


def _signal(seed: int) -> np.ndarray:
    clips = load_clips()
    names = ["caller_where_is_order", "agent_long_answer", "caller_hello", "agent_hours"]
    rng = np.random.default_rng(seed)
    parts = []
    for name in names:
        pcm = clips[name].pcm
        parts.append(pcm[: pcm.size // 2 * 2].reshape(-1, 2).astype(np.int32).mean(axis=1))
        parts.append(np.zeros(int(rng.integers(800, 8000))))  # pauses of 0.1-1 s
    x = np.concatenate(parts)
    x = x + rng.standard_normal(x.size) * 30.0  # a little noise under the speech
    return np.clip(np.round(x), -32768, 32767).astype(np.int16)


@pytest.mark.pure_python
def test_the_shortcut_changes_no_spurt() -> None:
    asked: list[int] = []
    for seed in range(1, 9):
        pcm = _signal(seed)
        with pytest.MonkeyPatch.context() as mp:
            exact = _spurts(pcm, seed, True, mp, [])
        with pytest.MonkeyPatch.context() as mp:
            fast = _spurts(pcm, seed, False, mp, asked)
        assert len(exact) >= 4
        assert fast == exact
    # The shortcut is asked only where a refinement would not be kept yet (the first
    # frames past the merge gap, before the look-ahead is analysed): rarely, but it was.
    assert asked
