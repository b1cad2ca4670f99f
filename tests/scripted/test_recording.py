"""Scripted calls laid out as a recording: each clip where the truth says, a barge-in's
answer cut where the agent stopped, echo at its level and lag."""

from __future__ import annotations

import numpy as np
from support.scripted.recording import recording_plans, recording_tracks, render_recording

from voxproxy.clips import load_corpus


def _speech(role: str) -> list:  # type: ignore[type-arg]
    return [c for c in load_corpus().values() if c.role == role and c.kind == "speech"]


def test_the_truth_is_where_the_clips_were_laid() -> None:
    plans = recording_plans(3, 5, _speech("caller"), _speech("agent"))
    plan = plans[1]  # one with a barge-in into its second answer
    assert plan[1].barge is not None
    rec = render_recording(plan)
    spm = rec.sample_rate_hz // 1000
    for turn, truth in zip(plan, rec.truth, strict=True):
        # The caller clip's samples lie at its truth less its own onset.
        at = round((truth.caller_onset_ns / 1e6 - turn.caller.onset_ms) * spm)
        n = min(turn.caller.pcm.size, 800)
        assert np.array_equal(rec.caller[at : at + n], turn.caller.pcm[:n])
        assert truth.ttfs_ns == truth.agent_onset_ns - truth.caller_offset_ns
    barged = rec.truth[1]
    assert barged.barge_onset_ns is not None and barged.stop_ns is not None
    assert rec.truth[2].caller_onset_ns == barged.barge_onset_ns
    # The agent falls silent once it stopped (the next answer comes later).
    cut = plan[1].barge.reaction_ms + barged.barge_onset_ns / 1e6  # type: ignore[union-attr]
    after = rec.agent[round(cut + 2) * spm : round(rec.truth[2].agent_onset_ns / 1e6 - 500) * spm]
    assert after.size and not after.any()
    assert barged.stop_ns <= round(cut * 1e6) + 1_000_000


def test_echo_is_the_agent_at_its_level_and_lag() -> None:
    rec = render_recording(recording_plans(1, 5, _speech("caller"), _speech("agent"))[0])
    clean, agent = recording_tracks(rec, 8000)
    leaky, _ = recording_tracks(rec, 8000, echo_db=-20.0, echo_lag_ms=100.0)
    leak = leaky.astype(np.float64) - clean
    expected = np.zeros_like(leak)
    expected[800:] = agent[:-800] * 0.1
    assert np.abs(leak - expected).max() <= 1.0
