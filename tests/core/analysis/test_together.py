"""voxproxy.core.analysis.together: a call's two directions advanced at one pump, their
energies in one pass, find exactly the spurts each finds advanced alone; detectors whose
windows or frames differ are advanced alone. On a committed clip, at fixed times."""

from __future__ import annotations

import numpy as np
from support.vadpair import advance_pair, finished_spurts

from voxproxy.clips import clip
from voxproxy.core.analysis.together import prepare_together
from voxproxy.core.analysis.vad import SpeechDetector

NS_PER_S = 1_000_000_000


def _speech(rate: int, lead_ms: int = 500) -> np.ndarray:
    c = clip("caller_hello")
    step = c.sample_rate_hz // rate
    lead, pause = np.zeros(rate * lead_ms // 1000, np.int16), np.zeros(rate // 2, np.int16)
    return np.concatenate([lead, c.pcm[::step], pause, c.pcm[::step][::-1].copy(), pause])


def _run(rates: tuple[int, int], together: bool) -> list[list[object]]:
    dets = [SpeechDetector(r, batch_ms=200.0) for r in rates]
    signals = [_speech(r, lead_ms) for r, lead_ms in zip(rates, (500, 1300), strict=True)]
    longest_ms = max(s.size * 1000 // r for s, r in zip(signals, rates, strict=True))
    for t_ms in range(0, longest_ms + 100, 100):  # a pump every 100 ms
        for det, x, r in zip(dets, signals, rates, strict=True):
            a, b = t_ms * r // 1000, min(x.size, (t_ms + 100) * r // 1000)
            if a < b:
                det.push(x[a:b], a * NS_PER_S // r)
        now = (t_ms + 100) * 1_000_000
        advance_pair(dets, now, now + 3_000_000, together)
    return finished_spurts(dets, (longest_ms + 1000) * 1_000_000)


def test_two_directions_advanced_together_find_what_each_finds_alone() -> None:
    alone = _run((16000, 16000), together=False)
    assert all(len(s) >= 2 for s in alone)
    assert alone[0] != alone[1]  # the directions differ: a mix-up would show
    assert _run((16000, 16000), together=True) == alone


def test_directions_at_different_rates_are_advanced_alone_with_the_same_result() -> None:
    alone = _run((16000, 8000), together=False)
    assert all(len(s) >= 2 for s in alone)
    assert _run((16000, 8000), together=True) == alone


def test_prepare_gives_the_batches_only_when_both_have_whole_frames_of_one_shape() -> None:
    # Analysis deferred until the pump (batch_ms): what is pushed waits for it.
    a, b = SpeechDetector(16000, batch_ms=1000.0), SpeechDetector(16000, batch_ms=1000.0)
    c, d = SpeechDetector(8000, batch_ms=1000.0), SpeechDetector(16000, batch_ms=1000.0)
    x = _speech(16000)[:3200]
    a.push(x, 0)
    b.push(x, 0)
    batches = prepare_together(a, 200_000_000, b, 200_000_000)
    assert batches is not None
    assert all(batch.size > 0 and batch.size % (16 * a.config.frame_ms) == 0 for batch in batches)
    c.push(_speech(8000)[:1600], 0)
    d.push(x, 0)
    assert prepare_together(d, 200_000_000, c, 200_000_000) is None  # 16 vs 8 samples a window
