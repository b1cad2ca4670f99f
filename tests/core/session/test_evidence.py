"""When a figure's edges are not speech edges one can publish, and how uncertain a
figure is: session/evidence.py on spans passed in (no audio)."""

from __future__ import annotations

from voxproxy.core.analysis.vad import Spurt, VadConfig
from voxproxy.core.analysis.vadconfig import NEVER_QUIET_NS
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT
from voxproxy.core.session.evidence import (
    FIGURE_BASE_MS,
    NOISY_FIGURE_BASE_MS,
    Evidence,
)

MS = 1_000_000
S = 1_000 * MS
VAD = VadConfig()


def _evidence(max_uncertainty_ms: float = 50.0, lag_ns: int = 0) -> Evidence:
    return Evidence(VAD, max_uncertainty_ms, (lambda a, b: lag_ns) if lag_ns else None)


def test_clean_edges_are_published_with_the_detector_s_own_uncertainty() -> None:
    ev = _evidence()
    ev.note_spurt(CALLER_TO_AGENT, Spurt(1 * S, 2 * S))
    ev.note_spurt(AGENT_TO_CALLER, Spurt(3 * S, 4 * S))
    ev.judge_busy()
    assert ev.withheld(2 * S, 3 * S) is None
    assert ev.uncertainty_ms(2 * S, 3 * S) == FIGURE_BASE_MS


def test_an_edge_inside_a_never_quiet_spurt_is_withheld() -> None:
    ev = _evidence()
    bed = Spurt(0, NEVER_QUIET_NS + S)
    assert bed.never_quiet
    ev.note_spurt(CALLER_TO_AGENT, bed)
    ev.judge_busy()
    assert ev.withheld(5 * S, None) == "caller_never_quiet"
    assert ev.withheld(NEVER_QUIET_NS + 2 * S, None) is None  # after the bed
    assert ev.withheld(None, 5 * S) is None  # the agent's side is not the caller's


def test_shed_audio_withholds_figures_within_its_margin_only() -> None:
    ev = _evidence()
    ev.note_shed(AGENT_TO_CALLER, 10 * S, 11 * S)
    assert ev.withheld(9 * S, 9 * S + 500 * MS) == "measurement_shed"  # 0.5 s before it
    assert ev.withheld(13 * S, 14 * S) == "measurement_shed"  # 2 s after it, at the margin
    assert ev.withheld(14 * S, 15 * S) is None
    assert ev.shed_between(5 * S, after_ns=5 * S)  # the shed span falls in the window after


def test_an_edge_at_unanalysed_audio_is_withheld_within_a_merge_gap() -> None:
    ev = _evidence()
    ev.note_unheard(CALLER_TO_AGENT, 10 * S, 10 * S)
    margin = int((VAD.merge_gap_ms + VAD.frame_ms) * MS)
    assert ev.withheld(10 * S + margin, None) == "caller_unanalysed"
    assert ev.withheld(10 * S + margin + 1, None) is None
    assert ev.withheld(None, 10 * S) is None  # the agent heard all of its own


def test_unanalysed_spans_close_together_are_kept_as_one() -> None:
    ev = _evidence()
    ev.note_unheard(AGENT_TO_CALLER, 1 * S, 2 * S)
    ev.note_unheard(AGENT_TO_CALLER, 2 * S + 50 * MS, 3 * S)  # 50 ms later: joined
    margin = int((VAD.merge_gap_ms + VAD.frame_ms) * MS)
    assert ev.unheard_near(AGENT_TO_CALLER, 2 * S + 25 * MS)  # inside the join
    assert ev.unheard_near(AGENT_TO_CALLER, 3 * S + margin)
    assert not ev.unheard_near(AGENT_TO_CALLER, 3 * S + margin + 1)


def test_a_caller_active_under_most_of_the_agent_s_speech_is_never_quiet() -> None:
    ev = _evidence()
    ev.note_spurt(AGENT_TO_CALLER, Spurt(0, 2 * S))
    ev.note_spurt(CALLER_TO_AGENT, Spurt(100 * MS, 1_500 * MS))  # 70 % of the agent's speech
    ev.judge_busy()
    assert not ev.quiet_at(CALLER_TO_AGENT, 3 * S)
    assert ev.withheld(3 * S, 4 * S) == "caller_never_quiet"
    barge = _evidence()
    barge.note_spurt(AGENT_TO_CALLER, Spurt(0, 2 * S))
    barge.note_spurt(CALLER_TO_AGENT, Spurt(1_500 * MS, 1_900 * MS))  # 20 %: a barge-in
    barge.judge_busy()
    assert barge.quiet_at(CALLER_TO_AGENT, 3 * S)


def test_noise_and_level_ambiguity_add_to_the_uncertainty_and_name_the_reason() -> None:
    ev = _evidence()
    ev.note_spurt(CALLER_TO_AGENT, Spurt(1 * S, 2 * S, masked_offset_ms=30.0))
    ev.note_spurt(AGENT_TO_CALLER, Spurt(3 * S, 4 * S, ambiguous_onset_ms=25.0))
    ev.judge_busy()
    # A figure with an edge over a bed keeps NOISY_FIGURE_BASE_MS.
    base = NOISY_FIGURE_BASE_MS
    assert base > FIGURE_BASE_MS
    assert ev.uncertainty_ms(2 * S, 3 * S) == base + 30.0 + 25.0
    assert ev.withheld(2 * S, 3 * S) == "caller_noise"  # over 50 ms; noise the largest share
    assert ev.withheld(2 * S, 4 * S) is None  # the agent's offset is steep and clean
    loose = _evidence(max_uncertainty_ms=base + 55.0)
    loose.note_spurt(CALLER_TO_AGENT, Spurt(1 * S, 2 * S, masked_offset_ms=30.0))
    loose.note_spurt(AGENT_TO_CALLER, Spurt(3 * S, 4 * S, ambiguous_onset_ms=25.0))
    assert loose.withheld(2 * S, 3 * S) is None  # at the bound, not over it


def test_late_clock_readings_near_the_edges_withhold_as_clock_lag() -> None:
    ev = _evidence(lag_ns=25 * MS)  # each edge's readings ran up to 25 ms late
    assert ev.lag_ms(2 * S, 3 * S) == 50.0
    assert ev.uncertainty_ms(2 * S, 3 * S) == FIGURE_BASE_MS + 50.0
    assert ev.withheld(2 * S, 3 * S) == "clock_lag"
    assert _evidence().withheld(2 * S, 3 * S) is None  # the same edges, no lag


def test_a_block_after_the_agents_edge_cannot_move_it_one_after_the_callers_can() -> None:
    """The loop blocked 30 ms, 200 ms after an edge. A caller's chunk is heard up to its
    arrival, so a stamp there may place a caller edge 200 ms before it; an agent's chunk
    plays from its arrival or after the audio before it, so no later stamp moves the
    agent's edge (a bursting agent's burst, read late in one go after its onset)."""
    block = (200 * MS, 30 * MS)  # (after the edge, length)

    def lag_after(edge_ns: int) -> Evidence:
        end = edge_ns + block[0]

        def clock_lag(start_ns: int, end_ns: int) -> int:
            return block[1] if end - block[1] <= end_ns and end >= start_ns else 0

        return Evidence(VAD, 50.0, clock_lag)

    assert lag_after(2 * S).lag_ms(2 * S, None) == 30.0
    assert lag_after(3 * S).lag_ms(None, 3 * S) == 0.0
    assert lag_after(3 * S).uncertainty_ms(2 * S, 3 * S) == FIGURE_BASE_MS
    # ... while a block just before the agent's edge (its anchor's read) still counts.
    ev = Evidence(VAD, 50.0, lambda a, b: 30 * MS if a <= 3 * S - 20 * MS <= b else 0)
    assert ev.lag_ms(None, 3 * S) == 30.0


def test_downstream_jitter_widens_the_agent_edge_only_and_names_its_reason() -> None:
    """What the caller's jitter buffer may add beyond the declared offset counts at the
    agent's edge (the figure's second), never at the caller's."""
    seen: list[int] = []

    def downstream(t_ns: int) -> float:
        seen.append(t_ns)
        return 30.0

    ev = Evidence(VAD, 50.0, None, downstream)
    assert ev.uncertainty_ms(2 * S, 3 * S) == FIGURE_BASE_MS + 30.0
    assert seen and set(seen) == {3 * S}
    assert ev.uncertainty_ms(2 * S, None) == FIGURE_BASE_MS
    assert ev.withheld(2 * S, 3 * S) is None
    tight = Evidence(VAD, FIGURE_BASE_MS + 29.0, None, downstream)
    assert tight.withheld(2 * S, 3 * S) == "downstream_jitter"


def test_a_figure_withheld_for_noise_bounds_the_truth_only_over_a_steady_bed() -> None:
    # Noise over a steady bed (the detector read the edge against a bed that dips little:
    # Spurt.steady_offset) leaves a span that holds the truth; noise that swells does not,
    # nor a shed; an edge too uncertain to publish in quiet always does.
    def evidence(steady: bool) -> Evidence:
        ev = _evidence()
        ev.note_spurt(
            CALLER_TO_AGENT, Spurt(1 * S, 2 * S, masked_offset_ms=120.0, steady_offset=steady)
        )
        ev.note_spurt(AGENT_TO_CALLER, Spurt(3 * S, 4 * S))
        ev.judge_busy()
        return ev

    steady, swelling = evidence(True), evidence(False)
    assert steady.withheld(2 * S, 3 * S) == swelling.withheld(2 * S, 3 * S) == "caller_noise"
    assert steady.bounds(2 * S, 3 * S) and not swelling.bounds(2 * S, 3 * S)
    # An agent's edge noise may hide, not read over a steady bed, takes the bound away.
    both = _evidence()
    both.note_spurt(
        CALLER_TO_AGENT, Spurt(1 * S, 2 * S, masked_offset_ms=120.0, steady_offset=True)
    )
    both.note_spurt(AGENT_TO_CALLER, Spurt(3 * S, 4 * S, masked_onset_ms=20.0))
    both.judge_busy()
    assert both.withheld(2 * S, 3 * S) == "caller_noise" and not both.bounds(2 * S, 3 * S)
    shed = evidence(True)
    shed.note_shed(CALLER_TO_AGENT, 2 * S - 10 * MS, 2 * S)
    assert shed.withheld(2 * S, 3 * S) == "measurement_shed" and not shed.bounds(2 * S, 3 * S)
    ambiguous = _evidence()
    ambiguous.note_spurt(CALLER_TO_AGENT, Spurt(1 * S, 2 * S, ambiguous_offset_ms=60.0))
    ambiguous.note_spurt(AGENT_TO_CALLER, Spurt(3 * S, 4 * S))
    ambiguous.judge_busy()
    assert ambiguous.withheld(2 * S, 3 * S) == "caller_edge_ambiguous"
    assert ambiguous.bounds(2 * S, 3 * S)
    assert _evidence().bounds(2 * S, 3 * S) is False  # published: nothing to bound
