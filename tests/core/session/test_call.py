"""Ground truth: the session's figures against scripted calls whose speech edges are known."""

from __future__ import annotations

import dataclasses

import pytest
from support.groundtruth import measure, run_many, speech_clips
from support.scripted import CallPlan, TurnPlan, WirePlan, render

from voxproxy.clips import load_clips
from voxproxy.core.audio.resample import resample_clip


@pytest.mark.slow
def test_ttfs_and_stop_latency_match_ground_truth() -> None:
    # 4 combinations (raw/twilio x paced/burst) x 14 calls x 4 turns = 224 turns,
    # response delays 150-3000 ms, barge-ins inside agent speech, with and without flush.
    errors = run_many(seed=2026, calls_per_combo=14)
    assert not errors.problems, errors.problems
    # Withheld because an edge moves with the level read 0.5 dB off (a slow release
    # near the truth's threshold): said, not missed, and rare. 10 of 224 (4.5%): 2 on raw
    # 16 kHz, and 8 on Twilio, caller_topic_change's release, 0.26-0.45 dB under the
    # truth's threshold for 47 ms once band-limited (BAND_LOSS_DB), published 47-55 ms off
    # against 12-25 ms stated before the offset's band on such wires reached past it.
    assert len(errors.ambiguous) <= 0.05 * len(errors.ttfs), errors.ambiguous
    assert len(errors.ttfs) >= 200
    assert len(errors.stop) >= 50
    errors.within("fake clock")  # issue 13's bounds


def _full_band_plan(wire: str) -> tuple[CallPlan | WirePlan, str]:
    """Three turns whose caller says ``caller_topic_change`` on ``wire``: OpenAI Realtime's
    pcm16 (24 kHz, linearly interpolated as every scripted call; the detector runs on it
    averaged down to 8 kHz), or raw PCM at 32 or 48 kHz carrying the recording's whole band
    (a polyphase resampler, as a WebRTC caller's Opus audio keeps it)."""
    caller = load_clips()["caller_topic_change"]
    agents = speech_clips("agent")[:3]
    if wire == "openai-realtime":
        turns = tuple(TurnPlan(caller, agents[i], 1200.0 + 300.0 * i) for i in range(3))
        return WirePlan(dialect="openai-realtime", send_mode="paced", turns=turns), wire
    rate = int(wire.removeprefix("raw "))
    pcm = resample_clip(caller.pcm, caller.sample_rate_hz, rate)
    caller = dataclasses.replace(caller, name=f"{caller.name}@{rate}", pcm=pcm, sample_rate_hz=rate)
    turns = tuple(TurnPlan(caller, agents[i], 400.0 + 300.0 * i) for i in range(3))
    return CallPlan(dialect="raw", send_mode="paced", turns=turns, sample_rate_hz=rate), "raw"


@pytest.mark.parametrize("wire", ["openai-realtime", "raw 32000", "raw 48000"])
def test_a_full_band_wire_publishes_a_release_the_truth_keeps(wire: str) -> None:
    # A wire at or above the recording's rate carries all of its band, so the truth keeps
    # the recording's edges there (loadgen.steps.segments_at_rate): caller_topic_change's
    # release, which hovers on the threshold for 47 ms once band-limited, is kept by the
    # truth and by the detector alike. Before, the offset's band widened by BAND_LOSS_DB on
    # every wire but 16 kHz (the detector's rate was asked, not the wire's: 8 kHz for OpenAI
    # Realtime's 24 kHz), and each of these figures was withheld as caller_edge_ambiguous
    # (57-60 ms stated).
    plan, dialect = _full_band_plan(wire)
    call = render(plan)
    receipt = measure(call, dialect)
    responses = [t for t in receipt.turns if t.kind == "response"]
    assert len(responses) == len(call.truth)
    for truth, turn in zip(call.truth, responses, strict=True):
        assert turn.ttfs_ms is not None, (wire, turn.reason, turn.ttfs_uncertainty_ms)
        assert turn.ttfs_uncertainty_ms is not None
        assert abs(turn.ttfs_ms - truth.ttfs_ns / 1e6) <= turn.ttfs_uncertainty_ms, (wire, turn)
