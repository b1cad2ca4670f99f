"""A closed call's receipt from what its session hands over (``voxproxy/core/session/
receipt.py``): :func:`build_receipt` on handed-in turns, counters and evidence, no
session. Figures are ms from the call's start; the evidence rules withhold a figure,
with its reason, where the edges it stands on are not speech edges one can trust."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from voxproxy.core.analysis.vadconfig import NEVER_QUIET_NS, Spurt
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT, ToolEvent
from voxproxy.core.ids import keyed_hash
from voxproxy.core.receipt import CloseInfo, Receipt
from voxproxy.core.session.config import SessionConfig
from voxproxy.core.session.evidence import (
    FIGURE_BASE_MS,
    NOISY_FIGURE_BASE_MS,
    Evidence,
)
from voxproxy.core.session.receipt import ReceiptInputs, build_receipt
from voxproxy.core.timebase import NS_PER_MS, NS_PER_S, EpochAnchor
from voxproxy.core.turns import BargeIn, Turn, TurnKind

MS = NS_PER_MS
START = 5 * NS_PER_S  # the call's start on the shell's monotonic clock
CONFIG = SessionConfig()


def at(ms: float) -> int:
    """``ms`` after the call's start, on the monotonic clock."""
    return START + int(ms * MS)


def evidence() -> Evidence:
    return Evidence(CONFIG.vad, CONFIG.max_uncertainty_ms)


def inputs(ev: Evidence | None = None, **changes: Any) -> ReceiptInputs:
    base = ReceiptInputs(
        config=CONFIG,
        start_ns=START,
        anchor=EpochAnchor(mono_ns=START, wall_ns=1_735_689_600 * NS_PER_S),  # 2025-01-01
        secret=b"s" * 32,
        link_id="link-1",
        wire_call_id_hash=None,
        upstream_connected_ns=at(40),
        evidence=ev or evidence(),
        caller_chunks_ns=[20 * MS, 20 * MS, 40 * MS],
        caller_unanalysed_ns=0,
        agent_unanalysed_ns=0,
        flushes=0,
        yielded_without_caller_speech=0,
        caller_noise_events=0,
        mark_errors_ns=[],
        marks_cleared=0,
        agent_audio_dropped_ns=0,
        messages=[10, 12],
        wire_bytes=[3200, 4800],
        audio_ns=[200 * MS, 300 * MS],
        anomalies=Counter(),
        wire_looks_like=None,
        measurement_disabled=False,
        tool_events=[],
        stages=[],
        truncations=[],
    )
    return dataclasses.replace(base, **changes)


def answer(index: int, caller: tuple[float, float], agent: tuple[float, float]) -> Turn:
    """A caller turn and the agent's answer to it, times in ms from the call's start."""
    return Turn(
        index=index,
        kind=TurnKind.RESPONSE,
        caller_onset_ns=at(caller[0]),
        caller_offset_ns=at(caller[1]),
        agent_onset_ns=at(agent[0]),
        agent_offset_ns=at(agent[1]),
        ttfs_ns=at(agent[0]) - at(caller[1]),
        closed=True,
    )


def receipt(s: ReceiptInputs, turns: list[Turn], end_ms: float = 10_000) -> Receipt:
    return build_receipt(s, at(end_ms), "completed", CloseInfo(initiator="caller"), turns, "raw")


def test_figures_are_ms_from_the_call_s_start_and_the_summary_is_over_the_turns() -> None:
    turns = [
        answer(0, (500, 1500), (2100, 3000)),
        answer(1, (4000, 5000), (6200, 7000)),
        Turn(2, TurnKind.NO_RESPONSE, at(8000), at(8500), reason="no_response", closed=True),
    ]
    r = receipt(inputs(), turns)
    first = r.turns[0]
    assert (first.caller_onset_ms, first.caller_offset_ms) == (500.0, 1500.0)
    assert (first.agent_onset_ms, first.agent_offset_ms, first.ttfs_ms) == (2100.0, 3000.0, 600.0)
    assert first.ttfs_uncertainty_ms == FIGURE_BASE_MS and first.reason is None
    assert r.turns[2].kind == "no_response" and r.turns[2].ttfs_ms is None
    s = r.summary
    assert (s.turns, s.responses, s.no_responses) == (3, 2, 1)
    assert (s.ttfs_ms_median, s.ttfs_ms_max) == (900.0, 1200.0)
    assert r.duration_ms == 10_000.0 and r.upstream_connect_ms == 40.0
    assert r.started_at == "2025-01-01T00:00:00.000Z"
    assert r.settings.caller_frame_ms == 20.0  # the median message
    assert (r.traffic.caller_to_agent_messages, r.traffic.agent_to_caller_bytes) == (10, 4800)
    assert (r.traffic.caller_audio_ms, r.traffic.agent_audio_ms) == (200.0, 300.0)


def test_the_call_id_is_the_wire_s_hashed_id_else_the_link_id_keyed() -> None:
    ours = receipt(inputs(), [])
    assert ours.call == keyed_hash(b"s" * 32, "link-1", "c_")
    assert ours.call_id_source == "proxy"
    wired = receipt(inputs(wire_call_id_hash="c_0123456789abcdef"), [])
    assert (wired.call, wired.call_id_source) == ("c_0123456789abcdef", "wire")


def test_a_wire_that_looks_like_another_dialect_is_an_anomaly() -> None:
    plain = receipt(inputs(anomalies=Counter({"late_audio": 2})), [])
    assert plain.anomalies == {"late_audio": 2} and plain.wire_looks_like is None
    odd = receipt(inputs(anomalies=Counter({"late_audio": 2}), wire_looks_like="twilio"), [])
    assert odd.anomalies == {"dialect_mismatch": 1, "late_audio": 2}
    assert odd.wire_looks_like == "twilio"


def test_a_time_to_first_sound_next_to_shed_audio_is_withheld() -> None:
    ev = evidence()
    ev.note_shed(AGENT_TO_CALLER, at(1800), at(1900))
    late = answer(1, (20_000, 21_000), (21_600, 22_000))  # far from what was shed
    r = receipt(inputs(ev), [answer(0, (500, 1500), (2100, 3000)), late], end_ms=30_000)
    shed, kept = r.turns
    assert shed.ttfs_ms is None and shed.reason == "measurement_shed"
    assert shed.talk_over_ms is None
    assert kept.ttfs_ms == 600.0 and kept.reason is None
    assert r.summary.ttfs_ms_max == 600.0  # a withheld figure is in no summary


def test_shed_audio_inside_a_long_caller_turn_withholds_its_answer_s_figure() -> None:
    # Far (over 2 s) from both edges the figure stands on, but inside the caller's turn:
    # its caller spurts may be grouped anew, so the turn's offset may move.
    ev = evidence()
    ev.note_shed(CALLER_TO_AGENT, at(1000), at(1100))
    long = answer(0, (500, 10_000), (10_600, 11_000))
    (t,) = receipt(inputs(ev), [long], end_ms=30_000).turns
    assert t.ttfs_ms is None and t.reason == "measurement_shed"


def test_a_no_response_is_withheld_when_the_answer_may_have_come_in_shed_audio() -> None:
    timeout = CONFIG.turns.response_timeout_ms

    def no_response(shed_ms: float) -> str | None:
        ev = evidence()
        ev.note_shed(AGENT_TO_CALLER, at(shed_ms), at(shed_ms + 50))
        turn = Turn(0, TurnKind.NO_RESPONSE, at(500), at(1500), reason="no_response")
        (t,) = receipt(inputs(ev), [turn], end_ms=60_000).turns
        return t.reason

    assert no_response(1500 + timeout) == "measurement_shed"  # in the wait for an answer
    assert no_response(1500 + timeout + 3000) == "no_response"  # past it and the margin


def test_a_caller_who_never_went_quiet_has_no_speech_edges() -> None:
    ev = evidence()
    bed = Spurt(at(0), at(0) + NEVER_QUIET_NS + 1)
    ev.note_spurt(CALLER_TO_AGENT, bed)
    (t,) = receipt(inputs(ev), [answer(0, (500, 1500), (2100, 3000))], end_ms=30_000).turns
    assert t.caller_onset_ms is None and t.caller_offset_ms is None
    assert t.agent_onset_ms == 2100.0  # the agent's edges stand
    assert t.ttfs_ms is None and t.reason == "caller_never_quiet"


def test_noise_over_an_edge_beyond_the_limit_withholds_the_figure_naming_the_noise() -> None:
    ev = evidence()
    # The agent's onset over a bed: the figure keeps NOISY_FIGURE_BASE_MS.
    base = NOISY_FIGURE_BASE_MS
    over = CONFIG.max_uncertainty_ms - base + 1
    ev.note_spurt(AGENT_TO_CALLER, Spurt(at(2100), at(3000), masked_onset_ms=over))
    (t,) = receipt(inputs(ev), [answer(0, (500, 1500), (2100, 3000))]).turns
    assert t.ttfs_ms is None and t.reason == "agent_noise"
    assert t.ttfs_uncertainty_ms == base + over  # still said
    ev = evidence()
    ev.note_spurt(AGENT_TO_CALLER, Spurt(at(2100), at(3000), masked_onset_ms=over - 2))
    (t,) = receipt(inputs(ev), [answer(0, (500, 1500), (2100, 3000))]).turns
    assert t.ttfs_ms == 600.0 and t.ttfs_uncertainty_ms == base + over - 2


def _barged() -> list[Turn]:
    cut = BargeIn(onset_ns=at(2500), agent_onset_ns=at(2100), chain_end_ns=at(2800))
    second = answer(1, (2500, 3200), (3800, 4500))
    second.barge_in = cut
    return [answer(0, (500, 1500), (2100, 2800)), second]


def test_a_barge_in_s_stop_latency_and_outcome() -> None:
    r = receipt(inputs(), _barged())
    b = r.turns[1].barge_in
    assert b is not None and r.turns[0].barge_in is None
    assert (b.onset_ms, b.stop_ms, b.stop_latency_ms) == (2500.0, 2800.0, 300.0)
    assert b.outcome == "stopped" and b.evidence == "ceased" and b.ambiguous and b.reason is None
    assert (r.summary.barge_ins, r.summary.barge_ins_stopped) == (1, 1)
    assert r.summary.stop_latency_ms_max == 300.0


def test_a_barge_in_whose_stop_may_lie_in_shed_audio_is_unknown() -> None:
    # Shed between the onset and the stop, or so far after the stop that only the
    # barge-in window (2 s by default) past the edges reaches it: the stop may lie there.
    window = CONFIG.turns.barge_in_window_ms
    for shed_ms in (2600, 2800 + 2000 + window - 100):
        ev = evidence()
        ev.note_shed(CALLER_TO_AGENT, at(shed_ms), at(shed_ms + 50))
        b = receipt(inputs(ev), _barged(), end_ms=30_000).turns[1].barge_in
        assert b is not None
        assert (b.stop_ms, b.stop_latency_ms, b.outcome, b.reason) == (
            None,
            None,
            "unknown",
            "measurement_shed",
        ), shed_ms
        assert b.onset_ms == 2500.0  # the barge-in itself was heard
    ev = evidence()
    ev.note_shed(CALLER_TO_AGENT, at(2800 + 2000 + window + 100), at(2800 + 2000 + window + 200))
    b = receipt(inputs(ev), _barged(), end_ms=30_000).turns[1].barge_in
    assert b is not None and b.outcome == "stopped" and b.stop_latency_ms == 300.0


def test_an_answer_under_a_bed_near_the_caller_s_level_could_have_been_talked_over() -> None:
    ev = evidence()
    ev.note_masked(CALLER_TO_AGENT, [(at(2200), at(2400))])
    talked_over, barging = receipt(inputs(ev), _barged()).turns
    assert talked_over.barge_in_unheard is None  # a barge-in was heard on it
    assert barging.barge_in_unheard is None  # its answer (3800-4500 ms) was clear
    ev = evidence()
    ev.note_masked(CALLER_TO_AGENT, [(at(3800), at(4300))])  # 500 of its 700 ms
    (t,) = receipt(inputs(ev), [answer(0, (500, 1500), (3800, 4500))]).turns
    assert t.barge_in_unheard == "caller_noise" and t.ttfs_ms == 2300.0
    # A bed that came near the caller's level for a moment of the answer (a 10 dB bed
    # whose level estimate wandered): a barge-in there would have been heard.
    ev = evidence()
    ev.note_masked(CALLER_TO_AGENT, [(at(4000), at(4100))])  # 100 of its 700 ms
    (t,) = receipt(inputs(ev), [answer(0, (500, 1500), (3800, 4500))]).turns
    assert t.barge_in_unheard is None


def test_a_reprompt_is_withheld_when_the_caller_could_have_spoken_unheard() -> None:
    def reprompt(ev: Evidence) -> tuple[float | None, str | None]:
        turn = Turn(
            0,
            TurnKind.AGENT_INITIATED,
            agent_onset_ns=at(9000),
            agent_offset_ns=at(9500),
            reprompt_ns=4000 * MS,
            closed=True,
        )
        (t,) = receipt(inputs(ev), [turn], end_ms=30_000).turns
        return t.reprompt_ms, t.reason

    assert reprompt(evidence()) == (4000.0, None)
    masked = evidence()
    masked.note_masked(CALLER_TO_AGENT, [(at(8990), at(9010))])
    assert reprompt(masked) == (None, "caller_noise")
    shed = evidence()
    shed.note_shed(CALLER_TO_AGENT, at(6000), at(6100))  # inside the 4 s of silence
    assert reprompt(shed) == (None, "measurement_shed")
    noisy = evidence()
    noisy.note_spurt(CALLER_TO_AGENT, Spurt(at(0), at(0) + NEVER_QUIET_NS + 1))
    assert reprompt(noisy) == (None, "caller_never_quiet")


def test_tools_belong_to_the_turn_they_started_in_and_effects_are_counted() -> None:
    events = [
        ToolEvent("tool.started", at(2500), operation_id="op1", tool="lookup", args_hash="h_a"),
        ToolEvent("tool.finished", at(2900), operation_id="op1", status="ok"),
        ToolEvent("tool.started", at(4500), operation_id="op2", tool="send", args_hash="h_b"),
    ]
    turns = [answer(0, (500, 1500), (2100, 3000)), answer(1, (4000, 5000), (6200, 7000))]
    r = receipt(inputs(tool_events=list(reversed(events))), turns)
    assert [(t.tool, t.turn, t.started_ms) for t in r.tools] == [
        ("lookup", 0, 2500.0),
        ("send", 1, 4500.0),
    ]
    assert r.tools[0].latency_ms == 400.0 and r.tools[1].finished_ms is None
    assert [t.tool_calls for t in r.turns] == [1, 1]
    assert [e.t_ms for e in r.events] == [2500.0, 2900.0, 4500.0]  # in time order
    assert r.effects is not None and r.effects.tool_calls == 2
    assert receipt(inputs(), turns).effects is None  # no events: no effects at all


def test_marks_and_truncations_are_compared_with_the_playout_model() -> None:
    s = inputs(
        mark_errors_ns=[10 * MS, -30 * MS, 5 * MS],
        marks_cleared=2,
        truncations=[(at(2500), 380.0, 400 * MS), (at(9000), 100.0, None)],
    )
    r = receipt(s, [answer(0, (500, 1500), (2100, 3000))])
    assert (r.marks.checked, r.marks.cleared) == (3, 2)
    assert (r.marks.mean_error_ms, r.marks.max_abs_error_ms) == (-5.0, 30.0)
    first, second = r.truncations
    assert (first.t_ms, first.turn, first.modelled_played_ms, first.diff_ms) == (
        2500.0,
        0,
        400.0,
        -20.0,
    )
    assert second.modelled_played_ms is None and second.diff_ms is None
    quiet = receipt(inputs(), [])
    assert quiet.marks.mean_error_ms is None and quiet.settings.caller_frame_ms == 20.0
    assert receipt(inputs(caller_chunks_ns=[]), []).settings.caller_frame_ms is None
