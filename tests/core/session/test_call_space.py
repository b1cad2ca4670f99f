"""The figures over the space of agents and wires, not the project's own mock agent.

Scripted calls on the fake clock (:mod:`spacekit`): voices from espeak-ng, flite and
festival besides the project's clips, -40 to -6 dBFS, streams that start directly on
speech or carry their own silence, a harmonic complex that never goes quiet, chunks
from 10 ms to 2 s, bursts up to 50x real time, raw PCM at 8/16/24/48 kHz, mu-law and
A-law. The truth of every edge is known; each test compares what the session measured.

Measured (60 random cases, seed 5, 180 turns): talkers at -30 dBFS or louder, |ttfs
error| p95 9.9 ms; quieter talkers (festival and flite voices at -31..-40 dBFS, whose
synthesizers put breath and noise near the truth threshold of level - 35 dB) p95 71 ms,
down from 150 once the level is P.56's rule read from frames and the onset is walked
again at the whole utterance's level. What remains: mu-law and A-law quantize a -40 dBFS
talker's soft edges away (the truth is taken on the clean clip), and an answer cut after
a few hundred ms by a barge-in gives a level a few dB off the whole recording's.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.groundtruth import Errors, barge_point_ms, score, truth_phase_spread_ms
from support.scripted import ScriptedCall
from support.spacekit import (
    WIRES,
    SpaceCase,
    agent_pool,
    caller_pool,
    clip_named,
    measure_case,
    random_case,
    render_case,
    withheld_for_the_truth,
)

from voxproxy.clips import Clip
from voxproxy.core.receipt import Receipt
from voxproxy.core.session import SessionConfig

LOUD_DBFS = -30.0  # both talkers at least this loud: the bounds of the contract hold


def _loud(case: SpaceCase, i: int) -> bool:
    levels = [clip_named(case.agents[i]).level_dbfs, clip_named(case.callers[i]).level_dbfs]
    return all(v is None or v >= LOUD_DBFS for v in levels)


WITHHELD_FOR_NOISE = ("(caller_noise)", "(agent_noise)")


def _withheld_quiet(case: SpaceCase, problem: str) -> bool:
    """A figure withheld because a quiet talker's edges lie under a codec's noise (A-law
    and mu-law quantize -40 dBFS speech's soft edges away): said, not missed. For talkers
    at -30 dBFS or louder nothing may be withheld."""
    if not problem.endswith(WITHHELD_FOR_NOISE):
        return False
    turn = int(problem.rsplit(" turn ", 1)[1].split(":")[0])
    return not _loud(case, turn)


def test_an_agent_that_is_never_quiet_is_measured() -> None:
    """Issue 13, item 2: a harmonic complex on a wandering ~140 Hz pitch whose envelope
    never drops below 0.35 of its peak, at -20 dBFS, sent only while the agent speaks.
    The caller hears silence between the answers; so does the detector."""
    rng = random.Random(3)
    errors = Errors([], [], [])
    callers = ["caller_hello", "caller_yes", "caller_where_is_order", "espeak_es_f2_caller"]
    for k in range(8):
        mode = ("paced", "burst")[k % 2]
        case = SpaceCase(
            wire=("raw", 16000),
            send_mode=mode,
            chunk_ms=20 if mode == "paced" else 200,
            speedup=10.0,
            agents=("synth_harmonic_trimmed",) * 4,
            callers=tuple(rng.choice(callers) for _ in range(4)),
            delays_ms=tuple(rng.uniform(300, 2000) for _ in range(4)),
            barge=(rng.uniform(300, 1500), rng.uniform(60, 400), "flush"),
            seed=k,
        )
        call, dialect = render_case(case)
        receipt = measure_case(call, dialect)
        assert receipt.anomalies == {}, receipt.anomalies
        score(call, receipt, errors, case.label())
    assert not errors.problems, errors.problems
    assert len(errors.ttfs) == 32 and len(errors.stop) == 8
    ttfs_p95, ttfs_max = Errors.stats(errors.ttfs)
    stop_p95, stop_max = Errors.stats(errors.stop)
    print(
        f"never-quiet agent: ttfs p95 {ttfs_p95:.1f} max {ttfs_max:.1f} ms; "
        f"stop p95 {stop_p95:.1f} max {stop_max:.1f} ms"
    )
    assert ttfs_max <= 10.0 and stop_max <= 10.0


def test_first_responses_of_agents_that_start_on_speech() -> None:
    """Issue 13, item 1: the first answer of a stream that starts directly on speech was
    ~50 ms late (the floor had learned the speech itself)."""
    trimmed = [c.name for c in agent_pool() if c.trimmed and c.kind == "speech"]
    trimmed = [n for n in trimmed if (clip_named(n).level_dbfs or 0.0) >= LOUD_DBFS]
    assert len(trimmed) >= 4
    errors: list[float] = []
    rng = random.Random(11)
    for k, name in enumerate(trimmed * 2):
        wire = WIRES[k % len(WIRES)]
        case = SpaceCase(
            wire=wire,
            send_mode=("paced", "burst")[k % 2],
            chunk_ms=20 if k % 2 == 0 else 500,
            speedup=20.0,
            agents=(name,),
            callers=("caller_where_is_order",),
            delays_ms=(rng.uniform(200, 1500),),
            barge=None,
            seed=k,
        )
        call, dialect = render_case(case)
        receipt = measure_case(call, dialect)
        (turn,) = [t for t in receipt.turns if t.kind == "response"]
        if turn.ttfs_ms is None:
            # Withheld only where the truth's own onset moves by the order of the bound with
            # where its 1 ms windows fall (the kal voices breathe on the threshold first).
            assert turn.reason == "agent_edge_ambiguous", case.label()
            spread = truth_phase_spread_ms(clip_named(name), 0)
            assert spread > SessionConfig().max_uncertainty_ms / 2, (case.label(), spread)
            continue
        errors.append(turn.ttfs_ms - call.truth[0].ttfs_ns / 1e6)
    worst = float(np.max(np.abs(errors)))
    print(f"first responses of {len(errors)} speech-first agents: |err| max {worst:.1f} ms")
    assert worst <= 10.0


@pytest.mark.slow
def test_the_space_of_agents_and_wires() -> None:
    """A fixed random sample of the whole space: no response or barge-in is missed, and
    for talkers at -30 dBFS or louder the contract's bounds hold."""
    rng = random.Random(5)
    loud: list[float] = []
    quiet: list[float] = []
    stops: list[float] = []
    withheld = 0
    ambiguous = 0
    truths_own = 0  # withheld as ambiguous where the truth's own onset moves with the grid
    published = 0
    outside: list[str] = []
    by_wire: dict[str, list[int]] = {}  # published, withheld as ambiguous, outside
    for _ in range(60):
        case = random_case(rng)
        call, dialect = render_case(case)
        receipt = measure_case(call, dialect)
        errors = Errors([], [], [])
        score(call, receipt, errors, case.label())
        got, wrong = outside_uncertainty(call, receipt)
        published += got
        outside += [f"{case.label()}: {w}" for w in wrong]
        own = withheld_for_the_truth(case, receipt)
        truths_own += own
        tally = by_wire.setdefault(f"{case.wire[0]}/{case.wire[1]}", [0, 0, 0])
        tally[0] += got
        tally[1] += len(errors.ambiguous) - own
        tally[2] += len(wrong)
        problems = [p for p in errors.problems if not _withheld_quiet(case, p)]
        withheld += len(errors.problems) - len(problems)
        ambiguous += len(errors.ambiguous) - own
        assert not problems, problems
        if errors.problems:
            continue  # the figures of this call no longer line up with its turns
        # A figure withheld as ambiguous leaves the call's others standing: each published
        # ttfs is taken with its own turn.
        responses = [t for t in receipt.turns if t.kind == "response"]
        for i, (truth, turn) in enumerate(zip(call.truth, responses, strict=True)):
            if turn.ttfs_ms is not None:
                error = turn.ttfs_ms - truth.ttfs_ns / 1e6
                (loud if _loud(case, i) else quiet).append(error)
        stops += errors.stop
    loud_p95, loud_max = Errors.stats(loud)
    quiet_p95, quiet_max = Errors.stats(quiet)
    stop_p95, stop_max = Errors.stats(stops)
    print(
        f"space: {len(loud)} loud turns ttfs p95 {loud_p95:.1f} max {loud_max:.1f} ms; "
        f"{len(quiet)} quiet turns p95 {quiet_p95:.1f} max {quiet_max:.1f} ms; "
        f"{len(stops)} barge-ins stop p95 {stop_p95:.1f} max {stop_max:.1f} ms; "
        f"{withheld} quiet figures withheld for codec noise, {ambiguous} for an edge that "
        f"moves with the level (or the codec), {truths_own} where the truth's own onset moves "
        "with the grid"
    )
    print(f"{len(outside)} of {published} published figures outside their uncertainty:")
    print("\n".join(outside))
    for wire, (got, held, off) in sorted(by_wire.items()):
        print(f"  {wire}: {got} published, {held} withheld as ambiguous, {off} outside")
    # The uncertainty's 10 ms is the detector's p95 on clean speech, so a few figures may
    # lie outside it. None does here now. Before a spurt's own level counted
    # (SPURT_APART_DB), a -41 ms ttfs did (a barge-in 0.7 s after the caller's last words,
    # 17 dB louder); before an answer cut by a flush counted (LEVEL_SPREAD_TABLE), a -157
    # ms one (festival's kal answer cut after 240 ms: its level read from what was heard).
    assert len(outside) <= 0.02 * published
    # 7 of 156 before G.711's band (audio.g711.quantization_band_db), 12 with it (on A-law
    # the band is 2 dB at -65 dBFS, where a -30 dBFS talker's edges are judged), 15 of 144
    # once a cut answer's level counts as read from its part (three answers' onsets, one of
    # them the -157 ms above). Since the truth is read from the audio the wire carries (at
    # its rate), 22 of 199 figures judged (11%, counting the withheld ones themselves): the
    # 6 more are caller_topic_change's release, which hovers 0.26-0.45 dB under the truth's
    # threshold for 47 ms on 8 kHz and G.711 wires (BAND_LOSS_DB); each was published
    # 47-50 ms off against 10-18 ms stated before. The band widened on 24 and 48 kHz wires
    # too (asked the detector's rate), where the truth keeps the recording's edges and the
    # release: once it followed the wire's, 18 (9%), and on those wires 4 of 92 (8 before:
    # what is left is two of caller_topic_change's releases at 48 kHz, which the tests'
    # linear interpolation dims to within EDGE_LEVEL_DB of the threshold, a stop and an
    # agent's offset). Since an onset's band reads the windows over the grid's phase
    # (audio.levels.phase_extreme_db), the kal voices' answers, whose truth itself moves
    # 43-83 ms with the grid, are withheld too: counted apart (withheld_for_the_truth), the
    # test for them is that they are withheld.
    assert ambiguous <= 0.10 * (len(loud) + len(quiet) + len(stops) + ambiguous)
    full_band = [by_wire[w] for w in ("raw/24000", "raw/48000")]
    held = sum(t[1] for t in full_band)
    assert held <= 0.06 * sum(t[0] + t[1] for t in full_band), full_band
    assert len(loud) >= 90 and len(stops) >= 15
    assert loud_p95 <= 15.0


def outside_uncertainty(call: ScriptedCall, receipt: Receipt) -> tuple[int, list[str]]:
    """How many figures the receipt published for the call's true turns, and those
    farther from the truth than their stated uncertainty (the contract: a published
    figure lies within it)."""
    responses = [t for t in receipt.turns if t.kind == "response"]
    if len(responses) != len(call.truth):
        return 0, []
    published = 0
    outside: list[str] = []
    for i, (truth, turn) in enumerate(zip(call.truth, responses, strict=True)):
        if turn.ttfs_ms is not None and turn.ttfs_uncertainty_ms is not None:
            published += 1
            err = turn.ttfs_ms - truth.ttfs_ns / 1e6
            if abs(err) > turn.ttfs_uncertainty_ms:
                outside.append(f"turn {i} ttfs {err:+.1f} ms (unc. {turn.ttfs_uncertainty_ms})")
        barge = responses[i + 1].barge_in if i + 1 < len(responses) else None
        if truth.barge_onset_ns is None or barge is None or barge.stop_latency_ms is None:
            continue
        assert truth.stop_ns is not None and barge.stop_uncertainty_ms is not None
        published += 1
        err = barge.stop_latency_ms - (truth.stop_ns - truth.barge_onset_ns) / 1e6
        if abs(err) > barge.stop_uncertainty_ms:
            outside.append(f"turn {i + 1} stop {err:+.1f} ms (unc. {barge.stop_uncertainty_ms})")
    return published, outside


def test_a_barge_in_soon_after_the_callers_last_words_at_another_level() -> None:
    """A caller at -30 dBFS, then 0.7 s later another at -13 barging in: both are one
    utterance to the detector (spurts under UTTERANCE_GAP apart share a level), so the
    barge-in's offset was walked at a level 17 dB under its own and the next ttfs read
    41 ms short against a stated 17 ms. Its ambiguity now spans its own level too
    (SPURT_APART_DB); a barge-in after more than the gap is published as before."""
    case = SpaceCase(
        wire=("raw", 16000),
        send_mode="paced",
        chunk_ms=20,
        speedup=1.0,
        agents=("festival_slt_f_agent", "synth_harmonic_padded", "festival_slt_f_agent"),
        callers=("espeak_en_us_f3_caller", "caller_where_is_order", "caller_interrupt"),
        delays_ms=(201.5, 2395.0, 1193.6),
        barge=(500.9, 440.5, "flush"),
        seed=19495690,
    )
    for barge_ms, soon in ((500.9, True), (1200.0, False)):
        case = dataclasses.replace(case, barge=(barge_ms, 440.5, "flush"))
        call, dialect = render_case(case)
        receipt = measure_case(call, dialect)
        turn = [t for t in receipt.turns if t.kind == "response"][1]
        assert turn.ttfs_ms is not None and turn.ttfs_uncertainty_ms is not None
        error = turn.ttfs_ms - call.truth[1].ttfs_ns / 1e6
        assert abs(error) <= turn.ttfs_uncertainty_ms, (barge_ms, error)
        if soon:
            assert turn.ttfs_uncertainty_ms > 40.0
        else:
            assert turn.ttfs_uncertainty_ms <= 20.0


def test_an_answer_cut_short_by_a_flush_reads_its_level_from_what_was_heard() -> None:
    """Festival's kal voice breathes under the truth's threshold for 200 ms before it
    speaks; its answer cut by a barge-in after 240 ms gave a level read from 0.5 s of it,
    the breath counted, and the ttfs read 157 ms short against a stated 10 ms. A cut
    answer's edges now carry the spread of a level read from so little (withheld here);
    the same answer heard whole states far less: how far its onset moves with where the
    1 ms windows fall (the truth's own onset moves 83 ms with them: withheld too)."""
    case = SpaceCase(
        wire=("raw", 8000),
        send_mode="burst",
        chunk_ms=10,
        speedup=32.6,
        agents=("festival_kal_m_agent", "espeak_en_us_f4_agent", "agent_reprompt"),
        callers=("espeak_en_gb_m_caller", "flite_rms_m_caller", "flite_slt_f_caller"),
        delays_ms=(2132.8, 1975.6, 686.0),
        barge=(243.6, 300.8, "flush"),
        seed=501916820,
    )
    call, dialect = render_case(case)
    receipt = measure_case(call, dialect)
    _, outside = outside_uncertainty(call, receipt)
    assert not outside, outside
    cut = next(t for t in receipt.turns if t.kind == "response")
    assert cut.ttfs_ms is None and cut.reason == "agent_edge_ambiguous"
    whole = dataclasses.replace(case, barge=None)
    call, dialect = render_case(whole)
    first = next(t for t in measure_case(call, dialect).turns if t.kind == "response")
    assert first.ttfs_uncertainty_ms is not None and cut.ttfs_uncertainty_ms is not None
    spread = truth_phase_spread_ms(clip_named(case.agents[0]), 0)
    assert spread <= first.ttfs_uncertainty_ms < cut.ttfs_uncertainty_ms / 2


# Agents with soft edges that a G.711 codec moves, and a clean one, against every caller.
SOFT_AGENTS = (
    "festival_ked_m_agent",
    "festival_kal_m_agent",
    "flite_rms_m_agent",
    "espeak_es_f4_agent",
    "agent_greeting",
)
# Published share of the figures, measured (2026-12-02): mu-law 81%, A-law 67%, linear
# 96%. A-law's smallest code is +-8, so its silence is a -72 dBFS floor that quiet
# talkers' edges lie under (withheld as caller_noise / agent_noise).
PUBLISHED_AT_LEAST = {"twilio": 0.75, "telnyx": 0.6, "raw": 0.9}


@pytest.mark.slow
@pytest.mark.parametrize("wire", [("twilio", 8000), ("telnyx", "PCMA"), ("raw", 8000)])
def test_published_figures_on_g711_wires_lie_within_their_uncertainty(
    wire: tuple[str, int | str],
) -> None:
    """Every caller of the corpus against agents with soft edges, on mu-law (Twilio),
    A-law (Telnyx PCMA) and linear 8 kHz, paced and in bursts: each published ttfs lies
    within its stated uncertainty. Before the codec's band (``quantization_band_db``),
    a -40 dBFS caller's offset read 16-25 ms late on mu-law against 11 ms stated, and a
    -26 dBFS agent's soft onset 80-100 ms late on A-law against 10 ms."""
    callers = [c.name for c in caller_pool()]
    published = figures = 0
    outside: list[str] = []
    for k, caller in enumerate(callers):
        for j, agent in enumerate(SOFT_AGENTS):
            n = k * len(SOFT_AGENTS) + j
            rng = random.Random(n)
            case = SpaceCase(
                wire=wire,
                send_mode=("paced", "burst")[n % 2],
                chunk_ms=(20, 200)[n % 2],
                speedup=10.0,
                agents=(agent, "agent_confirm"),
                callers=(caller, callers[(k + 7) % len(callers)]),
                delays_ms=(rng.uniform(300, 1500), rng.uniform(300, 1500)),
                barge=None,
                seed=n,
            )
            call, dialect = render_case(case)
            receipt = measure_case(call, dialect)
            got, wrong = outside_uncertainty(call, receipt)
            published += got
            # The kal voices' answers whose truth moves with the grid, withheld: not counted.
            figures += len(call.truth) - withheld_for_the_truth(case, receipt)
            outside += [f"{case.label()}: {w}" for w in wrong]
    print(f"{wire}: {published} of {figures} figures published, {len(outside)} outside")
    assert not outside, outside
    assert published >= PUBLISHED_AT_LEAST[wire[0]] * figures


@settings(
    max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@pytest.mark.slow
@given(seed=st.integers(min_value=0, max_value=2**31 - 1))
def test_no_response_or_barge_in_is_ever_missed(seed: int) -> None:
    """Property: whatever the agent, wire, chunking and burst speed, every true response
    is found (none missed, none invented), and every barge-in by a caller at -30 dBFS or
    louder. (A quieter caller's soft start can lie under the start threshold for longer
    than the agent took to stop: the known limit in the README.)"""
    case = random_case(random.Random(seed))
    call, dialect = render_case(case)
    receipt = measure_case(call, dialect)
    errors = Errors([], [], [])
    score(call, receipt, errors, case.label())
    problems = [
        p
        for p in errors.problems
        if not (p.endswith("turn 1: barge-in not detected") and not _loud(case, 1))
        and not _withheld_quiet(case, p)
    ]
    assert not problems, problems
    assert receipt.anomalies == {}, receipt.anomalies
    assert len(caller_pool()) >= 20 and len(agent_pool()) >= 15


def flush_case(agent: str, point_ms: float, reaction_ms: float, chunk_ms: int) -> SpaceCase:
    """A barge-in on ``agent``'s answer ``point_ms`` after its onset, the agent flushing
    ``reaction_ms`` later (raw 16 kHz, paced in ``chunk_ms`` chunks)."""
    return SpaceCase(
        wire=("raw", 16000),
        send_mode="paced",
        chunk_ms=chunk_ms,
        speedup=1.0,
        agents=(agent, "agent_confirm"),
        callers=("caller_where_is_order", "caller_interrupt"),
        delays_ms=(600.0, 700.0),
        barge=(point_ms, reaction_ms, "flush"),
        seed=0,
    )


def test_a_flush_just_into_the_word_after_a_pause() -> None:
    """espeak's Spanish answer flushed 1.7 ms into a word that follows 20 ms of silence:
    the proxy heard the speech run up to the cut, a listener who heard the cut a few ms
    earlier (the jitter of the leg between them) heard it end at the pause. The stop read
    +19.8 ms against a stated 10; its uncertainty now spans where it ends had the cut come
    CUT_JITTER_MS earlier. (The same stop live: +39 ms against 16.9, a 40 ms pause.)"""
    call, dialect = render_case(flush_case("agent_es_order", 857.0, 286.0, 20))
    receipt = measure_case(call, dialect)
    published, outside = outside_uncertainty(call, receipt)
    assert published == 3 and not outside, outside
    barge = [t for t in receipt.turns if t.kind == "response"][1].barge_in
    assert barge is not None and barge.evidence == "flush"
    assert barge.stop_uncertainty_ms is not None and barge.stop_uncertainty_ms >= 20.0


def sweep_flushes(
    per_agent: int, point_ms: Callable[[Clip, random.Random], float]
) -> tuple[int, int, list[str]]:
    """Every agent voice flushed ``per_agent`` times, the barge-in ``point_ms`` after its
    onset (paced in 20 to 140 ms chunks, reactions 60-900 ms): the barge-ins by the truth,
    how many of their stops were withheld, and those published outside their uncertainty.
    Asserts that none is missed, and that the caller speaking in a pause the agent then
    flushed and never resumed is no barge-in (turns.py; the truth's stop precedes it)."""
    stops = withheld = 0
    outside: list[str] = []
    for agent in agent_pool():
        rng = random.Random(agent.name)
        for _ in range(per_agent):
            case = flush_case(
                agent.name,
                point_ms(agent, rng),
                rng.uniform(60, 900),
                rng.choice([20, 40, 100, 140]),
            )
            call, dialect = render_case(case)
            receipt = measure_case(call, dialect)
            _, wrong = outside_uncertainty(call, receipt)
            outside += [f"{agent.name} {case.barge}: {w}" for w in wrong if "stop" in w]
            truth = call.truth[0]
            assert truth.stop_ns is not None and truth.barge_onset_ns is not None
            responses = [t for t in receipt.turns if t.kind == "response"]
            barge = responses[1].barge_in if len(responses) > 1 else None
            if truth.stop_ns <= truth.barge_onset_ns:
                assert barge is None, case.label()
                continue
            assert barge is not None, case.label()  # never missed
            stops += 1
            withheld += barge.stop_latency_ms is None
    print(f"{stops} stops, {withheld} withheld, {len(outside)} outside: {outside}")
    return stops, withheld, outside


@pytest.mark.slow
def test_a_flush_at_any_point_of_any_answer() -> None:
    """Every agent voice, flushed at 20 points inside its speech segments: each published
    stop lies within its stated uncertainty (measured 2026-12-02: 399 barge-ins, 2
    withheld, 1 outside, below; the same before the cut's sensitivity)."""
    stops, withheld, outside = sweep_flushes(20, barge_point_ms)
    # Left: festival's ked voice ends on a tail hovering within 1 dB of the threshold for
    # 300 ms, whose 1 ms windows pass or fail it by where they fall (the truth's on the
    # clip, the proxy's on the stream: +41 ms against 5, its answer heard whole).
    assert len(outside) <= 0.01 * stops, outside
    assert withheld <= 0.03 * stops


@pytest.mark.slow
def test_a_flush_anywhere_in_the_first_second_of_any_answer() -> None:
    """Every agent voice, the barge-in 150-1200 ms after its onset, 40 times: no published
    stop outside its stated uncertainty. Before the cut's sensitivity (CUT_JITTER_MS): 2
    of 788, cuts just into a word after a pause (espeak's Spanish voices, +18.8 and +21.3
    ms against 10); after, none, 6 withheld."""
    stops, withheld, outside = sweep_flushes(40, lambda _a, rng: rng.uniform(150, 1200))
    assert not outside, outside
    assert stops >= 700 and withheld <= 0.03 * stops
