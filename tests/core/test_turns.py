"""The turn machine, fed hand-built talk-spurts and flushes (times in ms, converted to ns)."""

from __future__ import annotations

import textwrap

import pytest

from voxproxy.core.analysis.vad import Spurt
from voxproxy.core.errors import UsageError
from voxproxy.core.turns import (
    TRANSITIONS,
    BargeIn,
    BargeOutcome,
    FlushMark,
    StopEvidence,
    Turn,
    TurnConfig,
    TurnInput,
    TurnKind,
    TurnMachine,
    TurnPhase,
    barge_outcome,
    describe_transitions,
)

MS = 1_000_000
WINDOW_MS = 2000.0


def sp(onset_ms: float, offset_ms: float) -> Spurt:
    return Spurt(round(onset_ms * MS), round(offset_ms * MS))


def run(
    *items: tuple[str, float, float | bool], end_ms: float = 60_000
) -> tuple[TurnMachine, list[Turn]]:
    """Feed ("caller", on, off), ("agent", on, off) and ("flush", t, cut_audible) in order."""
    m = TurnMachine()
    for kind, a, b in items:
        if kind == "caller":
            m.caller_spurt(sp(a, float(b)))
        elif kind == "agent":
            m.agent_spurt(sp(a, float(b)))
        else:
            assert kind == "flush"
            m.flush(FlushMark(round(a * MS), bool(b)))
    return m, m.finish(round(end_ms * MS))


def barge_in_of_the_second_turn(*items: tuple[str, float, float | bool]) -> BargeIn:
    """The barge-in that ``run(*items)`` finds in the second turn (there must be one)."""
    _, turns = run(*items)
    b = turns[1].barge_in
    assert b is not None
    return b


def ms(ns: int | None) -> float | None:
    return None if ns is None else ns / MS


def test_a_plain_response() -> None:
    _, turns = run(("caller", 1000, 2000), ("agent", 2450, 4000))
    (t,) = turns
    assert t.kind is TurnKind.RESPONSE
    assert (ms(t.caller_onset_ns), ms(t.caller_offset_ns)) == (1000, 2000)
    assert (ms(t.agent_onset_ns), ms(t.agent_offset_ns)) == (2450, 4000)
    assert ms(t.ttfs_ns) == 450
    assert t.talk_over_ns is None and t.reprompt_ns is None and t.barge_in is None
    assert t.reason is None and t.closed and t.answered


def test_caller_spurts_before_the_answer_form_one_turn() -> None:
    _, turns = run(("caller", 1000, 2000), ("caller", 2500, 3000), ("agent", 3700, 5000))
    (t,) = turns
    assert ms(t.caller_onset_ns) == 1000
    assert ms(t.ttfs_ns) == 700  # from the offset of the last caller spurt


def test_talk_over_gives_a_negative_ttfs() -> None:
    _, turns = run(("caller", 1000, 3000), ("agent", 2500, 4000))
    (t,) = turns
    assert t.kind is TurnKind.RESPONSE
    assert ms(t.ttfs_ns) == -500
    assert ms(t.talk_over_ns) == 500


def test_talk_over_inside_the_caller_spurt() -> None:
    _, turns = run(("caller", 1000, 3000), ("agent", 1500, 2000))
    (t,) = turns
    assert ms(t.ttfs_ns) == -1500
    assert ms(t.talk_over_ns) == 500  # the agent's whole spurt


def test_sentence_pauses_stay_one_utterance() -> None:
    _, turns = run(
        ("caller", 1000, 2000),
        ("agent", 2500, 4000),
        ("agent", 4500, 6000),  # 500 ms pause
        ("agent", 6999, 8000),  # 999 ms pause, still < agent_turn_gap_ms
    )
    (t,) = turns
    assert ms(t.agent_onset_ns) == 2500
    assert ms(t.agent_offset_ns) == 8000
    assert ms(t.ttfs_ns) == 500


def test_a_long_silence_then_agent_speech_is_a_reprompt() -> None:
    _, turns = run(("caller", 1000, 2000), ("agent", 2500, 4000), ("agent", 9000, 10_000))
    first, second = turns
    assert first.kind is TurnKind.RESPONSE and ms(first.agent_offset_ns) == 4000
    assert second.kind is TurnKind.AGENT_INITIATED
    assert ms(second.reprompt_ns) == 5000
    assert second.caller_onset_ns is None and second.ttfs_ns is None
    assert (ms(second.agent_onset_ns), ms(second.agent_offset_ns)) == (9000, 10_000)
    assert second.index == 1


def test_the_gap_is_configurable_and_exclusive() -> None:
    m = TurnMachine(TurnConfig(agent_turn_gap_ms=500))
    m.caller_spurt(sp(1000, 2000))
    m.agent_spurt(sp(2500, 4000))
    m.agent_spurt(sp(4500, 5000))  # exactly the gap: a new utterance
    turns = m.finish(20_000 * MS)
    assert [t.kind for t in turns] == [TurnKind.RESPONSE, TurnKind.AGENT_INITIATED]
    assert ms(turns[1].reprompt_ns) == 500


def test_a_greeting_has_no_reprompt() -> None:
    _, turns = run(
        ("agent", 300, 2500), ("agent", 2800, 4000), ("caller", 5000, 6000), ("agent", 6400, 8000)
    )
    greeting, answer = turns
    assert greeting.kind is TurnKind.AGENT_INITIATED
    assert greeting.reprompt_ns is None
    assert (ms(greeting.agent_onset_ns), ms(greeting.agent_offset_ns)) == (300, 4000)
    assert answer.kind is TurnKind.RESPONSE
    assert ms(answer.ttfs_ns) == 400


def test_agent_speech_after_caller_speech_is_never_a_reprompt() -> None:
    _, turns = run(("agent", 300, 2500), ("caller", 20_000, 21_000), ("agent", 21_500, 23_000))
    assert [t.kind for t in turns] == [TurnKind.AGENT_INITIATED, TurnKind.RESPONSE]
    assert turns[1].reprompt_ns is None


def test_no_response_when_the_agent_stays_silent() -> None:
    _, turns = run(("caller", 1000, 2000), end_ms=10_001)
    (t,) = turns
    assert t.kind is TurnKind.NO_RESPONSE
    assert t.reason == "no_response"
    assert t.ttfs_ns is None and t.agent_onset_ns is None


def test_call_ended_before_the_timeout() -> None:
    _, turns = run(("caller", 1000, 2000), end_ms=10_000)  # exactly the timeout: not yet
    (t,) = turns
    assert t.kind is TurnKind.RESPONSE
    assert t.reason == "call_ended"
    assert t.ttfs_ns is None


def test_an_answer_after_the_timeout_is_no_response_then_agent_initiated() -> None:
    _, turns = run(("caller", 1000, 2000), ("agent", 10_001, 11_000))
    first, second = turns
    assert first.kind is TurnKind.NO_RESPONSE and first.reason == "no_response"
    assert second.kind is TurnKind.AGENT_INITIATED
    assert ms(second.agent_onset_ns) == 10_001


def test_an_answer_right_at_the_timeout_counts() -> None:
    _, turns = run(("caller", 1000, 2000), ("agent", 10_000, 11_000))
    (t,) = turns
    assert t.kind is TurnKind.RESPONSE and ms(t.ttfs_ns) == 8000


def test_new_caller_speech_after_the_timeout_closes_the_old_turn() -> None:
    _, turns = run(("caller", 1000, 2000), ("caller", 12_000, 13_000), ("agent", 13_500, 14_000))
    first, second = turns
    assert first.kind is TurnKind.NO_RESPONSE
    assert second.kind is TurnKind.RESPONSE and ms(second.ttfs_ns) == 500


def test_custom_response_timeout() -> None:
    m = TurnMachine(TurnConfig(response_timeout_ms=1000))
    m.caller_spurt(sp(1000, 2000))
    m.agent_spurt(sp(3001, 4000))
    assert [t.kind for t in m.finish(5000 * MS)] == [TurnKind.NO_RESPONSE, TurnKind.AGENT_INITIATED]


# -- barge-in ------------------------------------------------------------------------------


def test_barge_in_with_a_flush_that_cut_audible_audio() -> None:
    m, turns = run(
        ("caller", 1000, 2000),
        ("agent", 2500, 4300),  # cut by the flush
        ("caller", 4000, 5000),  # barges in
        ("flush", 4300, True),
        ("agent", 5600, 7000),
    )
    answer, barge_turn = turns
    assert answer.kind is TurnKind.RESPONSE and ms(answer.ttfs_ns) == 500
    b = barge_turn.barge_in
    assert b is not None
    assert (ms(b.onset_ns), ms(b.agent_onset_ns)) == (4000, 2500)
    assert ms(b.stop_ns()) == 4300
    assert b.evidence() is StopEvidence.FLUSH
    assert not b.in_pause
    outcome, latency = barge_outcome(b, WINDOW_MS)
    assert outcome is BargeOutcome.STOPPED and ms(latency) == 300
    assert ms(barge_turn.ttfs_ns) == 600  # the turn goes on to its own answer
    assert len(barge_turn.flushes) == 1
    # The caller spoke just before the flush: not a yield without caller speech.
    assert m.yielded_without_caller_speech == 0 and barge_turn.yielded_without_caller_speech == 0
    assert m.flushes == 1


def test_a_flush_that_only_cut_silence_stops_at_the_last_speech() -> None:
    b = barge_in_of_the_second_turn(
        ("caller", 1000, 2000),
        ("agent", 2500, 4100),
        ("caller", 4000, 5000),
        ("flush", 4300, True),  # audio (a pause) was still queued
    )
    assert ms(b.stop_ns()) == 4100
    assert b.evidence() is StopEvidence.FLUSH


def test_a_flush_that_cut_nothing_audible_does_not_set_the_stop() -> None:
    b = barge_in_of_the_second_turn(
        ("caller", 1000, 2000),
        ("agent", 2500, 4400),
        ("caller", 4000, 5000),
        ("flush", 4300, False),
    )
    assert ms(b.flush_ns) == 4300
    assert ms(b.stop_ns()) == 4400  # the audio went on to its end


def test_barge_in_without_a_flush_stops_when_the_audio_ceases() -> None:
    b = barge_in_of_the_second_turn(
        ("caller", 1000, 2000), ("agent", 2500, 4400), ("caller", 4000, 5000)
    )
    assert ms(b.stop_ns()) == 4400
    assert b.evidence() is StopEvidence.CEASED
    outcome, latency = barge_outcome(b, WINDOW_MS)
    assert outcome is BargeOutcome.STOPPED and ms(latency) == 400


def test_a_flush_outside_the_window_is_not_the_barge_in_stop() -> None:
    b = barge_in_of_the_second_turn(
        ("caller", 1000, 2000),
        ("agent", 2500, 9000),
        ("caller", 4000, 5000),
        ("flush", 6001, True),  # 2001 ms after the onset
    )
    assert b.flush_ns is None
    assert b.evidence() is StopEvidence.CEASED


def test_an_agent_that_keeps_talking_did_not_stop() -> None:
    b = barge_in_of_the_second_turn(
        ("caller", 1000, 2000), ("agent", 2500, 8000), ("caller", 4000, 5000)
    )
    outcome, latency = barge_outcome(b, WINDOW_MS)
    assert outcome is BargeOutcome.NOT_STOPPED
    assert ms(latency) == 4000


def test_an_agent_that_pauses_and_goes_on_over_the_caller_did_not_stop() -> None:
    _, turns = run(
        ("caller", 1000, 2000),
        ("agent", 2500, 4500),
        ("caller", 4000, 7000),
        ("agent", 4800, 9000),  # resumes while the caller is still talking
    )
    assert len(turns) == 2
    barge_turn = turns[1]
    b = barge_turn.barge_in
    assert b is not None
    assert ms(b.chain_end_ns) == 9000
    outcome, latency = barge_outcome(b, WINDOW_MS)
    assert outcome is BargeOutcome.NOT_STOPPED and ms(latency) == 5000
    assert barge_turn.agent_onset_ns is None  # the resumed audio is not an answer


def test_the_window_edge() -> None:
    b = barge_in_of_the_second_turn(
        ("caller", 1000, 2000), ("agent", 2500, 6000), ("caller", 4000, 5000)
    )
    assert barge_outcome(b, WINDOW_MS)[0] is BargeOutcome.STOPPED  # exactly 2000 ms
    assert barge_outcome(b, 1999.0)[0] is BargeOutcome.NOT_STOPPED


def test_barge_in_in_a_pause_that_the_agent_resumes() -> None:
    _, turns = run(
        ("caller", 1000, 2000),
        ("agent", 2500, 4000),
        ("caller", 4200, 6000),  # starts in the agent's pause
        ("agent", 4500, 5000),  # the agent resumes over the caller, then stops
    )
    assert len(turns) == 2
    b = turns[1].barge_in
    assert b is not None
    assert b.in_pause
    assert ms(b.onset_ns) == 4200
    assert ms(b.stop_ns()) == 5000
    assert b.evidence() is StopEvidence.CEASED
    outcome, latency = barge_outcome(b, WINDOW_MS)
    assert outcome is BargeOutcome.STOPPED and ms(latency) == 800


def test_caller_speech_in_a_pause_that_the_agent_does_not_resume_is_a_turn() -> None:
    _, turns = run(
        ("caller", 1000, 2000),
        ("agent", 2500, 4000),
        ("caller", 4200, 5000),
        ("agent", 5600, 7000),  # after the caller finished: an answer
    )
    second = turns[1]
    assert second.barge_in is None
    assert second.kind is TurnKind.RESPONSE and ms(second.ttfs_ns) == 600


# -- flushes without caller speech -----------------------------------------------------------


def test_a_flush_with_no_caller_speech_in_the_window_is_a_yield() -> None:
    m, turns = run(("caller", 1000, 2000), ("agent", 2500, 4000), ("flush", 4000, True))
    (t,) = turns
    assert m.yielded_without_caller_speech == 1
    assert t.yielded_without_caller_speech == 1
    assert len(t.flushes) == 1


def test_a_flush_without_any_caller_speech_is_a_yield() -> None:
    m, turns = run(("agent", 300, 2000), ("flush", 1500, True))
    assert m.yielded_without_caller_speech == 1
    assert turns[0].yielded_without_caller_speech == 1


def test_a_flush_inside_the_window_is_not_a_yield() -> None:
    m, _ = run(("caller", 1000, 2000), ("agent", 2500, 4000), ("flush", 3000, True))
    assert m.yielded_without_caller_speech == 0  # 2000 ms after the caller's onset


def test_a_flush_that_cut_nothing_is_not_a_yield() -> None:
    m, _ = run(("caller", 1000, 2000), ("agent", 2500, 4000), ("flush", 9000, False))
    assert m.yielded_without_caller_speech == 0
    assert m.flushes == 1


def test_a_flush_before_any_speech_is_counted_but_belongs_to_no_turn() -> None:
    m, turns = run(("flush", 100, False))
    assert m.flushes == 1 and turns == []


# -- the machine as a table ----------------------------------------------------------------


def test_the_docstring_draws_the_transition_table() -> None:
    drawn = textwrap.indent(describe_transitions(), " " * 8)
    assert TurnMachine.__doc__ is not None and drawn in TurnMachine.__doc__


def test_every_phase_but_finished_takes_every_input() -> None:
    for phase in TurnPhase:
        for inp in TurnInput:
            assert ((phase, inp) in TRANSITIONS) == (phase is not TurnPhase.FINISHED)


def test_phases_follow_a_barge_in() -> None:
    m = TurnMachine()
    assert m.phase is TurnPhase.START
    m.caller_spurt(sp(1000, 2000))
    assert m.phase is TurnPhase.CALLER
    m.agent_spurt(sp(2500, 4300))
    assert m.phase is TurnPhase.AGENT
    m.caller_spurt(sp(4000, 5000))
    assert m.phase is TurnPhase.BARGE_IN
    m.flush(FlushMark(4300 * MS, True))
    assert m.phase is TurnPhase.BARGE_IN
    m.agent_spurt(sp(5600, 7000))
    assert m.phase is TurnPhase.AGENT
    m.finish(8000 * MS)
    assert m.phase is TurnPhase.FINISHED


def test_caller_speech_in_an_agent_pause_has_its_own_phase() -> None:
    m = TurnMachine()
    m.agent_spurt(sp(0, 1000))
    m.caller_spurt(sp(1200, 2500))  # in the pause: the agent may resume over it
    assert m.phase is TurnPhase.CALLER_IN_PAUSE
    m.agent_spurt(sp(1800, 3000))  # it does, while the caller talks: a barge-in
    assert m.phase is TurnPhase.BARGE_IN
    (_, turn) = m.finish(10_000 * MS)
    assert turn.barge_in is not None and turn.barge_in.in_pause


def test_input_out_of_time_order_names_the_phase_the_input_and_its_time() -> None:
    m = TurnMachine()
    m.caller_spurt(sp(1000, 2000))
    with pytest.raises(UsageError) as err:
        m.agent_spurt(sp(900, 1500))
    assert str(err.value) == (
        "TurnMachine: agent_spurt at 900000000 ns in phase caller is out of time order "
        "(the input before it was at 1000000000 ns)"
    )
    with pytest.raises(UsageError, match="flush at 999000000 ns in phase caller"):
        m.flush(FlushMark(999 * MS, False))
    assert m.phase is TurnPhase.CALLER  # a refused input changes nothing
    m.agent_spurt(sp(1000, 1500))  # the same time as the last input is in order
    assert m.phase is TurnPhase.AGENT


def test_input_after_finish_is_refused() -> None:
    m = TurnMachine()
    m.caller_spurt(sp(1000, 2000))
    turns = m.finish(3000 * MS)
    with pytest.raises(UsageError, match="caller_spurt at 4000000000 ns in phase finished"):
        m.caller_spurt(sp(4000, 5000))
    with pytest.raises(UsageError, match="finish in phase finished"):
        m.finish(5000 * MS)
    assert len(turns) == 1 and turns[0].reason == "call_ended"


def test_not_strict_a_late_input_is_taken_and_counted() -> None:
    m = TurnMachine(strict=False)
    m.flush(FlushMark(2000 * MS, False))
    m.caller_spurt(sp(1000, 1500))  # a burst after a stall: audio from before the flush
    m.agent_spurt(sp(1700, 2500))
    assert m.late_inputs == 2  # both are earlier than the flush
    (t,) = m.finish(5000 * MS)
    assert ms(t.ttfs_ns) == 200
    with pytest.raises(UsageError, match="in phase finished"):
        m.flush(FlushMark(6000 * MS, False))
