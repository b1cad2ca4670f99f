"""The release gate for agents that take consequential actions. Pure.

Over a set of receipts (a regression suite, a canary, a day of calls), the
gate fails on any of:

* ``stale_write``: a tool call in flight at a correction or an interruption
  that finished without being cancelled;
* ``confirmation_mismatch``: what the agent told the caller differs from what
  the backend finally holds for that field;
* ``unsafe_retry``: a retry without an idempotency key, or with a new
  operation id after a timeout;
* ``unverified_critical``: a call of a tool the policy lists in
  ``critical_tools`` with no ``backend.verified`` after it for its operation
  id or its state field (the field of the ``state.updated`` whose version the
  call was built from).

Each finding says where: call, turn, operation id, tool and cause. Verdict
gates are a separate question (:mod:`voxproxy.receipts.verdict`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, get_args

from voxproxy.core.effects import mismatched_confirmations
from voxproxy.core.receipt import EventRecord, Receipt, ToolCallRecord
from voxproxy.receipts.policy import Policy

ReleaseCheck = Literal[
    "stale_write", "confirmation_mismatch", "unsafe_retry", "unverified_critical"
]
RELEASE_CHECKS: tuple[ReleaseCheck, ...] = get_args(ReleaseCheck)
_STALE = {"barge_in": "barge-in", "correction": "correction"}


@dataclass(frozen=True, slots=True)
class Finding:
    check: ReleaseCheck
    call: str
    turn: int | None
    operation_id: str | None
    tool: str | None
    cause: str
    t_ms: float | None = None


@dataclass(frozen=True, slots=True)
class ReleaseReport:
    calls: int
    tool_calls: int
    critical_calls: int
    confirmations: int
    findings: list[Finding] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.findings

    def counts(self) -> dict[ReleaseCheck, int]:
        found = Counter(f.check for f in self.findings)
        return {c: found[c] for c in RELEASE_CHECKS}

    @property
    def failing_calls(self) -> int:
        return len({f.call for f in self.findings})


def turn_at(receipt: Receipt, t_ms: float) -> int | None:
    """Index of the turn under way at ``t_ms`` (the last one begun by then)."""
    found = None
    for t in receipt.turns:
        begin = t.caller_onset_ms if t.caller_onset_ms is not None else t.agent_onset_ms
        if begin is not None and begin <= t_ms:
            found = t.index
    return found


def _stale_writes(receipt: Receipt) -> list[Finding]:
    return [
        Finding(
            "stale_write",
            receipt.call,
            c.turn,
            c.operation_id,
            c.tool,
            f"finished ok after a {_STALE.get(c.stale_cause or '', 'change')} without a cancel",
            c.finished_ms,
        )
        for c in receipt.tools
        if c.stale_write
    ]


def _mismatches(receipt: Receipt) -> list[Finding]:
    out = []
    for e in mismatched_confirmations(receipt.events):
        out.append(
            Finding(
                "confirmation_mismatch",
                receipt.call,
                turn_at(receipt, e.t_ms),
                None,
                None,
                f"confirmed {e.field} differs from the backend's value",
                e.t_ms,
            )
        )
    return out


def _retried(call: ToolCallRecord, tools: list[ToolCallRecord]) -> ToolCallRecord | None:
    earlier = [c for c in tools if c.tool == call.tool and c.started_ms < call.started_ms]
    return earlier[-1] if earlier else None


def _unsafe_retries(receipt: Receipt) -> list[Finding]:
    out = []
    for c in receipt.tools:
        if not c.unsafe_retry:
            continue
        prev = _retried(c, receipt.tools)
        what = f"retry of {prev.operation_id}" if prev is not None else "retry"
        if not c.idempotent:
            cause = f"{what} without an idempotency key"
        else:
            cause = f"{what} with a new operation id after a timeout"
        if prev is not None and prev.status is not None:
            cause += f" (previous attempt: {prev.status})"
        out.append(
            Finding(
                "unsafe_retry", receipt.call, c.turn, c.operation_id, c.tool, cause, c.started_ms
            )
        )
    return out


def _field_of(call_start: EventRecord, events: list[EventRecord]) -> str | None:
    """The state field a call was built from: that of the state.updated with its version."""
    found = None
    for e in events:
        if e.t_ms > call_start.t_ms:
            break
        if (
            e.kind == "state.updated"
            and e.version is not None
            and e.version == call_start.state_version
        ):
            found = e.field
    return found


def _unverified_critical(receipt: Receipt, critical: frozenset[str]) -> tuple[int, list[Finding]]:
    starts = {
        e.operation_id: e for e in receipt.events if e.kind == "tool.started" and e.operation_id
    }
    checks = [e for e in receipt.events if e.kind == "backend.verified"]
    seen = 0
    out = []
    for c in receipt.tools:
        if c.tool is None or c.tool not in critical:
            continue
        seen += 1
        start = starts.get(c.operation_id)
        fld = _field_of(start, receipt.events) if start is not None else None
        verified = any(
            v.t_ms >= c.started_ms
            and (v.operation_id == c.operation_id or (fld is not None and v.field == fld))
            for v in checks
        )
        if not verified:
            where = f"operation {c.operation_id}" + (f" or field {fld}" if fld else "")
            out.append(
                Finding(
                    "unverified_critical",
                    receipt.call,
                    c.turn,
                    c.operation_id,
                    c.tool,
                    f"critical action ({c.status or 'no finish'}) with no backend.verified "
                    f"for {where}",
                    c.started_ms,
                )
            )
    return seen, out


def findings(receipt: Receipt, policy: Policy) -> tuple[int, list[Finding]]:
    """(critical tool calls seen, findings) for one receipt."""
    critical, unverified = _unverified_critical(receipt, frozenset(policy.critical_tools))
    return critical, [
        *_stale_writes(receipt),
        *_mismatches(receipt),
        *_unsafe_retries(receipt),
        *unverified,
    ]


def release_gate(receipts: Iterable[Receipt], policy: Policy) -> ReleaseReport:
    calls = tool_calls = critical = confirmations = 0
    found: list[Finding] = []
    for r in receipts:
        calls += 1
        tool_calls += len(r.tools)
        confirmations += sum(1 for e in r.events if e.kind == "confirmation")
        seen, items = findings(r, policy)
        critical += seen
        found.extend(items)
    return ReleaseReport(calls, tool_calls, critical, confirmations, found)
