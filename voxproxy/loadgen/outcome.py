"""The outcome testbench's scorer: six axes per call, from a receipt's events. Pure.

A testbench scenario (:mod:`voxproxy.loadgen.scenario`) carries an ``expected``
block (:class:`ExpectedOutcome`): what a correct agent must end with. Each call
is scored on six axes (MEASUREMENT.md section 6), never averaged; **end-to-end
task integrity** holds only when all six do.

Receipts carry no content: values and arguments are keyed hashes. The scorer
hashes the expected values with the proxy's keyed hash (:func:`voxproxy.core.ids.value_digest`,
the secret is known in a test or benchmark run) and compares hashes. Events are
taken in the receipt's order (arrival at the proxy).

The axes, as this scorer decides them:

``captured``
    Every expected state value was taken up (a ``state.updated`` of the field
    with that value), every barge-in of the caller was noticed (the agent's
    audio stopped), and nothing was taken for an interruption that was not one:
    no yield to a sound without caller speech (the receipt's
    ``yielded_without_caller_speech``), no ``tool.cancelled`` that neither
    caller speech during the call's life nor a newer state explains.
``active_state_correct``
    For each expected state field, the ``state.updated`` with the highest
    version holds the expected value.
``tool_args_correct``
    Every ``tool.started`` was built from the latest state (its ``state_version``
    is the highest version posted before it) and, when the action should run,
    the last call that took effect carries the expected arguments.
``stale_write_prevented``
    No call took effect (finished ``ok``, not cancelled) that was built from a
    stale state, was in flight when a newer state version arrived or while the
    caller was barging in (from the barge-in's onset to the end of that caller
    speech), or that the receipt flags ``stale_write``; and, when the action
    should not run, no call took effect at all.
``backend_correct``
    For each expected backend field, the last ``backend.verified`` holds the
    expected value.
``confirmation_matches_backend``
    The agent confirmed something, every confirmation matches what the backend
    had verified for that field before it, and the last confirmation of each
    field matches what the backend finally holds.

Failing calls are also sorted by cause (:data:`CAUSES`), found in the same events;
each cause names the axis it breaks (:data:`CAUSE_AXIS`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from voxproxy.core.ids import value_digest
from voxproxy.core.receipt import EventRecord, Receipt

Axis = Literal[
    "captured",
    "active_state_correct",
    "tool_args_correct",
    "stale_write_prevented",
    "backend_correct",
    "confirmation_matches_backend",
]
AXES: tuple[Axis, ...] = get_args(Axis)

Cause = Literal[
    "stale_args",
    "not_cancelled",
    "unchecked_result",
    "noise_interruption",
    "unsafe_retry",
    "early_confirmation",
    "unexplained",
]
CAUSES: tuple[Cause, ...] = get_args(Cause)
CAUSE_TEXT: Mapping[Cause, str] = {
    "stale_args": "tool arguments built from a stale state",
    "not_cancelled": "a call in flight at a correction or barge-in was never cancelled",
    "unchecked_result": "a tool result taken as success with no backend record of it",
    "noise_interruption": "background noise taken for an interruption",
    "unsafe_retry": "a retry that was not safe to repeat (no idempotency key, "
    "or a new operation id after a timeout)",
    "early_confirmation": "a confirmation given before the tool's result returned",
    "unexplained": "an axis failed and no cause was found in the events",
}
CAUSE_AXIS: Mapping[Cause, Axis | None] = {
    "stale_args": "tool_args_correct",
    "not_cancelled": "stale_write_prevented",
    "unchecked_result": "backend_correct",
    "noise_interruption": "captured",
    "unsafe_retry": "backend_correct",
    "early_confirmation": "confirmation_matches_backend",
    "unexplained": None,
}
"""The axis each cause breaks (an unsafe retry breaks the backend when the first attempt
had landed: a duplicate)."""


class ExpectedOutcome(BaseModel):
    """What a correct agent must end with (a scenario's ``expected`` block)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    captured: bool = True
    active_state_correct: bool = True
    tool_args_correct: bool = True
    stale_write_prevented: bool = True
    backend_correct: bool = True
    confirmation_matches_backend: bool = True
    should_execute: bool = True
    state: dict[str, JsonValue] = Field(
        default_factory=dict, description="The caller's final state: field -> value."
    )
    args: dict[str, JsonValue] | None = Field(
        default=None, description="The arguments of the call that must take effect."
    )
    backend: dict[str, JsonValue] = Field(
        default_factory=dict, description="What the backend must hold at the end: field -> value."
    )

    @model_validator(mode="after")
    def _args_when_executed(self) -> ExpectedOutcome:
        if self.should_execute and self.args is None:
            raise ValueError("args: the arguments of the call that must take effect are needed")
        if not self.should_execute and self.args is not None:
            raise ValueError("args: no call should take effect (should_execute is false)")
        return self

    def wants(self, axis: Axis) -> bool:
        value: bool = getattr(self, axis)
        return value


@dataclass(frozen=True, slots=True)
class AxisResult:
    held: bool
    expected: bool
    why: str

    @property
    def ok(self) -> bool:
        return self.held == self.expected


@dataclass(frozen=True, slots=True)
class CallScore:
    axes: dict[Axis, AxisResult]
    causes: tuple[Cause, ...] = ()

    @property
    def integrity(self) -> bool:
        """End-to-end task integrity: every axis as expected."""
        return all(a.ok for a in self.axes.values())

    @property
    def failed(self) -> tuple[Axis, ...]:
        return tuple(name for name, a in self.axes.items() if not a.ok)


# -- the calls, rebuilt from the events ---------------------------------------------------


@dataclass(slots=True)
class _Call:
    index: int  # position of its tool.started in the events
    t_ms: float
    op: str | None
    version: int | None
    args_hash: str | None
    latest: int | None  # the highest state version posted before it started
    status: str | None = None
    end: int | None = None  # position of its tool.finished
    end_ms: float | None = None
    cancel: int | None = None  # position of its tool.cancelled
    cancel_ms: float | None = None
    verified: bool = False  # a backend.verified with its operation id came after its start
    stale_by: list[str] = field(default_factory=list)

    @property
    def took_effect(self) -> bool:
        """Finished ok, and not cancelled before it finished."""
        return (
            self.status == "ok"
            and self.end is not None
            and (self.cancel is None or self.cancel > self.end)
        )

    def open_at(self, i: int) -> bool:
        """In flight at event position ``i``."""
        stops = [x for x in (self.end, self.cancel) if x is not None]
        return self.index < i and (not stops or i < min(stops))

    def open_during(self, a: float, b: float) -> bool:
        """In flight at some moment of ``[a, b]`` (ms)."""
        stops = [x for x in (self.end_ms, self.cancel_ms) if x is not None]
        return self.t_ms <= b and (not stops or min(stops) > a)


def _calls(events: list[EventRecord]) -> list[_Call]:
    calls: list[_Call] = []
    latest: int | None = None
    for i, e in enumerate(events):
        if e.kind == "state.updated" and e.version is not None:
            latest = e.version if latest is None else max(latest, e.version)
        elif e.kind == "tool.started":
            calls.append(_Call(i, e.t_ms, e.operation_id, e.state_version, e.args_hash, latest))
        elif e.kind in ("tool.finished", "tool.cancelled") and e.operation_id is not None:
            mine = [c for c in calls if c.op == e.operation_id]
            if not mine:
                continue
            if e.kind == "tool.finished":
                c = next((c for c in reversed(mine) if c.end is None), mine[-1])
                if c.end is None:
                    c.end, c.end_ms, c.status = i, e.t_ms, e.status
            else:
                c = next((c for c in reversed(mine) if c.cancel is None), mine[-1])
                if c.cancel is None:
                    c.cancel, c.cancel_ms = i, e.t_ms
        elif e.kind == "backend.verified" and e.operation_id is not None:
            for c in calls:
                if c.op == e.operation_id:
                    c.verified = True
    return calls


def _caller_speech(receipt: Receipt) -> list[tuple[float, float]]:
    """When the caller was speaking: each turn's caller speech, onset to offset (ms)."""
    out: list[tuple[float, float]] = []
    for t in receipt.turns:
        barge = t.barge_in.onset_ms if t.barge_in is not None else None
        onsets = [x for x in (t.caller_onset_ms, barge) if x is not None]
        if onsets:
            a = min(onsets)
            out.append((a, t.caller_offset_ms if t.caller_offset_ms is not None else a))
    return out


def _barge_ins(receipt: Receipt) -> list[tuple[float, float]]:
    """Each barge-in, from its onset to the end of the caller's speech in that turn (ms)."""
    out: list[tuple[float, float]] = []
    for t in receipt.turns:
        if t.barge_in is not None:
            a = t.barge_in.onset_ms
            b = t.caller_offset_ms
            out.append((a, b if b is not None and b > a else a))
    return out


def _mark_stale(receipt: Receipt, events: list[EventRecord], calls: list[_Call]) -> None:
    barges = _barge_ins(receipt)
    for c in calls:
        if c.version is not None and c.latest is not None and c.version < c.latest:
            c.stale_by.append("built from a stale state")
        for i, e in enumerate(events):
            if (
                e.kind == "state.updated"
                and e.version is not None
                and (c.version is None or e.version > c.version)
                and c.open_at(i)
            ):
                c.stale_by.append("in flight at a newer state")
                break
        if any(c.open_during(a, b) for a, b in barges):
            c.stale_by.append("in flight while the caller barged in")


def _unexplained_cancels(receipt: Receipt, events: list[EventRecord], calls: list[_Call]) -> int:
    """Cancels that neither caller speech (begun before the cancel, not over before the call
    started) nor a newer state since the call began explains."""
    speech = _caller_speech(receipt)
    n = 0
    for c in calls:
        if c.cancel is None or c.cancel_ms is None:
            continue
        newer = any(
            e.kind == "state.updated"
            and e.version is not None
            and (c.version is None or e.version > c.version)
            for e in events[c.index : c.cancel]
        )
        spoke = any(a <= c.cancel_ms and b >= c.t_ms for a, b in speech)
        if not newer and not spoke:
            n += 1
    return n


# -- scoring ------------------------------------------------------------------------------


def score(receipt: Receipt | None, expected: ExpectedOutcome, secret: bytes) -> CallScore:
    """The six axes of one call (no receipt: every axis fails)."""
    if receipt is None:
        return CallScore(
            {a: AxisResult(False, expected.wants(a), "no receipt for the call") for a in AXES},
            ("unexplained",),
        )

    def value(v: JsonValue) -> str:
        return value_digest(secret, "value", v)

    events = list(receipt.events)
    calls = _calls(events)
    _mark_stale(receipt, events, calls)
    flagged = {t.operation_id for t in receipt.tools if t.stale_write}
    effective = [c for c in calls if c.took_effect]
    states = [e for e in events if e.kind == "state.updated"]
    results: dict[Axis, tuple[bool, str]] = {}

    # 1. captured
    missing = [
        f
        for f, v in expected.state.items()
        if not any(e.field == f and e.value_hash == value(v) for e in states)
    ]
    unnoticed = [
        t.index for t in receipt.turns if t.barge_in is not None and t.barge_in.outcome != "stopped"
    ]
    yields = receipt.summary.yielded_without_caller_speech
    phantom_cancels = _unexplained_cancels(receipt, events, calls)
    if missing:
        results["captured"] = (False, f"never took up the value of {', '.join(missing)}")
    elif unnoticed:
        results["captured"] = (False, f"barge-in not noticed in turn {unnoticed[0]}")
    elif yields or phantom_cancels:
        results["captured"] = (
            False,
            f"took a sound for an interruption ({yields} yield(s) without caller speech, "
            f"{phantom_cancels} cancel(s) nothing explains)",
        )
    else:
        results["captured"] = (True, "every change taken up, no phantom interruption")

    # 2. active_state_correct
    wrong: list[str] = []
    for f, v in expected.state.items():
        mine = [e for e in states if e.field == f]
        if not mine:
            wrong.append(f"{f} never set")
            continue
        top = max(e.version or 0 for e in mine)
        last = [e for e in mine if (e.version or 0) == top][-1]
        if last.value_hash != value(v):
            wrong.append(f"{f} (version {top}) holds another value")
    results["active_state_correct"] = (
        (False, "; ".join(wrong)) if wrong else (True, "the latest state holds the expected values")
    )

    # 3. tool_args_correct
    behind = [c for c in calls if c.version != c.latest]
    if behind:
        c = behind[0]
        results["tool_args_correct"] = (
            False,
            f"{c.op} built from state version {c.version}, the latest was {c.latest}",
        )
    elif expected.should_execute:
        want = value_digest(secret, "args", expected.args)
        if not effective:
            results["tool_args_correct"] = (False, "no call took effect")
        elif effective[-1].args_hash != want:
            results["tool_args_correct"] = (
                False,
                f"{effective[-1].op} took effect with other arguments",
            )
        else:
            results["tool_args_correct"] = (True, "current arguments, as expected")
    else:
        results["tool_args_correct"] = (True, "every call built from the latest state")

    # 4. stale_write_prevented
    stale = [c for c in effective if c.stale_by or c.op in flagged]
    if stale:
        c = stale[0]
        why = c.stale_by[0] if c.stale_by else "flagged stale_write"
        results["stale_write_prevented"] = (False, f"{c.op} took effect, {why}")
    elif not expected.should_execute and effective:
        results["stale_write_prevented"] = (
            False,
            f"{effective[0].op} took effect; the caller withdrew the action",
        )
    else:
        results["stale_write_prevented"] = (True, "no stale call took effect")

    # 5. backend_correct
    final: dict[str, EventRecord] = {}
    for e in events:
        if e.kind == "backend.verified" and e.field is not None:
            final[e.field] = e
    off = [
        f for f, v in expected.backend.items() if f not in final or final[f].value_hash != value(v)
    ]
    results["backend_correct"] = (
        (False, f"the backend does not hold the expected {', '.join(off)}")
        if off
        else (True, "the backend holds the expected values")
    )

    # 6. confirmation_matches_backend
    results["confirmation_matches_backend"] = _confirmations(events, final)

    axes = {a: AxisResult(results[a][0], expected.wants(a), results[a][1]) for a in AXES}
    found = causes(receipt, calls=calls, events=events)
    if not found and not all(r.ok for r in axes.values()):
        found = ("unexplained",)
    return CallScore(axes, found)


def _confirmations(events: list[EventRecord], final: Mapping[str, EventRecord]) -> tuple[bool, str]:
    verified: dict[str, str | None] = {}
    last: dict[str, str | None] = {}
    told = 0
    for e in events:
        if e.kind == "backend.verified" and e.field is not None:
            verified[e.field] = e.value_hash
        elif e.kind == "confirmation" and e.field is not None:
            told += 1
            if e.field not in verified or verified[e.field] != e.value_hash:
                return (False, f"confirmed {e.field} before the backend held it")
            last[e.field] = e.value_hash
    if not told:
        return (False, "the agent never confirmed the result")
    for f, h in last.items():
        if f in final and final[f].value_hash != h:
            return (False, f"the last confirmation of {f} differs from what the backend holds")
    return (True, "every confirmation matches the backend")


def causes(
    receipt: Receipt,
    *,
    calls: list[_Call] | None = None,
    events: list[EventRecord] | None = None,
) -> tuple[Cause, ...]:
    """The causes of failure the call's events show, in :data:`CAUSES` order."""
    events = list(receipt.events) if events is None else events
    if calls is None:
        calls = _calls(events)
        _mark_stale(receipt, events, calls)
    found: set[Cause] = set()
    if any(c.version is not None and c.latest is not None and c.version < c.latest for c in calls):
        found.add("stale_args")
    flagged = {t.operation_id for t in receipt.tools if t.stale_write}
    for c in calls:
        if c.took_effect and (
            any(s != "built from a stale state" for s in c.stale_by) or c.op in flagged
        ):
            found.add("not_cancelled")
        if c.took_effect and not c.verified:
            found.add("unchecked_result")
    if receipt.summary.yielded_without_caller_speech or _unexplained_cancels(
        receipt, events, calls
    ):
        found.add("noise_interruption")
    if any(t.unsafe_retry for t in receipt.tools):
        found.add("unsafe_retry")
    for i, e in enumerate(events):
        if e.kind != "confirmation":
            continue
        for c in calls:
            current = not any(
                x.kind == "state.updated"
                and x.version is not None
                and (c.version is None or x.version > c.version)
                for x in events[c.index : i]
            )
            if c.open_at(i) and current:
                found.add("early_confirmation")
    return tuple(c for c in CAUSES if c in found)


# -- many calls ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tally:
    calls: int
    axes: dict[Axis, int]  # calls where the axis came out as expected
    integrity: int
    causes: dict[Cause, int]  # failing calls showing each cause (a call may show several)


def tally(scores: Iterable[CallScore]) -> Tally:
    """Counts over calls, axis by axis (never averaged into one score)."""
    listed = list(scores)
    axes = {a: sum(1 for s in listed if s.axes[a].ok) for a in AXES}
    found: Counter[Cause] = Counter()
    for s in listed:
        if not s.integrity:
            found.update(s.causes)
    return Tally(
        calls=len(listed),
        axes=axes,
        integrity=sum(1 for s in listed if s.integrity),
        causes={c: found[c] for c in CAUSES if found[c]},
    )
