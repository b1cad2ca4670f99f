"""A clip said into a stream under a noise bed, as the speech detector hears it and as a
listener does (MEASUREMENT.md 2: under a bed, the truth is what a listener can hear): the
set-up the tests of the audible edges and of the noise floor share."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from support.noise import Bed, noise_bed
from voxproxy.clips import Clip
from voxproxy.core.analysis.truth import audible_speech_edges, truth_threshold_dbfs
from voxproxy.core.analysis.vad import SpeechDetector, Spurt


def at_rate(pcm: np.ndarray, rate: int, target: int) -> np.ndarray:
    """``pcm`` at ``target`` Hz (a whole divisor of ``rate``: the mean of each step)."""
    if rate == target:
        return pcm
    step = rate // target
    return pcm[: pcm.size // step * step].reshape(-1, step).mean(axis=1).astype(np.int16)


@dataclass(frozen=True)
class Heard:
    """The detector after the stream, its voiced spurts, the heard truth (ms into the
    clip) and the bed as it was added (whole stream)."""

    detector: SpeechDetector
    spurts: list[Spurt]
    truth: list[list[float]]
    bed: Bed


def heard_under_bed(
    clip: Clip, kind: str, snr_db: float, rate: int, lead_ms: int, seed: int | None = None
) -> Heard:
    """``clip`` said ``lead_ms`` into a stream at ``rate`` Hz whose ``kind`` bed
    (``snr_db`` under the clip's active level; realisation ``seed``, by default one per
    clip) starts with the stream's first sample, a second of the bed alone after it; the
    detector is fed 20 ms at a time."""
    pcm = at_rate(clip.pcm, clip.sample_rate_hz, rate)
    lead = lead_ms * rate // 1000
    x = np.concatenate([np.zeros(lead), pcm.astype(np.float64), np.zeros(rate)])
    segs = [pcm[round(a * rate / 1000) : round(b * rate / 1000)] for a, b in clip.segments_ms]
    active = float(np.sqrt(np.mean(np.concatenate(segs).astype(np.float64) ** 2)))
    bed = (
        noise_bed(kind, x.size, rate, seed=len(clip.name) if seed is None else seed)
        * active
        * 10 ** (-snr_db / 20)
    )
    threshold = truth_threshold_dbfs(clip.pcm, clip.sample_rate_hz)
    truth = audible_speech_edges(pcm, bed[lead : lead + pcm.size], rate, threshold_dbfs=threshold)
    y = np.clip(np.round(x + bed), -32768, 32767).astype(np.int16)
    det = SpeechDetector(rate)
    step = rate // 50
    for k in range(0, y.size, step):
        det.push(y[k : k + step], k * 1_000_000_000 // rate)
    det.finish(y.size * 1_000_000_000 // rate)
    return Heard(det, [s for s in det.spurts if s.voiced], truth, bed)
