"""A reproducible mix of turn-taking Twilio calls, for checks that need many varied
calls rather than one exact scenario: the measurement benchmark's ``scripted`` workload
(benchmarks/measurement.py) and the test that both builds of the measurement core give
the same receipts (tests/test_native.py); and the short order-status call that the
capture and wire tests each play with their own timings (``order_status_turns``)."""

from __future__ import annotations

import dataclasses
import random

from support.scripted.plan import BargePlan, CallPlan, TurnPlan
from voxproxy.clips import clip, load_clips


def turn_taking_plans(count: int, seed: int = 1717, *, turns: int = 4) -> list[CallPlan]:
    """``count`` Twilio calls of ``turns`` turns from the speech fixtures: every other
    answer barged into mid-sentence (the agent flushes), calls paced and in bursts in
    turn, and by thirds clean, with caller noise at -45 dBFS, and over a babble bed at
    -35 dBFS. The same ``seed`` gives the same plans."""
    clips = load_clips()
    speech = [c for c in clips.values() if c.kind == "speech"]
    callers = sorted((c for c in speech if c.role == "caller"), key=lambda c: c.name)
    agents = sorted((c for c in speech if c.role == "agent"), key=lambda c: c.name)
    rng = random.Random(seed)
    plans = []
    for k in range(count):
        steps = []
        for i in range(turns):
            agent = rng.choice(agents)
            barge = None
            if i % 2 == 1 and i < turns - 1:
                long_segs = [s for s in agent.segments_ms if s[1] - s[0] >= 500]
                a, b = rng.choice(long_segs)
                point = rng.uniform(a + 150, min(b - 250, a + 2500)) - agent.onset_ms
                barge = BargePlan(point, rng.uniform(60, 600), "flush")
            steps.append(TurnPlan(rng.choice(callers), agent, rng.uniform(150, 3000), barge))
        plan = CallPlan(
            dialect="twilio",
            send_mode="paced" if k % 2 == 0 else "burst",
            turns=tuple(steps),
            caller_gap_ms=rng.uniform(300, 1500),
            seed=rng.randrange(1 << 30),
        )
        if k % 3 == 1:
            plan = dataclasses.replace(plan, caller_noise_dbfs=-45.0)
        elif k % 3 == 2:
            plan = dataclasses.replace(
                plan, caller_bed=clips["noise_babble"].pcm, caller_bed_dbfs=-35.0
            )
        plans.append(plan)
    return plans


def order_status_turns(
    answer_ms: float, barge_after_ms: float, confirm_ms: float
) -> tuple[TurnPlan, TurnPlan]:
    """The caller says hello, the agent answers with the order's status ``answer_ms``
    later and is talked over ``barge_after_ms`` after its onset (it flushes 150 ms
    later); the caller says yes, and the agent confirms ``confirm_ms`` later."""
    return (
        TurnPlan(
            clip("caller_hello"),
            clip("agent_order_status"),
            answer_ms,
            BargePlan(barge_after_ms, 150.0, "flush"),
        ),
        TurnPlan(clip("caller_yes"), clip("agent_confirm"), confirm_ms),
    )
