"""The scripted calls' ground truth (``support.scripted.render``)."""

from __future__ import annotations

import numpy as np
from support.spacekit import SpaceCase, clip_named, render_case

from voxproxy.core.analysis.truth import MIN_SPEECH_MS, speech_edges, truth_threshold_dbfs

AGENT = "agent_long_answer"  # speech 250-1626 ms, a 316 ms pause, speech again from 1942


def stop_after_onset_ms(reaction_ms: float) -> float:
    """The true stop of ``AGENT``'s answer flushed ``reaction_ms`` after a barge-in 987 ms
    into it, in ms after the answer's true onset."""
    case = SpaceCase(
        wire=("raw", 16000),
        send_mode="paced",
        chunk_ms=20,
        speedup=1.0,
        agents=(AGENT, "agent_confirm"),
        callers=("caller_where_is_order", "caller_interrupt"),
        delays_ms=(600.0, 700.0),
        barge=(987.0, reaction_ms, "flush"),
        seed=0,
    )
    call, _ = render_case(case)
    truth = call.truth[0]
    assert truth.stop_ns is not None
    return (truth.stop_ns - truth.agent_onset_ns) / 1e6


def test_a_few_ms_of_speech_after_a_pause_before_the_flush_are_a_click() -> None:
    """The truth rule (runs shorter than MIN_SPEECH_MS dropped) applies to what played, as
    in the live calls' truth (``loadgen.truth``): a flush 40 ms after the answer resumed
    from its pause ends the speech before the pause. It took the flush (-355 ms errors
    charged to the proxy, which was right)."""
    segments = clip_named(AGENT).segments_ms
    first_end = segments[0][1] - segments[0][0]  # 1376 ms after the onset
    resumed = segments[1][0] - segments[0][0]  # 1692 ms
    flush_at = 987.0 + 745.0
    assert 0 < flush_at - resumed < MIN_SPEECH_MS
    assert abs(stop_after_onset_ms(745.0) - first_end) <= 2.0
    # Cut inside the first run: the flush ends it; once the resumed speech has run longer
    # than a click, it does too (or its last speech window, a dip a few ms before it).
    assert abs(stop_after_onset_ms(300.0) - (987.0 + 300.0)) <= 2.0
    assert -5.0 <= stop_after_onset_ms(745.0 + 40.0) - (flush_at + 40.0) <= 2.0


def _carried_offset_ms(name: str) -> tuple[float, float]:
    """``name``'s true offset on its 16 kHz recording, and in its audio averaged down to
    8 kHz (what a Twilio caller sends, before mu-law), by the truth rule at the
    recording's level (read here independently of the renderer)."""
    clip = clip_named(name)
    threshold = truth_threshold_dbfs(clip.pcm, clip.sample_rate_hz)
    pairs = clip.pcm[: clip.pcm.size // 2 * 2].astype(np.int32).reshape(-1, 2)
    at_8k = pairs.mean(axis=1).astype(np.int16)
    edges = speech_edges(at_8k, 8000, threshold_dbfs=threshold)
    return clip.offset_ms, edges[-1][1]


def test_the_callers_truth_is_read_from_the_audio_the_wire_carries() -> None:
    """On an 8 kHz wire the caller's truth is read from the 8 kHz audio it sends, not from
    its 16 kHz recording: ``caller_topic_change`` ends on an affricate whose energy lies
    mostly above 4 kHz, so its release ends tens of ms earlier on Twilio. The renderer
    took the recording's edges on every wire (the detector read that release "late")."""
    recorded, carried = _carried_offset_ms("caller_topic_change")
    assert recorded - carried > 20.0  # (what makes this clip the case)
    for wire, offset in ((("twilio", 8000), carried), (("raw", 16000), recorded)):
        case = SpaceCase(
            wire=wire,
            send_mode="paced",
            chunk_ms=20,
            speedup=1.0,
            agents=("agent_confirm",),
            callers=("caller_topic_change",),
            delays_ms=(600.0,),
            barge=None,
            seed=0,
        )
        call, _ = render_case(case)
        lead_ms = 500.0  # CallPlan's default: the caller's first clip starts there
        assert abs(call.truth[0].caller_offset_ns / 1e6 - lead_ms - offset) <= 1.0, wire
