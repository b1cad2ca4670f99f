"""Ground truth on the newer wires: scripted calls on a fake clock, measured by the session.

OpenAI Realtime gets the full treatment (>= 100 turns over all three audio formats,
GA and beta names, bursts ahead of real time, truncates with claimed positions,
function calls, the server's VAD and stages); Telnyx, Plivo, Vonage and Exotel get
the same turn and barge-in accuracy check, and their played-marker checks.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from support import groundtruth
from support.groundtruth import AMBIGUOUS, Errors, barge_point_ms, score, speech_clips
from support.scripted import (
    BargePlan,
    Reaction,
    ScriptedCall,
    TurnPlan,
    WireDialect,
    WirePlan,
    render,
)

from voxproxy.core.receipt import Receipt
from voxproxy.core.timebase import NS_PER_MS

SECRET = b"wire-truth"


def random_wire_plan(
    rng: random.Random,
    dialect: WireDialect,
    mode: str,
    n_turns: int = 4,
    **options: object,
) -> WirePlan:
    callers, agents = speech_clips("caller"), speech_clips("agent")
    realtime = dialect == "openai-realtime"
    turns: list[TurnPlan] = []
    for i in range(n_turns):
        agent = rng.choice(agents)
        barge = None
        if i % 2 == 1 and i + 1 < n_turns:
            reactions: list[Reaction] = ["flush", "cease"] if mode == "paced" else ["flush"]
            if rng.random() < 0.1 and realtime:
                # An agent that talks on: whether its next sentence after the caller
                # stops reads as an answer is the turn machine's ambiguity, not the
                # wire's; tests/core/session/test_call.py covers it on Twilio and raw.
                reactions = ["never"]
            barge = BargePlan(
                barge_point_ms(agent, rng), rng.uniform(60, 600), rng.choice(reactions)
            )
        # A server-VAD agent cannot answer before its VAD has waited out the silence.
        low = 1000.0 if realtime else 150.0
        turns.append(TurnPlan(rng.choice(callers), agent, rng.uniform(low, 3000), barge))
    return WirePlan(
        dialect=dialect,
        send_mode=mode,  # type: ignore[arg-type]
        turns=tuple(turns),
        caller_gap_ms=rng.uniform(300, 1500),
        seed=rng.randrange(1 << 30),
        **options,  # type: ignore[arg-type]
    )


def measure(call: ScriptedCall, dialect: str) -> Receipt:
    return groundtruth.measure(call, dialect, secret=SECRET)


REALTIME_VARIANTS: list[dict[str, object]] = [
    {"input_format": "pcm16", "output_format": "pcm16"},
    {"input_format": "g711_ulaw", "output_format": "g711_ulaw", "beta": True},
    {"input_format": "g711_alaw", "output_format": "pcm16", "tool_every": 2},
    {"input_format": "pcm16", "output_format": "g711_alaw", "beta": True, "claim_offset_ms": 40.0},
]


# Caller clips whose last release hovers within 0.5 dB of the truth's threshold for about
# 50 ms on a band-limited wire (G.711, 8 kHz: docs/measurement.md, "Uncertainty", an
# offset on a band-limited wire): the offset is ambiguous by that much, and its figure is
# withheld as caller_edge_ambiguous, not published 50 ms off. A wire at or above the
# recording's rate (OpenAI Realtime's 24 kHz pcm16) carries the release, and the truth
# keeps it: published there.
HOVERING_RELEASES = frozenset({"caller_topic_change"})


def _band_limited(plan: WirePlan) -> bool:
    """Whether ``plan``'s caller audio crosses a band-limited wire: Telnyx, Plivo and
    Exotel (8 kHz) and OpenAI Realtime's G.711 formats; not Vonage (16 kHz linear) nor
    OpenAI Realtime's pcm16 (24 kHz)."""
    if plan.dialect == "openai-realtime":
        return plan.input_format != "pcm16"
    return plan.dialect != "vonage"


def _hovering_releases(plan: WirePlan) -> int:
    """How many of ``plan``'s turns end on such a release on a band-limited wire."""
    if not _band_limited(plan):
        return 0
    return sum(1 for t in plan.turns if t.caller.name in HOVERING_RELEASES)


@pytest.mark.slow
def test_openai_realtime_against_ground_truth() -> None:
    rng = random.Random(606)
    errors = Errors([], [], [])
    stage_err: list[float] = []
    trunc_err: list[float] = []
    tool_err: list[float] = []
    truncations = tools = breakdowns = hovering = 0
    full_band = Errors([], [], [])  # the calls whose caller sends 24 kHz pcm16
    for variant in REALTIME_VARIANTS:
        for mode in ("paced", "burst"):
            for k in range(4):
                plan = random_wire_plan(rng, "openai-realtime", mode, **variant)
                hovering += _hovering_releases(plan)
                call = render(plan)
                receipt = measure(call, "openai-realtime")
                label = f"{variant}/{mode}/{k}"
                assert receipt.anomalies == {}, (label, receipt.anomalies)
                score(call, receipt, errors, label)
                if not _band_limited(plan):
                    score(call, receipt, full_band, label)
                responses = [t for t in receipt.turns if t.kind == "response"]
                # Stages: the server's VAD end mapped from the appended-audio timeline,
                # response.created and the first delta stamped at arrival.
                for stage, turn in zip(call.meta["stages"], responses, strict=False):  # type: ignore[call-overload]
                    assert turn.stages is not None, (label, turn)
                    marks = turn.stages.marks
                    for name in ("server_speech_stopped", "response_created", "first_audio_delta"):
                        stage_err.append(marks[name] - stage[name] / NS_PER_MS)
                    if turn.ttfs_ms is None and turn.reason in AMBIGUOUS:
                        continue  # (said, not missed: score() counted it, bounded below)
                    assert turn.ttfs_ms is not None, (label, turn.reason)
                    assert abs(sum(turn.stages.breakdown_ms.values()) - turn.ttfs_ms) <= 0.3
                    assert list(turn.stages.breakdown_ms) == [
                        "server_speech_stopped",
                        "response_created",
                        "first_audio_delta",
                        "audible",
                    ]
                    assert turn.stages.server_vad_offset_diff_ms is not None
                    assert "response_done" in turn.stages.details
                    breakdowns += 1
                # Truncates: the claim beside the model, and the model against the truth.
                truth_truncs = call.meta["truncations"]
                assert len(receipt.truncations) == len(truth_truncs), label  # type: ignore[arg-type]
                for rec, (_t, claimed, played) in zip(
                    receipt.truncations, truth_truncs, strict=True
                ):  # type: ignore[call-overload]
                    assert rec.claimed_played_ms == claimed
                    assert rec.modelled_played_ms is not None and rec.diff_ms is not None
                    trunc_err.append(rec.modelled_played_ms - played / NS_PER_MS)
                    offset = float(variant.get("claim_offset_ms", 0.0))  # type: ignore[arg-type]
                    assert abs(rec.diff_ms - offset) <= 3.0, (label, rec)
                    truncations += 1
                # Function calls: one per tool turn, started and finished from the wire.
                truth_tools = call.meta["tools"]
                assert len(receipt.tools) == len(truth_tools), label  # type: ignore[arg-type]
                for rec, (call_id, t0, t1) in zip(receipt.tools, truth_tools, strict=True):  # type: ignore[call-overload]
                    assert rec.operation_id == call_id and rec.source == "wire"
                    assert rec.tool == "lookup_order" and rec.status == "ok"
                    assert rec.latency_ms is not None
                    tool_err.append(rec.latency_ms - (t1 - t0) / NS_PER_MS)
                    tools += 1
                if truth_tools:
                    assert receipt.effects is not None and receipt.effects.tool_calls == len(
                        truth_tools
                    )
    assert not errors.problems, errors.problems
    # G.711 formats widen a quiet edge's band (audio.g711.quantization_band_db): a few
    # figures are then withheld as edge-ambiguous, said and not missed; and so may be each
    # turn that ends on a release hovering on the truth's threshold of a band-limited wire
    # (_hovering_releases: 6 on G.711 here; 10 withheld in all, 17 before the band followed
    # the wire's rate).
    print(
        f"openai-realtime: {len(errors.ambiguous)} withheld as edge-ambiguous "
        f"({hovering} hovering releases on G.711; {len(full_band.ambiguous)} on pcm16 of "
        f"{len(full_band.ttfs) + len(full_band.stop) + len(full_band.ambiguous)})"
    )
    allowed = 0.05 * (len(errors.ttfs) + len(errors.stop)) + hovering
    assert len(errors.ambiguous) <= allowed, (len(errors.ambiguous), hovering)
    # On 24 kHz pcm16 no release is allowed for: 7 of 80 figures there were withheld
    # while the band widened by the detector's rate (8 kHz) rather than the wire's.
    full_band_judged = len(full_band.ttfs) + len(full_band.stop) + len(full_band.ambiguous)
    assert len(full_band.ambiguous) <= 0.05 * full_band_judged, full_band.ambiguous
    assert len(errors.ttfs) >= 100 and len(errors.stop) >= 30
    assert truncations >= 15 and tools >= 8 and breakdowns >= 95
    s = np.abs(np.array(stage_err))
    tr = np.abs(np.array(trunc_err))
    more = f"; stages max {s.max():.1f} ms; truncate model max {tr.max():.1f} ms"
    errors.within("openai-realtime", more=f"{more} ({truncations}); tools {tools}")
    assert s.max() <= 3.0  # arrival stamps exact; VAD positions within one append's jitter
    assert tr.max() <= 1.0
    assert np.abs(np.array(tool_err)).max() <= 0.2


@pytest.mark.slow
def test_telephony_wires_against_ground_truth() -> None:
    rng = random.Random(4242)
    for dialect in ("telnyx", "plivo", "vonage", "exotel"):
        errors = Errors([], [], [])
        mark_errors: list[float] = []
        hovering = 0
        for mode in ("paced", "burst"):
            for k in range(3):
                plan = random_wire_plan(rng, dialect, mode)  # type: ignore[arg-type]
                hovering += _hovering_releases(plan)
                call = render(plan)
                receipt = measure(call, dialect)
                label = f"{dialect}/{mode}/{k}"
                assert receipt.anomalies == {}, (label, receipt.anomalies)
                assert receipt.dialect == dialect
                score(call, receipt, errors, label)
                assert receipt.marks.checked >= 1, (label, receipt.marks)
                assert receipt.marks.max_abs_error_ms is not None
                mark_errors.append(receipt.marks.max_abs_error_ms)
        assert not errors.problems, errors.problems
        errors.within(dialect, more=f"; mark check max {max(mark_errors):.1f} ms")
        # Withheld because an edge moves with the level read 0.5 dB off: said, and rare
        # (besides the releases that hover on a band-limited wire's threshold: 2-5 a
        # dialect here; none on Vonage's 16 kHz, which carries them).
        assert len(errors.ttfs) + len(errors.ambiguous) >= 24
        assert len(errors.ambiguous) <= 2 + hovering, (len(errors.ambiguous), hovering)
        assert max(mark_errors) <= 25.0  # echo once per caller frame, plus jitter
