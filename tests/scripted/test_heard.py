"""The scripted calls' caller truth over a noise bed (``support.scripted.heard``): what a
listener hears of each caller turn once the plan's noise is mixed in (MEASUREMENT.md 2)."""

from __future__ import annotations

import numpy as np
import pytest
from support.noise import noise_bed
from support.scripted import BargePlan, CallPlan, TurnPlan, render

from voxproxy.clips import load_clips
from voxproxy.core.analysis.truth import audible_speech_edges, truth_threshold_dbfs
from voxproxy.core.audio.pcm import bytes_to_pcm
from voxproxy.core.events import CALLER_TO_AGENT

MS = 1_000_000


def _plan(**kw: object) -> CallPlan:
    clips = load_clips()
    turns = (
        TurnPlan(clips["caller_where_is_order"], clips["agent_order_status"], 700.0),
        TurnPlan(clips["caller_thanks"], clips["agent_confirm"], 900.0),
        TurnPlan(clips["caller_yes"], clips["agent_hours"], 600.0),
    )
    return CallPlan(dialect="raw", send_mode="paced", turns=turns, seed=3, **kw)  # type: ignore[arg-type]


def _caller_track(call: object) -> np.ndarray:
    messages = call.messages  # type: ignore[attr-defined]
    frames = [
        bytes_to_pcm(p) for _t, d, p in messages if d == CALLER_TO_AGENT and isinstance(p, bytes)
    ]
    return np.concatenate(frames).astype(np.float64)


@pytest.mark.parametrize("kind", ["white", "pink", "street"])
def test_the_caller_truth_is_what_is_heard_over_the_mixed_bed(kind: str) -> None:
    # The bed 10 dB under the caller (-21 dBFS talkers). Read back independently: the noise
    # is the mixed track the caller sent less the same call rendered without it; each
    # turn's true caller edges are the audible edges of its clip over that noise, and the
    # ttfs truth moves with the offset. Before this rule, the truth kept the clips' own
    # edges, 100-200 ms of which lie under the noise.
    bed = np.round(noise_bed(kind, 16000 * 6, 16000, seed=1) * 3000).astype(np.int16)
    quiet = render(_plan())
    noisy = render(_plan(caller_bed=bed, caller_bed_dbfs=-31.0))
    noise = _caller_track(noisy) - _caller_track(quiet)
    clips = [t.caller for t in _plan().turns]
    moved = 0
    for clip, q, t in zip(clips, quiet.truth, noisy.truth, strict=True):
        start = round((q.caller_onset_ns / MS - clip.onset_ms) * 16)
        threshold = truth_threshold_dbfs(clip.pcm, 16000)
        under = noise[start : start + clip.pcm.size]
        edges = audible_speech_edges(clip.pcm, under, 16000, threshold_dbfs=threshold)
        on = start / 16 + edges[0][0]
        off = start / 16 + edges[-1][1]
        assert abs(t.caller_onset_ns / MS - on) <= 1.0, (clip.name, t, on)
        assert abs(t.caller_offset_ns / MS - off) <= 1.0, (clip.name, t, off)
        assert q.caller_onset_ns <= t.caller_onset_ns and t.caller_offset_ns <= q.caller_offset_ns
        assert t.agent_onset_ns == q.agent_onset_ns
        assert t.ttfs_ns == t.agent_onset_ns - t.caller_offset_ns
        moved += q.caller_offset_ns - t.caller_offset_ns > 10 * MS
    assert moved >= 2  # the noise hides real parts of the speech, not a rounding


def test_a_barge_in_onset_is_the_heard_onset_of_the_speech_that_barged_in() -> None:
    clips = load_clips()
    turns = (
        TurnPlan(
            clips["caller_where_is_order"],
            clips["agent_long_answer"],
            700.0,
            barge=BargePlan(900.0, 200.0, "flush"),
        ),
        TurnPlan(clips["caller_interrupt"], clips["agent_confirm"], 700.0),
    )
    bed = np.round(noise_bed("white", 16000 * 6, 16000, seed=2) * 3000).astype(np.int16)
    plan = CallPlan(
        dialect="raw", send_mode="paced", turns=turns, seed=1, caller_bed=bed, caller_bed_dbfs=-25.0
    )
    call = render(plan)
    first, second = call.truth
    assert first.barge_onset_ns == second.caller_onset_ns
    quiet = render(CallPlan(dialect="raw", send_mode="paced", turns=turns, seed=1))
    assert quiet.truth[0].barge_onset_ns is not None and first.barge_onset_ns is not None
    assert first.barge_onset_ns >= quiet.truth[0].barge_onset_ns


def test_without_noise_the_truth_is_the_clips_own() -> None:
    call = render(_plan())
    clips = [t.caller for t in _plan().turns]
    for clip, t in zip(clips, call.truth, strict=True):
        assert (t.caller_offset_ns - t.caller_onset_ns) == round(
            (clip.offset_ms - clip.onset_ms) * MS
        )
