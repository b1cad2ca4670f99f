"""When the proxy cannot know, it says so (MEASUREMENT.md 2): directions that never go
quiet, and clock readings that ran late, withhold figures with a reason instead of
publishing confident wrong numbers."""

from __future__ import annotations

import dataclasses
import importlib.util
import random
from pathlib import Path

import numpy as np
import pytest
from support.groundtruth import measure
from support.scripted import BargePlan, CallPlan, TurnPlan, render

from voxproxy.clips import load_clips, load_corpus
from voxproxy.core.analysis.vad import MASKING_TABLE, masked_ms
from voxproxy.core.analysis.vadconfig import LEVEL_SPREAD_TABLE, level_spread_db
from voxproxy.core.audio.levels import active_speech_level, frame_active_level, window_energy_db
from voxproxy.core.audio.resample import resample_clip
from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.receipt import CloseInfo
from voxproxy.core.session import FIGURE_BASE_MS, CallSession, SessionConfig
from voxproxy.receipts.policy import load_policy
from voxproxy.receipts.verdict import check, judged
from voxproxy.receipts.withheld import withheld_span, withheld_stop_span

MS = 1_000_000


def _plan(seed: int, **kw: object) -> CallPlan:
    rng = random.Random(seed)
    clips = load_clips()
    callers = [c for c in clips.values() if c.role == "caller" and c.kind == "speech"]
    agents = [c for c in clips.values() if c.role == "agent" and c.kind == "speech"]
    turns = tuple(
        TurnPlan(rng.choice(callers), rng.choice(agents), rng.uniform(300, 2000)) for _ in range(3)
    )
    kw.setdefault("dialect", "raw")
    return CallPlan(send_mode="paced", turns=turns, seed=seed, **kw)  # type: ignore[arg-type]


def test_a_babble_bed_under_the_caller_publishes_no_figure() -> None:
    # A bed of four voices 10 and 20 dB under the caller: the caller direction is never
    # quiet, so no caller speech end is known (it once read 5.7 s off the truth).
    babble = load_clips()["noise_babble"].pcm
    policy = load_policy(None)
    for snr in (10.0, 20.0):
        for seed in range(3):
            call = render(_plan(seed, caller_bed=babble, caller_bed_dbfs=-21.0 - snr))
            receipt = measure(call, "raw")
            published = [t.ttfs_ms for t in receipt.turns if t.ttfs_ms is not None]
            assert published == [], (snr, seed, receipt.turns)
            reasons = {t.reason for t in receipt.turns}
            assert "caller_never_quiet" in reasons and reasons <= {
                "caller_never_quiet",
                "call_ended",
                "no_response",
            }, reasons
            # The caller's edges are no speech edges either: none is published.
            assert all(t.caller_offset_ms is None for t in receipt.turns)
            assert all(t.reprompt_ms is None for t in receipt.turns)
            gate = check("turn_timing", receipt, policy)
            assert gate.verdict == "insufficient_evidence", gate


def test_a_babble_bed_under_a_single_short_answer_publishes_no_figure() -> None:
    # One question, one short answer, then silence (the silence_after_answer scenario):
    # the agent speaks little, yet the caller stays active through all of it.
    rng = random.Random(9)
    clips = load_clips()
    babble = clips["noise_babble"].pcm
    for seed in range(3):
        turn = TurnPlan(
            clips["caller_where_is_order"], clips["agent_reprompt"], rng.uniform(300, 900)
        )
        plan = CallPlan(
            dialect="raw",
            send_mode="paced",
            turns=(turn,),
            seed=seed,
            tail_ms=6000.0,
            caller_bed=babble,
            caller_bed_dbfs=-31.0,
        )
        receipt = measure(render(plan), "raw")
        assert [t.ttfs_ms for t in receipt.turns if t.ttfs_ms is not None] == [], receipt.turns
        assert "caller_never_quiet" in {t.reason for t in receipt.turns}


def test_a_quiet_direction_is_measured_as_before() -> None:
    # The control: the same calls without the bed publish every figure, but one whose
    # caller edge is a slow release that moves 48 ms with the level read 0.5 dB off: that
    # one is said to be uncertain (caller_edge_ambiguous), not published.
    published = 0
    for seed in range(3):
        call = render(_plan(seed))
        receipt = measure(call, "raw")
        responses = [t for t in receipt.turns if t.kind == "response"]
        assert len(responses) == 3
        for t in responses:
            assert t.ttfs_uncertainty_ms is not None
            assert t.ttfs_uncertainty_ms >= FIGURE_BASE_MS
            if t.ttfs_ms is None:
                assert t.reason == "caller_edge_ambiguous", t
                assert t.ttfs_uncertainty_ms > 50.0
            else:
                published += 1
                assert t.ttfs_uncertainty_ms <= 50.0
    assert published >= 8


def test_clock_lag_near_an_edge_widens_its_uncertainty_and_withholds_it() -> None:
    call = render(_plan(4))
    blocks: list[tuple[int, int]] = []  # (end of a block of the loop, its length)

    def lag(start_ns: int, end_ns: int) -> int:
        return max((n for t, n in blocks if t >= start_ns and t - n <= end_ns), default=0)

    def run() -> list[tuple[float | None, float | None, str | None]]:
        s = CallSession(make_decoder("raw"), 0, secret=b"k", link_id="l", clock_lag=lag)
        for t, d, p in call.messages:
            s.on_message(d, p, t)
        r = s.close(call.end_ns, "completed", CloseInfo(initiator="caller"))
        return [(t.ttfs_ms, t.ttfs_uncertainty_ms, t.reason) for t in r.turns]

    clean = run()
    assert all(v is not None and u is not None and u >= FIGURE_BASE_MS for v, u, _ in clean)
    # A 30 ms block right after the second turn's caller speech end: its figure carries
    # it; an 80 ms block at the third turn's agent onset withholds that figure.
    second, third = call.truth[1], call.truth[2]
    blocks.append((second.caller_offset_ns + 50 * MS, 30 * MS))
    blocks.append((third.agent_onset_ns + 20 * MS, 80 * MS))
    lagged = run()
    assert lagged[0] == clean[0]
    assert clean[1][1] is not None and clean[2][1] is not None
    assert lagged[1][0] == clean[1][0] and lagged[1][1] == clean[1][1] + 30.0
    assert lagged[2][0] is None and lagged[2][2] == "clock_lag"
    assert lagged[2][1] == clean[2][1] + 80.0


def test_a_caller_on_another_wire_than_the_configured_one_is_named() -> None:
    # A raw PCM caller on a proxy told to expect Twilio: nothing can be measured, and the
    # receipt, the anomalies and the verdict say why instead of blaming something else.
    call = render(_plan(1))
    session = CallSession(make_decoder("twilio"), 0, secret=b"k", link_id="l")
    session.on_upstream_connected(1_000_000)  # the agent answered the handshake
    for t, d, p in call.messages:
        session.on_message(d, p, t)
    receipt = session.close(call.end_ns, "completed", CloseInfo(initiator="caller"))
    assert receipt.wire_looks_like == "raw"
    assert receipt.anomalies["dialect_mismatch"] == 1
    verdict = judged(receipt, load_policy(None)).verdict
    assert verdict is not None and verdict.verdict == "insufficient_evidence"
    assert "looks like raw, not the configured twilio" in (verdict.reason or "")
    # The right dialect (and auto) measure the same call, with no mismatch.
    for dialect in ("raw", "auto"):
        right = measure(render(_plan(1)), dialect)
        assert right.wire_looks_like is None and "dialect_mismatch" not in right.anomalies


@pytest.mark.slow
def test_noise_under_the_caller_is_measured_against_what_is_heard() -> None:
    """Issue 13, then issue 36: under a bed of white noise 10 and 20 dB below the caller.
    The contract's truth is now what a listener hears over the bed (MEASUREMENT.md 2;
    the scripted calls' truth follows it), and the detector finds the edges where the
    speech rises out of the noise (analysis/audible.py). Before, every figure was withheld
    as caller_noise (the old truth's edges lay 100-200 ms under the noise): now most are
    published against the heard truth, a figure whose edge hovers on the noise states it
    and is withheld as caller_noise past the bound, and with the bound lifted the errors
    lie inside their stated uncertainty. At 20 dB a release fading under the bed is
    counted by the truth where the bed dips and shows in no reading of the mixture
    (audible.tail_hidden_ms): those offsets state it and are withheld. Measured: 8 of 12
    published at 10 dB (|error| at most 22 ms), none at 20 dB (16 of 24 published, 8 of
    them outside their band, before the rule); lifted, 24 of 24 inside (21 before)."""
    rng = np.random.default_rng(7)
    bed = (rng.standard_normal(16000 * 4) * 8000).astype(np.int16)  # -12.3 dBFS, scaled below
    inside = total = 0
    published = {10.0: 0, 20.0: 0}
    worst = 0.0
    for snr in (10.0, 20.0):
        for seed in range(4):
            call = render(_plan(seed, caller_bed=bed, caller_bed_dbfs=-21.0 - snr))
            receipt = measure(call, "raw")
            responses = [t for t in receipt.turns if t.kind == "response"]
            assert len(responses) == 3, (snr, seed, [t.reason for t in responses])
            for t, truth in zip(responses, call.truth, strict=True):
                if t.ttfs_ms is None:
                    assert t.reason == "caller_noise", (snr, seed, t)
                    assert t.ttfs_uncertainty_ms is not None and t.ttfs_uncertainty_ms > 50.0
                    continue
                published[snr] += 1
                worst = max(worst, abs(t.ttfs_ms - truth.ttfs_ns / 1e6))
            for (value, unc), truth in zip(_measure_lifted(call, "raw"), call.truth, strict=True):
                assert value is not None and unc is not None
                total += 1
                inside += abs(value - truth.ttfs_ns / 1e6) <= unc
    print(
        f"noisy callers: {published} published of 12 a level (worst |error| {worst:.1f} ms); "
        f"lifted, {inside}/{total} inside their stated uncertainty"
    )
    assert total == 24 and published[10.0] >= 6 and published[20.0] == 0
    assert worst <= 30.0 and inside == total


@pytest.mark.parametrize("kind", ["white", "pink", "brown", "street"])
def test_at_0_db_snr_every_turn_says_why_it_has_no_figure(kind: str) -> None:
    # A caller at the bed's own level (0 dB SNR): no listener follows their words' edges,
    # and the detector hears only the few frames that rise out of the bed, often none of a
    # turn. Before, such a turn came out as the agent speaking unprompted (agent_initiated,
    # no reason: "missed" in the accuracy benchmark, 6-12 of 48 a bed): the proxy took
    # silence it could not hear for silence. Now no figure is published, and every turn
    # says why: a bed near the caller's level could have hidden them (caller_noise).
    from support.noise import noise_bed

    for seed in range(4):
        bed = np.round(noise_bed(kind, 16000 * 8, 16000, seed=seed) * 3000).astype(np.int16)
        call = render(_plan(seed, caller_bed=bed, caller_bed_dbfs=-21.0))
        receipt = measure(call, "raw")
        assert all(t.ttfs_ms is None for t in receipt.turns), receipt.turns
        silent = [t for t in receipt.turns if t.reason is None]
        assert not silent, (seed, silent)
    # At 20 dB the same beds hide nobody: the turns are the caller's, none masked.
    for seed in range(2):
        bed = np.round(noise_bed(kind, 16000 * 8, 16000, seed=seed) * 3000).astype(np.int16)
        call = render(_plan(seed, caller_bed=bed, caller_bed_dbfs=-41.0))
        receipt = measure(call, "raw")
        assert [t.kind for t in receipt.turns] == ["response"] * 3, receipt.turns


def _barged_plan(seed: int, **kw: object) -> CallPlan:
    """Three turns, the caller barging in on the first two answers (the agent flushes)."""
    plan = _plan(seed, **kw)
    barges = (BargePlan(600.0, 150.0, "flush"), BargePlan(500.0, 150.0, "flush"), None)
    turns = tuple(dataclasses.replace(t, barge=b) for t, b in zip(plan.turns, barges, strict=True))
    return dataclasses.replace(plan, turns=turns)


@pytest.mark.parametrize("kind", ["white", "pink"])
def test_at_0_db_snr_a_barge_in_not_heard_is_said_to_be_unknown(kind: str) -> None:
    # Issue 36: at 0 dB a caller talking over an answer is as unheard as their question.
    # Before, an answer with no barge-in heard said nothing, so the interruption gate
    # passed ("no barge-in to judge") and the accuracy benchmark counted 8-10 stops of 45
    # as missed without a reason. Now such an answer says a barge-in could have gone
    # unheard (caller_noise), and the gate lacks evidence instead of passing.
    from support.noise import noise_bed

    unheard = 0
    for seed in range(3):
        bed = np.round(noise_bed(kind, 16000 * 10, 16000, seed=seed) * 3000).astype(np.int16)
        call = render(_barged_plan(seed, caller_bed=bed, caller_bed_dbfs=-21.0))
        receipt = measure(call, "raw")
        turns = receipt.turns
        assert any(t.agent_onset_ms is not None for t in turns), turns
        for k, t in enumerate(turns):
            if t.agent_onset_ms is None:
                continue
            # A barge-in on this answer is the next turn's.
            heard = k + 1 < len(turns) and turns[k + 1].barge_in is not None
            assert heard or t.barge_in_unheard == "caller_noise", (seed, t)
            assert not (heard and t.barge_in_unheard), (seed, t)
        unheard += sum(t.barge_in_unheard is not None for t in turns)
        gate = check("interruption", receipt, load_policy(None))
        assert gate.verdict == "insufficient_evidence", (seed, gate)
    assert unheard >= 3
    # 20 dB under the caller, the same beds hide no barge-in: each is heard and none said
    # unknown.
    for seed in range(2):
        bed = np.round(noise_bed(kind, 16000 * 10, 16000, seed=seed) * 3000).astype(np.int16)
        call = render(_barged_plan(seed, caller_bed=bed, caller_bed_dbfs=-41.0))
        receipt = measure(call, "raw")
        assert [t.barge_in_unheard for t in receipt.turns] == [None] * 3, receipt.turns
        assert [t.barge_in is not None for t in receipt.turns] == [False, True, True]


@pytest.mark.slow
def test_the_masking_table_bounds_the_voices_it_was_measured_on() -> None:
    """MASKING_TABLE is tools/calibrate_masking.py's measurement; re-measured here, so a
    change of the clips or of the truth rule that hides more of an edge fails."""
    spec = importlib.util.spec_from_file_location(
        "calibrate_masking", Path(__file__).parents[3] / "tools" / "calibrate_masking.py"
    )
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    measured = {depth: (on, off) for depth, on, off in tool.table()}
    assert set(measured) == {row[0] for row in MASKING_TABLE}
    for depth, on, off in MASKING_TABLE:
        assert on >= measured[depth][0] - 0.5 and off >= measured[depth][1] - 0.5, depth
    # In quiet (seen 35 dB or more under the talker) nothing is hidden.
    assert masked_ms(60.0) == (0.0, 0.0) and masked_ms(-5.0) == MASKING_TABLE[0][1:]


def _measure_lifted(call: object, dialect: str) -> list[tuple[float | None, float | None]]:
    """(ttfs_ms, uncertainty) of each response, with the withholding bound lifted."""
    session = CallSession(
        make_decoder(dialect, DialectOptions(secret=b"k")),
        0,
        secret=b"k",
        link_id="l",
        config=SessionConfig(max_uncertainty_ms=10_000.0),
    )
    for t_ns, d, p in call.messages:  # type: ignore[attr-defined]
        session.on_message(d, p, t_ns)
    receipt = session.close(call.end_ns, "completed", CloseInfo(initiator="caller"))  # type: ignore[attr-defined]
    return [(t.ttfs_ms, t.ttfs_uncertainty_ms) for t in receipt.turns if t.kind == "response"]


def test_an_onset_that_moves_with_the_level_states_it_and_is_withheld_past_the_bound() -> None:
    """Issue 13: festival's kal voice breathes 1-10 dB under the truth's threshold for
    200 ms before it speaks. On 8 kHz mu-law its onset landed up to 130 ms early in the
    accuracy benchmark (the truth is the clean 16 kHz recording's); on 16 kHz PCM it is
    found to the millisecond. The proxy measures how
    far the onset moves with the level read 0.5 dB off and adds it to the uncertainty:
    every figure lies inside it, and one that could be that far off is withheld as
    agent_edge_ambiguous. A steep onset (espeak) states nothing extra."""
    corpus = load_corpus()
    caller, breathy, steep = (
        corpus["espeak_en_us_f3_caller"],
        corpus["festival_kal_m_agent"],
        corpus["espeak_es_m_agent"],
    )
    withheld = 0
    for dialect in ("raw", "twilio"):
        for mode in ("paced", "burst"):
            for agent, extra in ((breathy, True), (steep, False)):
                plan = CallPlan(
                    dialect=dialect,  # type: ignore[arg-type]
                    send_mode=mode,  # type: ignore[arg-type]
                    turns=(TurnPlan(caller, agent, 900.0),),
                    seed=1,
                )
                call = render(plan)
                receipt = measure(call, dialect)
                (turn,) = [t for t in receipt.turns if t.kind == "response"]
                assert turn.ttfs_uncertainty_ms is not None
                if not extra:
                    assert turn.ttfs_uncertainty_ms <= FIGURE_BASE_MS + 2.0, turn
                elif dialect == "twilio":  # at 16 kHz PCM the breath stays under
                    assert turn.ttfs_uncertainty_ms >= FIGURE_BASE_MS + 20.0, turn
                if turn.ttfs_ms is None:
                    assert turn.reason == "agent_edge_ambiguous" and extra, turn
                    withheld += 1
                ((ttfs, unc),) = _measure_lifted(call, dialect)
                assert ttfs is not None and unc is not None
                err = ttfs - call.truth[0].ttfs_ns / 1e6
                assert abs(err) <= unc, (dialect, mode, agent.name, err, unc)
    assert withheld >= 1  # twilio/burst: 116 ms early, 123 ms stated


def test_the_level_spread_table_bounds_a_level_read_from_the_start_of_an_answer() -> None:
    """LEVEL_SPREAD_TABLE, re-measured: how far P.56's level read from the first ``heard``
    ms of each speech clip (20 ms frames at 8 kHz, from its first speech) stands from the
    whole clip's, p95 over the project's clips and the corpus's voices. Each row must
    bound what it stands for: a change of the clips or of the level's rule that spreads
    more fails here."""
    clips = {**load_clips(), **load_corpus()}
    errors: dict[float, list[float]] = {heard: [] for heard, _ in LEVEL_SPREAD_TABLE[1:]}
    for clip in clips.values():
        if clip.kind != "speech":
            continue
        pcm = resample_clip(clip.pcm, clip.sample_rate_hz, 8000)
        whole = active_speech_level(pcm, 8000)
        if whole is None:
            continue
        frame_db = window_energy_db(pcm, 160).astype(np.float64)  # 20 ms frames
        n = frame_db.size
        first = int(clip.segments_ms[0][0] // 20)
        for heard in errors:
            count = int(heard // 20)
            if first + count <= n:
                level = frame_active_level(frame_db[first : first + count], 20)
                if level is not None:
                    errors[heard].append(abs(level - whole))
    for heard, spread in LEVEL_SPREAD_TABLE[1:]:
        assert len(errors[heard]) >= 10, heard
        assert spread >= float(np.percentile(errors[heard], 95)) - 0.1, heard
    assert level_spread_db(0.0) == LEVEL_SPREAD_TABLE[0][1]
    assert level_spread_db(450.0) == 3.0 and level_spread_db(10_000.0) == 0.6


def test_a_ttfs_withheld_for_its_edge_still_bounds_the_truth_and_decides_its_gate() -> None:
    # The control calls' slow release (caller_edge_ambiguous): its edges and uncertainty
    # stay in the receipt, the true ttfs lies within their span, and the turn-timing gate
    # judges the turn on it rather than lacking evidence.
    policy = load_policy().model_copy(update={"max_first_response_ms": 5000.0})
    withheld = 0
    for seed in range(3):
        call = render(_plan(seed))
        receipt = measure(call, "raw")
        responses = [t for t in receipt.turns if t.kind == "response"]
        for t, truth in zip(responses, call.truth, strict=True):
            if t.ttfs_ms is not None:
                continue
            withheld += 1
            span = withheld_span(t)
            assert span is not None, t
            assert span[0] <= truth.ttfs_ns / MS <= span[1], (span, truth.ttfs_ns / MS)
        gate = check("turn_timing", receipt, policy)
        assert gate.verdict == "pass", gate.reason
        judged_turns = gate.evidence["turns"]
        assert isinstance(judged_turns, list)
        assert sum("ttfs_at_most_ms" in j for j in judged_turns) == sum(
            t.ttfs_ms is None for t in responses
        )
    assert withheld >= 1


def _bed(kind: str, seed: int) -> np.ndarray:
    """12 s of a ``kind`` bed at 16 kHz (``noise_pink``: the demo's recorded pink noise,
    looped from a point ``seed`` picks), int16 at unit RMS x 3000."""
    from support.noise import noise_bed

    n = 16000 * 12
    if kind == "noise_pink":
        clip = load_clips()["noise_pink"].pcm.astype(np.float64)
        start = seed * 7919 % clip.size
        x = clip[(np.arange(n) + start) % clip.size]
        x = x / np.sqrt(np.mean(x**2))
    else:
        x = noise_bed(kind, n, 16000, seed=seed)
    return np.round(x * 3000).astype(np.int16)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "dialect"),
    [
        ("white", "raw"),
        ("pink", "raw"),
        ("noise_pink", "raw"),
        ("brown", "raw"),
        ("street", "raw"),
        ("pink", "twilio"),
        ("noise_pink", "twilio"),
        ("brown", "twilio"),
    ],
)
def test_a_ttfs_withheld_for_a_steady_bed_still_bounds_the_truth(kind: str, dialect: str) -> None:
    # Callers 15 dB over a bed: most ttfs figures are withheld as caller_noise (a release
    # the bed may hide, 120 ms of band). Over white and pink noise (the generated and the
    # demo's recorded one, which dips like a street's) the receipt says they still bound
    # the truth (ttfs_bounded) and the truth lies in their span; over a rumble and a
    # street whose level drifts across the spurt, which carried offsets 130-650 ms past
    # the truth in the noise sweep, it says they do not, and the gate does not judge
    # them. Before ttfs_bounded the gate judged none of them. On an 8 kHz wire the bed's
    # dips are read on the quiet stretches between spurts (audible.BED_POOL_WINDOWS): the
    # 120 windows read after an offset put the demo's recorded pink over 10 dB beside
    # the figures here (bounded: 7 of 12 before, 10 now).
    policy = load_policy().model_copy(update={"max_first_response_ms": 5000.0})
    bounded = unbounded = 0
    for seed in range(4):
        bed = _bed(kind, seed)
        call = render(_plan(seed, caller_bed=bed, caller_bed_dbfs=-36.0, dialect=dialect))
        receipt = measure(call, dialect)
        responses = [t for t in receipt.turns if t.kind == "response"]
        assert len(responses) == 3, receipt.turns
        for t, truth in zip(responses, call.truth, strict=True):
            if t.ttfs_ms is not None or t.reason != "caller_noise":
                assert t.ttfs_bounded is None or t.ttfs_ms is None, t
                continue
            span = withheld_span(t)
            if not t.ttfs_bounded:
                assert span is None, t
                unbounded += 1
                continue
            bounded += 1
            assert span is not None and span[0] <= truth.ttfs_ns / MS <= span[1], (span, truth)
        gate = check("turn_timing", receipt, policy)
        if all(t.ttfs_ms is not None or t.ttfs_bounded for t in responses):
            assert gate.verdict == "pass", gate.reason
        else:
            assert gate.verdict == "insufficient_evidence", gate.reason
    if (kind, dialect) == ("noise_pink", "twilio"):
        assert bounded >= 9, (bounded, unbounded)
    elif kind in ("white", "pink", "noise_pink"):
        assert bounded >= 6, (bounded, unbounded)
    elif kind == "brown":
        assert bounded == 0 and unbounded >= 6, (bounded, unbounded)
    else:  # where a street's drift is flat across a spurt, it is bounded
        assert unbounded >= 6, (bounded, unbounded)


def _stops(call: object, receipt: object) -> list[tuple[object, float]]:
    """Each barge-in record of ``receipt`` with the true stop latency (ms) of ``call``'s
    barge-in nearest it."""
    truths = [
        (tr.barge_onset_ns / MS, (tr.stop_ns - tr.barge_onset_ns) / MS)
        for tr in call.truth  # type: ignore[attr-defined]
        if tr.barge_onset_ns is not None and tr.stop_ns is not None
    ]
    out = []
    for t in receipt.turns:  # type: ignore[attr-defined]
        if t.barge_in is not None:
            near = min(truths, key=lambda x: abs(x[0] - t.barge_in.onset_ms))
            out.append((t.barge_in, near[1]))
    return out


@pytest.mark.slow
def test_a_barge_in_s_first_word_is_read_against_the_bed_not_the_next_word() -> None:
    # Callers 10 and 15 dB over white noise, barging in with a first word 200-300 ms
    # before the next: the noise after that word's offset was read over the next word's
    # start, the bed stood 4 dB high, the talker 7.5 dB over it and the word's edges
    # unresolved, so 5 of the 20 stops heard here were withheld (163 ms of band). The
    # noise read after an offset now ends before the next spurt's onset.
    published = withheld = 0
    for seed in range(6):
        for dbfs in (-31.0, -36.0):
            call = render(_barged_plan(seed, caller_bed=_bed("white", seed), caller_bed_dbfs=dbfs))
            for b, truth_ms in _stops(call, measure(call, "raw")):
                if b.stop_latency_ms is None:  # type: ignore[attr-defined]
                    withheld += 1
                    continue
                published += 1
                error = b.stop_latency_ms - truth_ms  # type: ignore[attr-defined]
                assert abs(error) <= b.stop_uncertainty_ms, (seed, dbfs, b, truth_ms)  # type: ignore[attr-defined]
    assert (published, withheld) == (20, 0)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["white", "pink", "noise_pink", "brown", "street"])
def test_a_stop_withheld_for_a_steady_bed_still_bounds_the_truth(kind: str) -> None:
    # Barge-ins 10 and 15 dB over each bed: a stop withheld for caller noise whose onset
    # was read over a steady bed says it bounds the truth (stop_bounded) and the truth
    # lies in its span; the interruption gate judges it there. Over a rumble none does.
    policy = load_policy().model_copy(update={"max_interrupt_stop_ms": 1000.0})
    bounded = withheld = 0
    for seed in range(4):
        for dbfs in (-31.0, -36.0):
            call = render(_barged_plan(seed, caller_bed=_bed(kind, seed), caller_bed_dbfs=dbfs))
            receipt = measure(call, "raw")
            stops = _stops(call, receipt)
            assert len(stops) == 2, receipt.turns
            for b, truth_ms in stops:
                if b.stop_latency_ms is not None:  # type: ignore[attr-defined]
                    assert b.stop_bounded is None, b  # type: ignore[attr-defined]
                    continue
                withheld += 1
                if not b.stop_bounded:  # type: ignore[attr-defined]
                    continue
                bounded += 1
                span = withheld_stop_span(b)  # type: ignore[arg-type]
                assert span is not None and span[0] <= truth_ms <= span[1], (span, truth_ms)
            gate = check("interruption", receipt, policy)
            judged_all = all(b.stop_latency_ms is not None or b.stop_bounded for b, _ in stops)  # type: ignore[attr-defined]
            unheard = any(t.barge_in_unheard for t in receipt.turns)
            if judged_all and not unheard:
                assert gate.verdict == "pass", gate.reason
            else:
                assert gate.verdict == "insufficient_evidence", gate.reason
    if kind == "brown":
        assert bounded == 0 and withheld >= 12, (bounded, withheld)
    elif kind in ("pink", "noise_pink"):
        assert bounded >= 2, (bounded, withheld)


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ["raw", "twilio"])
def test_a_short_quiet_answer_over_a_recorded_bed_is_judged_and_hides_no_barge_in(
    dialect: str,
) -> None:
    # The demo's background-noise calls: "where is my order" then "yes, please" (3 dB
    # quieter) over its recorded pink noise 10 dB under their mean level. The answer's
    # SNR was judged against the 120 ms read after its offset whenever that stood higher
    # than the learned bed (a swell of a steady bed: up to 3 dB), which left it unresolved;
    # and a barge-in on the agent's reply was said to be possibly unheard because the
    # short answer's level, not the caller's, was taken for the next utterance's. And the
    # answer stands 7.8-8.0 dB over the bed by its own level: unresolved under 8 dB, now
    # resolved from 7 (audible.UNRESOLVED_SNR_DB). The answer's ttfs judged (published or
    # bounded) in 6 (raw) and 3 (Twilio) of 16 calls before, 4 and 8 replies flagged; now
    # 14 and 15, none flagged.
    clips = load_clips()
    agents = [c for c in clips.values() if c.role == "agent" and c.kind == "speech"]
    recorded = clips["noise_pink"].pcm.astype(np.float64)
    recorded /= np.sqrt(np.mean(recorded**2))
    judged = unheard = 0
    for seed in range(16):
        rng = random.Random(seed)
        start = rng.randrange(recorded.size)
        bed = np.round(recorded[(np.arange(16000 * 30) + start) % recorded.size] * 3000)
        turns = (
            TurnPlan(clips["caller_where_is_order"], rng.choice(agents), rng.uniform(400, 900)),
            TurnPlan(clips["caller_yes"], rng.choice(agents), rng.uniform(400, 900)),
        )
        call = render(
            CallPlan(
                dialect=dialect,  # type: ignore[arg-type]
                send_mode="paced",
                turns=turns,
                seed=seed,
                caller_bed=bed.astype(np.int16),
                caller_bed_dbfs=-31.0,
            )
        )
        responses = [t for t in measure(call, dialect).turns if t.kind == "response"]
        assert len(responses) == 2, responses
        unheard += sum(t.barge_in_unheard is not None for t in responses)
        answer, truth = responses[1], call.truth[1]
        if answer.ttfs_ms is not None:
            judged += 1
            error = answer.ttfs_ms - truth.ttfs_ns / MS
            assert abs(error) <= answer.ttfs_uncertainty_ms, (seed, answer)  # type: ignore[operator]
        elif answer.ttfs_bounded:
            judged += 1
            span = withheld_span(answer)
            assert span is not None and span[0] <= truth.ttfs_ns / MS <= span[1], (seed, span)
    assert unheard == 0
    assert judged >= 13, judged


@pytest.mark.slow
def test_a_tail_hovering_on_a_steady_bed_bounds_the_truth_however_wide_its_band() -> None:
    # An offset walked over a steady pink bed whose release hovers on it moves 220-290 ms
    # with the speech estimate read 3 dB off: a band wider than the one an unresolved edge
    # states (213 ms), which was taken for unresolved and left unbounded. It is a band all
    # the same, and the truth lies in its span (the noise sweep: 48 more ttfs figures and 6
    # stops bounded so, none outside).
    wide = 0
    for kind in ("pink", "noise_pink"):
        for dbfs in (-31.0, -36.0):
            for seed in range(12):
                call = render(_plan(seed, caller_bed=_bed(kind, seed), caller_bed_dbfs=dbfs))
                responses = [t for t in measure(call, "raw").turns if t.kind == "response"]
                for t, truth in zip(responses, call.truth, strict=False):
                    if t.ttfs_ms is not None or (t.ttfs_uncertainty_ms or 0.0) <= 217.0:
                        continue
                    if not t.ttfs_bounded:
                        continue
                    wide += 1
                    span = withheld_span(t)
                    assert span is not None and span[0] <= truth.ttfs_ns / MS <= span[1], (
                        kind,
                        seed,
                        span,
                    )
    assert wide >= 6, wide
