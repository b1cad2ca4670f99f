"""The outcome testbench: scripted calls through voxproxy, scored on six axes per call.

The scenarios in ``fixtures/testbench/`` are the failure matrix of corrections,
interruptions and tool failures. Each is played, in real time over loopback,
against a correct mock agent and a faulty one (every task fault switched on),
each behind its own voxproxy with the event API wired (:func:`run_bench` with
``post_events``). The scenario reaches the mock agent as a task script, chosen by
the scenario name in the call's request path (``tag_scenario``); the scorer
(:mod:`voxproxy.loadgen.outcome`) reads only the receipt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from voxproxy.clips import fixtures_dir
from voxproxy.core.errors import FixtureError
from voxproxy.core.receipt import Receipt
from voxproxy.harness.bench import BenchAgent, run_bench
from voxproxy.loadgen.outcome import CAUSE_AXIS, Axis, CallScore, Cause, score
from voxproxy.loadgen.scenario import Scenario, load_scenario
from voxproxy.mockagent import MockAgentConfig
from voxproxy.receipts.policy import Policy, load_policy
from voxproxy.simcall.log import TaskLog
from voxproxy.simcall.script import TASK_FAULTS

AGENT = MockAgentConfig(
    dialect="raw",
    delay_ms=600.0,
    reaction_ms=60.0,
    barge_in="flush",
    responses=("agent_ask_number",),
    tool_timeout_ms=6000.0,
    tool_max_attempts=3,
)
"""The correct agent: answers 600 ms after each turn (a 2.2 s utterance), stops 60 ms after
its VAD hears a barge-in, gives a tool 6 s before it counts as timed out."""

FAULTY = AGENT.with_faults(TASK_FAULTS)
"""The same agent with every task fault switched on (each fires only when its case comes up)."""

AGENTS: dict[str, MockAgentConfig] = {"correct": AGENT, "faulty": FAULTY}


def scenarios_dir() -> Path:
    return fixtures_dir() / "testbench"


def load_testbench(names: Sequence[str] | None = None) -> list[tuple[Scenario, Path]]:
    """The testbench scenarios (all, or those named), in file order."""
    paths = sorted(scenarios_dir().glob("*.yaml"))
    found = [(load_scenario(p), p.parent) for p in paths]
    for s, _ in found:
        if s.setup is None or s.expected is None:
            raise FixtureError(f"testbench scenario {s.name} has no setup or expected block")
    if names is None:
        return found
    by_name = {s.name: (s, base) for s, base in found}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise FixtureError(f"no testbench scenario named {', '.join(missing)}")
    return [by_name[n] for n in names]


INTERRUPT_STOP_MS = 800.0
"""The testbench's barge-in stop limit. The mock agent's own VAD takes 100-450 ms to hear a
barge-in when 60 calls share two cores, so the default 300 ms would fail correct calls on
barge-in speed, which is not what the testbench measures."""


def outcome_policy(scenarios: Sequence[tuple[Scenario, Path | None]]) -> Policy:
    """The default policy with every testbench tool critical (for the release gate) and the
    barge-in stop limit at :data:`INTERRUPT_STOP_MS`."""
    tools = tuple(sorted({s.setup.tool for s, _ in scenarios if s.setup is not None}))
    base = load_policy()
    data = base.model_dump()
    data.update(
        description="voxproxy outcome testbench",
        critical_tools=tools,
        max_interrupt_stop_ms=INTERRUPT_STOP_MS,
    )
    return Policy.model_validate(data)


@dataclass(frozen=True, slots=True)
class OutcomeCall:
    agent: str  # "correct" or "faulty"
    scenario: Scenario
    receipt: Receipt | None
    score: CallScore
    task: TaskLog | None  # what the mock agent's task did (faults that fired, events)
    error: str | None  # the caller's error, if the call failed


async def run_testbench(
    scenarios: Sequence[tuple[Scenario, Path | None]],
    *,
    secret: bytes,
    agents: Sequence[str] = ("correct", "faulty"),
    policy: Policy | None = None,
    concurrency: int = 64,
    together: bool = False,
) -> list[OutcomeCall]:
    """Each scenario once against each agent; every call scored from its receipt.

    The agents take turns (all of one agent's calls at once, then the next agent's)
    unless ``together``: on two cores, one event loop carrying 60 real-time calls with
    their proxies and mock agents falls behind when every call's first turn ends at
    once, and the agents' event posts then reach the proxy 0.1-1.5 s late (2-8 ms with
    30 calls), which moves tool events against the audio they answer."""
    pairs = tuple(scenarios)
    policy = policy or outcome_policy(pairs)
    scripts = {}
    for s, _ in pairs:
        assert s.setup is not None
        scripts[s.name] = s.setup.task_script()
    bench_agents = [
        BenchAgent(label, replace(AGENTS[label], scripts=scripts), len(pairs), post_events=True)
        for label in agents
    ]
    groups = [bench_agents] if together else [[a] for a in bench_agents]
    bench = []
    for group in groups:
        bench += await run_bench(
            group,
            pairs,
            secret=secret,
            concurrency=concurrency,
            policy=policy,
            tag_scenario=True,
        )
    out = []
    for b in bench:
        o = b.outcome
        assert o.scenario.expected is not None
        out.append(
            OutcomeCall(
                agent=b.label,
                scenario=o.scenario,
                receipt=o.receipt,
                score=score(o.receipt, o.scenario.expected, secret),
                task=o.agent_log.task if o.agent_log is not None else None,
                error=o.record.error,
            )
        )
    return out


FAULT_CAUSE: dict[str, Cause] = {
    "stale_args": "stale_args",
    "no_cancel": "not_cancelled",
    "unchecked_result": "unchecked_result",
    "noise_is_speech": "noise_interruption",
    "unsafe_retry": "unsafe_retry",
    "confirm_before_result": "early_confirmation",
}
"""Each fault switch of the mock agent (as its task logs it) and the cause the scorer names."""


@dataclass(frozen=True, slots=True)
class FaultCheck:
    """One fault that fired in one call, and whether the testbench caught it."""

    fault: str
    cause: Cause
    axis: Axis
    cause_found: bool  # the scorer found the cause in the receipt's events
    axis_failed: bool  # the axis the cause names came out wrong

    @property
    def caught(self) -> bool:
        return self.cause_found and self.axis_failed


def fault_checks(call: OutcomeCall) -> list[FaultCheck]:
    """For each fault the mock's task logged on this call: was it caught by its axis?"""
    out = []
    for fault in call.task.faults if call.task is not None else []:
        cause = FAULT_CAUSE[fault]
        axis = CAUSE_AXIS[cause]
        assert axis is not None
        out.append(
            FaultCheck(
                fault,
                cause,
                axis,
                cause_found=cause in call.score.causes,
                axis_failed=not call.score.axes[axis].ok,
            )
        )
    return out
