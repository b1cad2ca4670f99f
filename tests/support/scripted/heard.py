"""The caller's truth over a noise bed: what a listener hears of each caller turn once
the plan's noise is mixed in (MEASUREMENT.md 2). The renderer takes each turn's truth from
the clip's own edges in the audio the wire carries (at its rate); under a
:class:`CallPlan`'s white noise or noise bed, each caller onset and offset moves to the
first and last 1 ms window where the clean speech is within 35 dB of its recording's level
and above the noise's own level in the same window."""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from support.scripted.plan import CallPlan, TurnTruth
from voxproxy.clips import Clip
from voxproxy.core.analysis.truth import audible_speech_edges, named_truth_threshold
from voxproxy.core.events import Pcm
from voxproxy.core.timebase import NS_PER_MS
from voxproxy.loadgen.steps import edges_at_rate

Noise = npt.NDArray[np.float64]


def add_bed(track: Pcm, bed: Pcm, dbfs: float) -> Pcm:
    """``track`` with ``bed`` (looped) under it at an RMS of ``dbfs``."""
    reps = -(-track.size // max(bed.size, 1))
    loop = np.tile(bed.astype(np.float64), reps)[: track.size]
    rms = float(np.sqrt(np.mean(loop**2))) or 1.0
    loop *= 32768.0 * 10 ** (dbfs / 20) / rms
    mixed: Pcm = np.clip(track.astype(np.float64) + loop, -32768, 32767).astype(np.int16)
    return mixed


def caller_noise(plan: CallPlan, total: int, bed_at_rate: Pcm | None) -> Noise | None:
    """The noise alone that the renderer mixes under the caller's ``total`` samples: the
    plan's white noise (seeded) and its bed (``bed_at_rate``, looped, at its RMS level),
    as ``render.mix_caller_track`` and :func:`add_bed` make them; None for none."""
    noise: Noise | None = None
    if plan.caller_noise_dbfs is not None:
        rng = np.random.default_rng(plan.seed)
        noise = rng.standard_normal(total) * 32768.0 * 10 ** (plan.caller_noise_dbfs / 20)
    if bed_at_rate is not None:
        reps = -(-total // max(bed_at_rate.size, 1))
        loop = np.tile(bed_at_rate.astype(np.float64), reps)[:total]
        rms = float(np.sqrt(np.mean(loop**2))) or 1.0
        loop *= 32768.0 * 10 ** (plan.caller_bed_dbfs / 20) / rms
        noise = loop if noise is None else noise + loop
    return noise


def heard_edges_ms(
    clip: Clip, pcm: Pcm, start: int, noise: Noise, rate: int
) -> tuple[float, float]:
    """A caller clip's onset and offset (ms into the clip) over ``noise``: ``pcm`` is the clip
    at ``rate``, placed at sample ``start`` of the caller's track. The clip's own edges
    at ``rate`` when nothing of it stands above the noise."""
    threshold = named_truth_threshold(clip.name, clip.pcm, clip.sample_rate_hz)
    n = min(pcm.size, noise.size - start)
    if threshold is None or n <= 0:
        return edges_at_rate(clip, rate)
    edges = audible_speech_edges(pcm[:n], noise[start : start + n], rate, threshold_dbfs=threshold)
    if not edges:
        return edges_at_rate(clip, rate)
    return edges[0][0], edges[-1][1]


def heard_truth(
    truth: list[TurnTruth],
    placed: list[tuple[float, int, Pcm, Clip]],
    noise: Noise | None,
    rate: int,
) -> list[TurnTruth]:
    """Each turn's truth with its caller edges (and the barge-in onset of the turn before,
    which is this turn's onset) as a listener hears them over ``noise``; ``placed``: each
    turn's caller clip as ``(start ms, start sample, pcm at rate, clip)``."""
    if noise is None:
        return truth
    out = list(truth)
    for i, (start_ms, start, pcm, clip) in enumerate(placed):
        on_ms, off_ms = heard_edges_ms(clip, pcm, start, noise, rate)
        moved_on = round((start_ms + on_ms) * NS_PER_MS)
        moved_off = round((start_ms + off_ms) * NS_PER_MS)
        t = out[i]
        out[i] = dataclasses.replace(
            t,
            caller_onset_ns=moved_on,
            caller_offset_ns=moved_off,
            ttfs_ns=t.agent_onset_ns - moved_off,
        )
        if i > 0 and out[i - 1].barge_onset_ns is not None:
            out[i - 1] = dataclasses.replace(out[i - 1], barge_onset_ns=moved_on)
    return out
