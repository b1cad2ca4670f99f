"""The scripted calls' ground truth (``support.scripted.render``)."""

from __future__ import annotations

from support.spacekit import SpaceCase, clip_named, render_case

from voxproxy.core.analysis.truth import MIN_SPEECH_MS

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
