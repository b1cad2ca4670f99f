"""The space of agents and wires the figures must hold on, for fake-clock tests.

Agents this project did not write: voices from three synthesizers and the project's own
clips, levels from -40 to -6 dBFS, streams that start directly on speech (trimmed
clips, sent only while the agent speaks) or carry their own silence, a harmonic complex
that never goes quiet, chunks from 10 ms to 2 s, bursts up to 50x real time, raw PCM
at 8/16/24/48 kHz, Twilio mu-law and Telnyx A-law. Every call is rendered with its true
edges (:mod:`support.scripted`) and measured by a :class:`CallSession`.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

from support.groundtruth import Errors, barge_point_ms, measure, score, truth_phase_spread_ms
from support.scripted import (
    BargePlan,
    CallPlan,
    Reaction,
    ScriptedCall,
    TurnPlan,
    WirePlan,
    render,
)
from voxproxy.clips import Clip, load_clips, load_corpus
from voxproxy.core.receipt import Receipt
from voxproxy.core.session import SessionConfig

# (dialect, raw rate or Telnyx encoding)
WIRES: tuple[tuple[str, int | str], ...] = (
    ("raw", 8000),
    ("raw", 16000),
    ("raw", 24000),
    ("raw", 48000),
    ("twilio", 8000),
    ("telnyx", "PCMA"),
)


@functools.cache
def agent_pool() -> tuple[Clip, ...]:
    """Agent voices: the corpus's agent clips and its harmonic complex (never quiet, sent
    trimmed), and the project's own agent clips."""
    corpus = load_corpus()
    own = [c for c in load_clips().values() if c.role == "agent" and c.kind == "speech"]
    theirs = [c for c in corpus.values() if c.role == "agent"]
    theirs += [corpus["synth_harmonic_trimmed"], corpus["synth_harmonic_padded"]]
    return tuple(theirs + own)


@functools.cache
def caller_pool() -> tuple[Clip, ...]:
    corpus = load_corpus()
    own = [c for c in load_clips().values() if c.role == "caller" and c.kind == "speech"]
    return tuple([c for c in corpus.values() if c.role == "caller"] + own)


@dataclass(frozen=True)
class SpaceCase:
    wire: tuple[str, int | str]
    send_mode: str  # paced or burst
    chunk_ms: int  # paced: frame length; burst: chunk length
    speedup: float  # burst only
    agents: tuple[str, ...]  # agent clip names, one per turn
    callers: tuple[str, ...]
    delays_ms: tuple[float, ...]
    barge: tuple[float, float, str] | None  # (after onset ms, reaction ms, reaction) on turn 0
    seed: int

    def label(self) -> str:
        return (
            f"{self.wire[0]}/{self.wire[1]} {self.send_mode} chunk={self.chunk_ms}ms "
            f"x{self.speedup:.0f} agents={self.agents} callers={self.callers} seed={self.seed}"
        )


def clip_named(name: str) -> Clip:
    for c in (*agent_pool(), *caller_pool()):
        if c.name == name:
            return c
    raise KeyError(name)


def random_case(rng: random.Random, n_turns: int = 3) -> SpaceCase:
    wire = rng.choice(WIRES)
    mode = rng.choice(["paced", "burst"])
    chunk = rng.choice([10, 20, 40]) if mode == "paced" else rng.choice([10, 60, 200, 500, 2000])
    agents = tuple(rng.choice(agent_pool()).name for _ in range(n_turns))
    barge = None
    if rng.random() < 0.5:
        point = barge_point_ms(clip_named(agents[0]), rng)
        reaction = rng.choice(["flush", "cease"] if mode == "paced" else ["flush"])
        barge = (point, rng.uniform(60, 600), reaction)
    return SpaceCase(
        wire=wire,
        send_mode=mode,
        chunk_ms=chunk,
        speedup=rng.uniform(1.5, 50.0),
        agents=agents,
        callers=tuple(rng.choice(caller_pool()).name for _ in range(n_turns)),
        delays_ms=tuple(rng.uniform(150, 3000) for _ in range(n_turns)),
        barge=barge,
        seed=rng.randrange(1 << 30),
    )


def render_case(case: SpaceCase) -> tuple[ScriptedCall, str]:
    turns = []
    for i, (a, c, d) in enumerate(zip(case.agents, case.callers, case.delays_ms, strict=True)):
        barge = None
        if i == 0 and case.barge is not None and len(case.agents) > 1:
            point, reaction_ms, reaction = case.barge
            barge = BargePlan(point, reaction_ms, reaction)  # type: ignore[arg-type]
        turns.append(TurnPlan(clip_named(c), clip_named(a), d, barge))
    dialect, param = case.wire
    paced = case.send_mode == "paced"
    common = {
        "send_mode": case.send_mode,
        "turns": tuple(turns),
        "frame_ms": case.chunk_ms if paced else 20,
        "burst_chunk_ms": case.chunk_ms,
        "burst_speedup": case.speedup,
        "seed": case.seed,
    }
    if dialect == "telnyx":
        plan = WirePlan(dialect="telnyx", telnyx_encoding=str(param), **common)  # type: ignore[arg-type]
        return render(plan), dialect
    rate = int(param) if dialect == "raw" else 8000
    call_plan = CallPlan(dialect=dialect, sample_rate_hz=rate, **common)  # type: ignore[arg-type]
    return render(call_plan), dialect


def measure_case(call: ScriptedCall, dialect: str) -> Receipt:
    return measure(call, dialect, secret=b"space", link_id="space")


def run_case(case: SpaceCase, errors: Errors) -> Receipt:
    call, dialect = render_case(case)
    receipt = measure_case(call, dialect)
    score(call, receipt, errors, case.label())
    return receipt


__all__ = ["Reaction"]


@functools.cache
def onset_moves_with_grid(name: str) -> bool:
    """Whether the truth's own first onset of agent clip ``name`` moves by more than half
    the default bound (the figure's uncertainty cap) with where its 1 ms windows fall: the
    kal voices breathe on the threshold before they speak (43 and 83 ms). Withheld as
    ambiguous, such a figure is the truth's doing, not the detector's."""
    spread = truth_phase_spread_ms(clip_named(name), 0)
    return spread > SessionConfig().max_uncertainty_ms / 2


def withheld_for_the_truth(case: SpaceCase, receipt: Receipt) -> int:
    """How many of ``receipt``'s answers were withheld as ``agent_edge_ambiguous`` where
    the truth's own onset moves with the grid (:func:`onset_moves_with_grid`)."""
    responses = [t for t in receipt.turns if t.kind == "response"]
    return sum(
        1
        for t, agent in zip(responses, case.agents, strict=False)
        if t.reason == "agent_edge_ambiguous" and onset_moves_with_grid(agent)
    )
