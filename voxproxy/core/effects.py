"""Tool calls, state and outcome: the derived checks of MEASUREMENT.md section 5. Pure.

Given a call's :class:`~voxproxy.core.events.ToolEvent` timeline and the barge-in
onsets of its turns, this module pairs starts with finishes by operation id and
derives, per call:

* **tool latency** (finish - start);
* a **stale write**: a call in flight at a barge-in, or at a correction (a
  ``state.updated`` with a newer version than the one the call was built
  from), that finished ``ok`` without a ``tool.cancelled``;
* an **unsafe retry**: a repeated start of the same tool with a new operation id
  after a timeout, or any retry without an idempotency key;
* a **confirmation before its tool finished**: a ``confirmation`` while a call
  was still in flight;
* a **confirmation mismatch**: a ``confirmation`` whose value hash differs from
  the latest ``backend.verified`` hash of the same field.
* a **response cancelled with a tool in flight** (OpenAI Realtime, from the
  wire): the model response that issued a call was cancelled before the call's
  output came back; flagged on the call, never taken as a ``tool.cancelled``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from voxproxy.core.events import RESPONSE_CANCELLED_WITH_TOOL, ToolEvent


@dataclass(slots=True)
class ToolCall:
    operation_id: str
    tool: str | None
    attempt: int | None
    started_ns: int
    state_version: int | None = None
    args_hash: str | None = None
    idempotency_key: str | None = None
    finished_ns: int | None = None
    status: str | None = None
    cancelled_ns: int | None = None
    stale_write: bool = False
    stale_cause: str | None = None  # "barge_in" or "correction"
    unsafe_retry: bool = False
    source: str = "api"
    # The model response that issued the call was cancelled while it was in flight
    # (RESPONSE_CANCELLED_WITH_TOOL, seen on the wire); the tool itself was not cancelled.
    response_cancelled_ns: int | None = None

    @property
    def latency_ns(self) -> int | None:
        return None if self.finished_ns is None else self.finished_ns - self.started_ns

    def in_flight_at(self, t_ns: int) -> bool:
        end = min(x for x in (self.finished_ns, self.cancelled_ns, 1 << 62) if x is not None)
        return self.started_ns <= t_ns < end


@dataclass(slots=True)
class EffectSummary:
    calls: list[ToolCall] = field(default_factory=list)
    stale_writes: int = 0
    unsafe_retries: int = 0
    unfinished: int = 0
    confirmations: int = 0
    confirmations_before_finish: int = 0
    confirmation_mismatches: int = 0
    backend_verified: int = 0
    outcome_verified: bool | None = None
    responses_cancelled_with_tool_in_flight: int = 0


def derive(events: list[ToolEvent], barge_onsets_ns: list[int]) -> EffectSummary:
    """Pair and check a call's tool events (in any order; sorted here by time)."""
    out = EffectSummary()
    by_op: dict[str, ToolCall] = {}
    latest_version: int | None = None  # the newest state version announced so far
    ordered = sorted(events, key=lambda e: e.t_ns)
    for ev in ordered:
        kind = ev.kind
        if kind == "tool.started" and ev.operation_id:
            call = ToolCall(
                operation_id=ev.operation_id,
                tool=ev.tool,
                attempt=ev.attempt,
                started_ns=ev.t_ns,
                state_version=ev.state_version,
                args_hash=ev.args_hash,
                idempotency_key=ev.idempotency_key,
                source=ev.source,
            )
            if (
                ev.state_version is not None
                and latest_version is not None
                and latest_version > ev.state_version
            ):
                call.stale_cause = "outdated_state"  # built from state already corrected
            _check_retry(call, out.calls)
            by_op[ev.operation_id] = call
            out.calls.append(call)
        elif kind == "tool.finished" and ev.operation_id in by_op:
            call = by_op[ev.operation_id]
            if call.finished_ns is None:
                call.finished_ns = ev.t_ns
                call.status = ev.status
        elif kind == "tool.cancelled" and ev.operation_id in by_op:
            call = by_op[ev.operation_id]
            if call.cancelled_ns is None:
                call.cancelled_ns = ev.t_ns
        elif kind == RESPONSE_CANCELLED_WITH_TOOL and ev.operation_id in by_op:
            call = by_op[ev.operation_id]
            if call.response_cancelled_ns is None and call.in_flight_at(ev.t_ns):
                call.response_cancelled_ns = ev.t_ns
        elif kind == "state.updated":
            if ev.version is not None:
                latest_version = max(ev.version, latest_version or ev.version)
            for call in out.calls:
                if (
                    call.in_flight_at(ev.t_ns)
                    and call.state_version is not None
                    and ev.version is not None
                    and ev.version > call.state_version
                ):
                    call.stale_cause = call.stale_cause or "correction"
        elif kind == "backend.verified":
            out.backend_verified += 1
        elif kind == "confirmation":
            out.confirmations += 1
            if any(c.in_flight_at(ev.t_ns) for c in out.calls):
                out.confirmations_before_finish += 1
        elif kind == "outcome.verified":
            out.outcome_verified = bool(ev.verified)
    for onset in barge_onsets_ns:
        for call in out.calls:
            if call.in_flight_at(onset):
                call.stale_cause = call.stale_cause or "barge_in"
    for call in out.calls:
        if call.finished_ns is None and call.cancelled_ns is None:
            out.unfinished += 1
        if call.stale_cause is not None and call.cancelled_ns is None and call.status == "ok":
            call.stale_write = True
        else:
            call.stale_cause = None if call.cancelled_ns is not None else call.stale_cause
    out.stale_writes = sum(1 for c in out.calls if c.stale_write)
    out.unsafe_retries = sum(1 for c in out.calls if c.unsafe_retry)
    out.responses_cancelled_with_tool_in_flight = sum(
        1 for c in out.calls if c.response_cancelled_ns is not None
    )
    out.confirmation_mismatches = len(mismatched_confirmations(ordered))
    return out


class FieldEvent(Protocol):
    """What :func:`mismatched_confirmations` reads of an event (wire or receipt form)."""

    @property
    def kind(self) -> str: ...

    @property
    def field(self) -> str | None: ...

    @property
    def value_hash(self) -> str | None: ...


E = TypeVar("E", bound=FieldEvent)


def mismatched_confirmations(events: Iterable[E]) -> list[E]:
    """The last confirmation of each field whose value differs from what the backend
    finally holds for it. ``events`` in time order.

    Only the last confirmation of a field counts: an agent that confirmed a value,
    heard a correction, wrote and confirmed the new one, told the caller the truth.
    """
    backend: dict[str, str | None] = {}
    last: dict[str, E] = {}
    for e in events:
        if e.field is None:
            continue
        if e.kind == "backend.verified":
            backend[e.field] = e.value_hash
        elif e.kind == "confirmation":
            last[e.field] = e
    return [c for f, c in last.items() if f in backend and backend[f] != c.value_hash]


def _check_retry(call: ToolCall, earlier: list[ToolCall]) -> None:
    """Flag ``call`` when it repeats an earlier call of the same tool unsafely."""
    same = [
        c
        for c in earlier
        if c.tool == call.tool
        and c.tool is not None
        and (call.args_hash is None or c.args_hash is None or c.args_hash == call.args_hash)
    ]
    is_retry = bool(same) and (
        (call.attempt or 1) > 1 or any(c.status in ("timeout", "error") for c in same)
    )
    if not is_retry:
        return
    previous = same[-1]
    after_timeout = previous.status == "timeout" or previous.finished_ns is None
    if call.idempotency_key is None or (
        after_timeout
        and call.operation_id != previous.operation_id
        and (previous.idempotency_key != call.idempotency_key)
    ):
        call.unsafe_retry = True
