"""Verdicts: ordered gates over one receipt (MEASUREMENT.md section 6). Pure.

Gates are checked in the fixed order of :data:`~voxproxy.receipts.policy.GATE_ORDER`
(only those the policy lists); the first that does not pass names the verdict,
and the gates after it are not consulted. Gates are never averaged.

Within one gate:

* a failure proven by some element (a turn, a barge-in, a tool call) fails the
  gate, whatever other elements lack;
* otherwise, an element that lacks the evidence the gate needs makes the
  verdict ``insufficient_evidence`` naming the gate. No healthy value is ever
  made up from incomplete events;
* a withheld ttfs whose edges still bound it (``ttfs_bounded``: withheld only because
  its uncertainty passed the bound that publishes it, or for noise over a steady bed) is
  judged on its span: the gap between its edges, less and plus that uncertainty. Wholly
  within the limit it passes, wholly over it fails; a span that holds the limit lacks
  evidence;
* a gate with nothing to judge (no response turns, no barge-in, no tool call)
  passes, and its evidence says it judged nothing.

The API a testbench uses: :func:`judge` (the verdict record), :func:`judged`
(the receipt with verdict and policy hash attached), :func:`gate_results` (the
consulted gates, in order) and :func:`check` (one gate, alone).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from voxproxy.core.receipt import BargeInRecord, Receipt, VerdictRecord
from voxproxy.receipts.policy import GATE_ORDER, GateName, Policy
from voxproxy.receipts.withheld import withheld_span, withheld_stop_span

Verdict = Literal[
    "pass",
    "unreachable",
    "slow_first_response",
    "barge_in_failed",
    "tool_effect_failed",
    "false_complete",
    "insufficient_evidence",
]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)

FAILURE: Mapping[GateName, Verdict] = {
    "reachability": "unreachable",
    "turn_timing": "slow_first_response",
    "interruption": "barge_in_failed",
    "tool_effect": "tool_effect_failed",
    "outcome": "false_complete",
}
"""The verdict a gate gives when it fails on evidence."""

ToolCause = Literal[
    "missing_operation_id", "unstable_operation_id", "unfinished", "unsafe_retry", "stale_write"
]
TOOL_CAUSES: tuple[ToolCause, ...] = get_args(ToolCause)
"""Causes of ``tool_effect_failed``, in the order that picks the one that names it."""

_ANSWERED = 101


@dataclass(frozen=True, slots=True)
class GateResult:
    """What one gate found. ``verdict`` is ``"pass"`` when the gate held."""

    gate: GateName
    verdict: Verdict
    reason: str
    evidence: dict[str, object] = field(default_factory=dict)
    cause: str | None = None
    evaluated: bool = True  # False: the policy does not require this gate of this call

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"


def _ok(gate: GateName, reason: str, evidence: dict[str, object]) -> GateResult:
    return GateResult(gate, "pass", reason, evidence)


def _fail(
    gate: GateName, reason: str, evidence: dict[str, object], cause: str | None = None
) -> GateResult:
    return GateResult(gate, FAILURE[gate], reason, evidence, cause)


def _lacking(gate: GateName, reason: str, evidence: dict[str, object]) -> GateResult:
    return GateResult(gate, "insufficient_evidence", reason, evidence)


def _conclude(
    gate: GateName,
    evidence: dict[str, object],
    judged: list[dict[str, object]],
    failed: list[str],
    lacking: list[str],
    limit: float,
    nothing: str,
    passed: str,
) -> GateResult:
    """A gate that judged each of some items against ``limit``: it fails on any item
    over it, lacks evidence on any item it could not judge, else passes (``nothing``
    when there was no item to judge)."""
    if failed:
        return _fail(gate, f"{_more(failed)}; limit {limit:.0f} ms", evidence)
    if lacking:
        return _lacking(gate, _more(lacking), evidence)
    return _ok(gate, passed if judged else nothing, evidence)


def _unmeasured(receipt: Receipt) -> str | None:
    """Why the call's audio was not measured at all, if it was not."""
    if receipt.measurement_disabled:
        return "measurement was disabled after repeated internal errors"
    if receipt.dialect == "undetected":
        return "the wire's dialect was not recognised, so no audio was measured"
    if receipt.wire_looks_like is not None:
        return (
            f"the caller's wire looks like {receipt.wire_looks_like}, not the configured "
            f"{receipt.dialect}, so no audio was measured (run with --dialect "
            f"{receipt.wire_looks_like} or --dialect auto)"
        )
    return None


def _more(items: list[str]) -> str:
    head = items[0]
    return head if len(items) == 1 else f"{head} (and {len(items) - 1} more)"


# -- 1. reachability ----------------------------------------------------------------------


def check_reachability(receipt: Receipt, policy: Policy) -> GateResult:
    del policy
    status = receipt.close.upstream_status
    evidence: dict[str, object] = {
        "terminal": receipt.terminal,
        "upstream_status": status,
        "upstream_connect_ms": receipt.upstream_connect_ms,
    }
    if status == _ANSWERED or receipt.upstream_connect_ms is not None:
        at = receipt.upstream_connect_ms
        when = f" after {at:.1f} ms" if at is not None else ""
        return _ok("reachability", f"the agent answered{when}", evidence)
    terminal = receipt.terminal
    if terminal == "upstream_refused" or (status is not None and status != _ANSWERED):
        reason = f"the agent refused the call (HTTP {status})"
    elif terminal == "upstream_unreachable":
        reason = "no connection to the agent could be made"
    elif terminal == "upstream_timeout":
        reason = "the agent did not answer in time"
    else:
        reason = f"the call ended ({terminal}) before the agent answered"
    return _fail("reachability", reason, evidence)


# -- 2. turn timing -----------------------------------------------------------------------


def check_turn_timing(receipt: Receipt, policy: Policy) -> GateResult:
    limit = policy.max_first_response_ms
    evidence: dict[str, object] = {"limit_ms": limit}
    if (unmeasured := _unmeasured(receipt)) is not None:
        return _lacking("turn_timing", unmeasured, evidence)
    judged: list[dict[str, object]] = []
    over: list[str] = []
    lacking: list[str] = []
    for t in receipt.turns:
        if t.kind == "agent_initiated":
            continue
        if t.kind == "no_response":
            waited = receipt.settings.response_timeout_ms
            judged.append({"turn": t.index, "no_response_after_ms": waited})
            if waited > limit:
                over.append(f"turn {t.index}: no response within {waited:.0f} ms")
            else:
                lacking.append(
                    f"turn {t.index}: no response within {waited:.0f} ms, which does not "
                    f"reach the {limit:.0f} ms limit"
                )
            continue
        if t.ttfs_ms is not None:
            judged.append({"turn": t.index, "ttfs_ms": t.ttfs_ms})
            if t.ttfs_ms > limit:
                over.append(f"turn {t.index}: first response after {t.ttfs_ms:.1f} ms")
            continue
        if t.caller_offset_ms is None:
            judged.append({"turn": t.index, "missing": "caller_speech_end"})
            why = f" ({t.reason})" if t.reason else ""
            lacking.append(f"turn {t.index}: the caller's speech end is missing{why}")
        elif t.agent_onset_ms is None and t.reason == "call_ended":
            # The call ended before the agent answered: the silence the caller waited
            # is a lower bound, never a value. Agent audio that talked over the caller
            # and went on past their speech is the interruption gate's to judge.
            since = t.caller_offset_ms
            b = t.barge_in
            if b is not None and b.stop_ms is not None:
                since = max(since, b.stop_ms)
            waited = round(receipt.duration_ms - since, 1)
            judged.append({"turn": t.index, "unanswered_at_end_after_ms": waited})
            if waited > limit:
                over.append(f"turn {t.index}: no response in the {waited:.1f} ms before the end")
        elif (span := withheld_span(t)) is not None and span[1] <= limit:
            judged.append({"turn": t.index, "ttfs_at_most_ms": span[1], "withheld": t.reason})
        elif span is not None and span[0] > limit:
            judged.append({"turn": t.index, "ttfs_at_least_ms": span[0], "withheld": t.reason})
            over.append(
                f"turn {t.index}: first response after at least {span[0]:.1f} ms (withheld "
                f"as {t.reason})"
            )
        else:
            judged.append({"turn": t.index, "missing": "ttfs_ms", "reason": t.reason})
            within = "" if span is None else f", between {span[0]:.1f} and {span[1]:.1f} ms"
            lacking.append(f"turn {t.index}: no ttfs ({t.reason or 'no reason given'}{within})")
    evidence["turns"] = judged
    passed = f"{len(judged)} turn(s) judged, none over {limit:.0f} ms"
    outcome = (over, lacking, limit, "no response turns to judge", passed)
    return _conclude("turn_timing", evidence, judged, *outcome)


# -- 3. interruption ----------------------------------------------------------------------


def _barge_evidence(index: int, b: BargeInRecord) -> dict[str, object]:
    found: dict[str, object] = {
        "turn": index,
        "onset_ms": b.onset_ms,
        "stop_ms": b.stop_ms,
        "stop_latency_ms": b.stop_latency_ms,
        "outcome": b.outcome,
        "evidence": b.evidence,
    }
    if (span := withheld_stop_span(b)) is not None:
        found["stop_latency_span_ms"] = list(span)
        found["withheld"] = b.reason
    return found


def _resume_horizon_ms(receipt: Receipt, caller_offset_ms: float | None, stop_ms: float) -> float:
    """Until when agent audio that ceased at ``stop_ms`` could resume and count as not stopped.

    The turn machine joins agent audio resuming within ``agent_turn_gap_ms`` while the
    caller still talks to the audio that was talked over. Once the caller's speech has
    ended (before the call did), a resumption is an answer instead.
    """
    horizon = stop_ms + receipt.settings.agent_turn_gap_ms
    tolerance = float(receipt.settings.vad_frame_ms)
    if caller_offset_ms is not None and caller_offset_ms < receipt.duration_ms - tolerance:
        horizon = min(horizon, caller_offset_ms)
    return horizon


def check_interruption(receipt: Receipt, policy: Policy) -> GateResult:
    limit = policy.max_interrupt_stop_ms
    evidence: dict[str, object] = {"limit_ms": limit}
    if (unmeasured := _unmeasured(receipt)) is not None:
        return _lacking("interruption", unmeasured, evidence)
    # Agent audio that reaches the last VAD frame before the call's end ran to the end.
    end_tolerance_ms = float(receipt.settings.vad_frame_ms)
    judged: list[dict[str, object]] = []
    failed: list[str] = []
    lacking: list[str] = []
    for t in receipt.turns:
        if t.barge_in_unheard is not None:
            lacking.append(
                f"turn {t.index}: a bed near the caller's level stood under the agent's "
                f"answer ({t.barge_in_unheard}): an interruption would not have been heard"
            )
        b = t.barge_in
        if b is None:
            continue
        judged.append(_barge_evidence(t.index, b))
        if b.outcome == "no_agent_audio":
            lacking.append(f"turn {t.index}: an interruption with no agent audio to stop")
            continue
        span = withheld_stop_span(b)
        if b.stop_ms is not None and b.stop_latency_ms is not None:
            lo = hi = b.stop_latency_ms
            said = f"{hi:.1f} ms"
        elif span is not None and b.stop_ms is not None:
            lo, hi = span
            said = f"between {lo:.1f} and {hi:.1f} ms (withheld as {b.reason})"
        else:
            lacking.append(f"turn {t.index}: an interruption with no evidence the agent stopped")
            continue
        # Audio that merely ceased is a stop only once the agent could no longer have
        # resumed over the caller; when the call ended first, the latency is only a
        # lower bound: a failure if it already exceeds the limit, else no evidence. A
        # withheld latency is judged on its span: failed if all of it exceeds the limit,
        # unjudged if the limit falls inside it.
        at_end = b.evidence == "ceased" and b.stop_ms >= receipt.duration_ms - end_tolerance_ms
        unconfirmed = b.evidence == "ceased" and (
            receipt.duration_ms < _resume_horizon_ms(receipt, t.caller_offset_ms, b.stop_ms)
        )
        if b.outcome == "not_stopped" or lo > limit:
            verb = (
                "was still playing"
                if at_end
                else ("played on" if b.outcome == "not_stopped" else "stopped")
            )
            when = ", when the call ended" if at_end else ""
            failed.append(
                f"turn {t.index}: agent audio {verb} {said} after the caller started{when}"
            )
        elif hi > limit:
            lacking.append(
                f"turn {t.index}: agent audio stopped {said} after the caller started: "
                f"the limit of {limit:.0f} ms lies within it"
            )
        elif at_end:
            lacking.append(
                f"turn {t.index}: agent audio was still audible when the call ended, "
                f"{said} after the caller started; nothing shows it stopped"
            )
        elif unconfirmed:
            lacking.append(
                f"turn {t.index}: agent audio ceased {said} after the caller "
                f"started, but the call ended {receipt.duration_ms - b.stop_ms:.1f} ms later, "
                "before a resumption over the caller could be ruled out"
            )
    evidence["barge_ins"] = judged
    passed = f"{len(judged)} barge-in(s) stopped within {limit:.0f} ms"
    outcome = (failed, lacking, limit, "no barge-in to judge", passed)
    return _conclude("interruption", evidence, judged, *outcome)


# -- 4. tool effect -----------------------------------------------------------------------


def tool_effect_causes(receipt: Receipt) -> dict[ToolCause, list[dict[str, object]]]:
    """Every tool-effect problem of the call, by cause (causes in :data:`TOOL_CAUSES` order)."""
    found: dict[ToolCause, list[dict[str, object]]] = {c: [] for c in TOOL_CAUSES}
    started: dict[str, tuple[str | None, str | None]] = {}  # op -> (tool, args_hash)
    for e in receipt.events:
        if e.kind == "tool.started":
            if not e.operation_id:
                found["missing_operation_id"].append({"t_ms": e.t_ms, "tool": e.tool})
                continue
            seen = started.get(e.operation_id)
            now = (e.tool, e.args_hash)
            if seen is not None and seen != now:
                found["unstable_operation_id"].append(
                    {
                        "operation_id": e.operation_id,
                        "t_ms": e.t_ms,
                        "detail": "one operation id names two different calls",
                    }
                )
            started.setdefault(e.operation_id, now)
        elif e.kind in ("tool.finished", "tool.cancelled") and e.operation_id not in started:
            found["unstable_operation_id"].append(
                {
                    "operation_id": e.operation_id,
                    "t_ms": e.t_ms,
                    "detail": f"{e.kind} for an operation id that never started",
                }
            )
    for c in receipt.tools:
        where: dict[str, object] = {"operation_id": c.operation_id, "tool": c.tool, "turn": c.turn}
        if c.finished_ms is None and not c.cancelled:
            found["unfinished"].append(where)
        if c.unsafe_retry:
            found["unsafe_retry"].append({**where, "idempotent": c.idempotent})
        if c.stale_write:
            found["stale_write"].append({**where, "stale_cause": c.stale_cause})
    return {c: items for c, items in found.items() if items}


def _describe_tool_cause(cause: ToolCause, item: Mapping[str, object]) -> str:
    op = item.get("operation_id")
    tool = item.get("tool")
    name = f"{op}" + (f" ({tool})" if tool else "")
    if cause == "missing_operation_id":
        return f"a call of {tool or 'a tool'} at {item.get('t_ms')} ms has no operation id"
    if cause == "unstable_operation_id":
        return f"operation {op}: {item.get('detail')}"
    if cause == "unfinished":
        return f"operation {name} never finished"
    if cause == "unsafe_retry":
        how = (
            "with a new operation id after a timeout"
            if item.get("idempotent")
            else "without an idempotency key"
        )
        return f"operation {name} retried {how}"
    return f"operation {name} wrote after a {_STALE.get(str(item.get('stale_cause')), 'change')}"


_STALE = {"barge_in": "barge-in", "correction": "correction"}


def check_tool_effect(receipt: Receipt, policy: Policy) -> GateResult:
    del policy
    causes = tool_effect_causes(receipt)
    evidence: dict[str, object] = {
        "tool_calls": len(receipt.tools),
        "causes": {c: items for c, items in causes.items()},
    }
    if causes:
        cause = next(iter(causes))
        items = causes[cause]
        reason = f"{cause}: " + _more([_describe_tool_cause(cause, i) for i in items])
        return _fail("tool_effect", reason, evidence, cause)
    if not receipt.tools:
        return _ok("tool_effect", "no tool calls to judge", evidence)
    return _ok(
        "tool_effect",
        f"{len(receipt.tools)} tool call(s) with stable ids and a finish, "
        "no unsafe retry, no stale write",
        evidence,
    )


# -- 5. outcome ---------------------------------------------------------------------------


def check_outcome(receipt: Receipt, policy: Policy) -> GateResult:
    checks = [e for e in receipt.events if e.kind == "outcome.verified" and e.verified is not None]
    verified: bool | None
    if checks:
        verified = checks[-1].verified
    else:
        verified = receipt.effects.outcome_verified if receipt.effects is not None else None
    required = outcome_required(receipt, policy)
    evidence: dict[str, object] = {
        "outcome_verified": verified,
        "checks": len(checks),
        "required": required,
    }
    if verified is True:
        return _ok("outcome", "an independent check verified the promised result", evidence)
    if verified is False:
        return _fail(
            "outcome", "the independent check did not verify the promised result", evidence
        )
    if required:
        return _lacking(
            "outcome", "no outcome.verified event: nothing proves the promised result", evidence
        )
    why = (
        "the call carried no task events"
        if policy.require_outcome == "auto"
        else "the policy does not require one"
    )
    return GateResult(
        "outcome", "pass", f"not evaluated: no outcome check, and {why}", evidence, evaluated=False
    )


TASK_EVENT_KINDS = frozenset(
    {
        "tool.started",
        "tool.finished",
        "tool.cancelled",
        "state.updated",
        "backend.verified",
        "confirmation",
        "outcome.verified",
    }
)


def carries_task_events(receipt: Receipt) -> bool:
    """The call carried tool calls, state, confirmations or outcome checks."""
    return bool(receipt.tools) or any(e.kind in TASK_EVENT_KINDS for e in receipt.events)


def outcome_required(receipt: Receipt, policy: Policy) -> bool:
    if policy.require_outcome == "auto":
        return carries_task_events(receipt)
    return bool(policy.require_outcome)


# -- the verdict --------------------------------------------------------------------------

Check = Callable[[Receipt, Policy], GateResult]

CHECKS: Mapping[GateName, Check] = {
    "reachability": check_reachability,
    "turn_timing": check_turn_timing,
    "interruption": check_interruption,
    "tool_effect": check_tool_effect,
    "outcome": check_outcome,
}
assert tuple(CHECKS) == GATE_ORDER


def check(gate: GateName, receipt: Receipt, policy: Policy) -> GateResult:
    """One gate on its own (whatever the policy's gate list says)."""
    return CHECKS[gate](receipt, policy)


def gate_results(receipt: Receipt, policy: Policy) -> list[GateResult]:
    """The gates the policy lists, in order, up to and including the first that does not pass."""
    results: list[GateResult] = []
    for gate in GATE_ORDER:
        if gate not in policy.gates:
            continue
        result = CHECKS[gate](receipt, policy)
        results.append(result)
        if not result.passed:
            break
    return results


def verdict_of(results: list[GateResult], policy: Policy | None = None) -> VerdictRecord:
    evidence: dict[str, object] = {r.gate: r.evidence for r in results}
    last = results[-1] if results else None
    required: list[str] = [r.gate for r in results if r.evaluated]
    skipped: list[str] = [r.gate for r in results if not r.evaluated]
    if policy is not None:
        skipped += [g for g in GATE_ORDER if g not in policy.gates]
        skipped.sort(key=lambda g: GATE_ORDER.index(g))
    profile = policy.profile if policy is not None else None
    if last is None or last.passed:
        names = ", ".join(required)
        note = f"; not evaluated: {', '.join(skipped)}" if skipped else ""
        return VerdictRecord(
            verdict="pass",
            gate=None,
            reason=f"passed {len(required)} gate(s): {names}{note}",
            evidence=evidence,
            profile=profile,
            required=list(required),
            not_evaluated=list(skipped),
        )
    return VerdictRecord(
        verdict=last.verdict,
        gate=last.gate,
        reason=last.reason,
        evidence=evidence,
        cause=last.cause,
        profile=profile,
        required=list(required),
        not_evaluated=list(skipped),
    )


def judge(receipt: Receipt, policy: Policy) -> VerdictRecord:
    """The verdict of one receipt under ``policy``: the first gate that does not pass."""
    return verdict_of(gate_results(receipt, policy), policy)


def judged(receipt: Receipt, policy: Policy) -> Receipt:
    """``receipt`` with its verdict and the policy hash (any earlier verdict is replaced)."""
    return receipt.model_copy(update={"verdict": judge(receipt, policy), "policy": policy.hash})


# -- shell glue ---------------------------------------------------------------------------

log = logging.getLogger("voxproxy.verdict")


def judging(sink: Callable[[Receipt], None], policy: Policy) -> Callable[[Receipt], None]:
    """A receipt sink that judges each receipt before handing it to ``sink``.

    A bug in judging never costs a receipt: it is logged and the receipt goes on
    unjudged (``verdict`` null, ``policy`` still naming the policy in force).
    """
    policy_hash = policy.hash

    def write(receipt: Receipt) -> None:
        try:
            out = judged(receipt, policy)
        except Exception:
            log.exception("could not judge a receipt; writing it without a verdict")
            out = receipt.model_copy(update={"verdict": None, "policy": policy_hash})
        sink(out)

    return write
