"""Content-free call flows, replayed into receipts through the real measurement machinery.

A flow is a call's timeline with times relative to call start (``t_ms``) and
only the fields classification needs: call edges (``connected``,
``answered``, ``ended`` with its terminal state), speech edges
(``caller_speech_start/end``, ``agent_audio_start/end`` on the playout
timeline), flushes, and the tool, state and outcome events of MEASUREMENT.md
section 5. Each flow may carry the verdict it expects (``expect``).

:func:`replay` is pure. It pairs the edges into talk-spurts, applies flushes as
the playout model does (a flush cuts the audible agent audio at its time),
feeds spurts and flushes to :class:`~voxproxy.core.turns.TurnMachine` in time order,
hands the tool events to a :class:`~voxproxy.core.session.CallSession` and lets the
session build the receipt (which runs :func:`voxproxy.core.effects.derive`). An edge
whose end is missing lasts until the call ends, as a speech detector's
``finish`` does. Files are read and validated at the edge (:func:`load_flow`).

Example::

    name: pass
    expect: {verdict: pass}
    events:
      - {t_ms: 0, kind: connected}
      - {t_ms: 120, kind: answered}
      - {t_ms: 400, kind: caller_speech_start}
      - {t_ms: 1600, kind: caller_speech_end}
      - {t_ms: 2200, kind: agent_audio_start}
      ...
      - {t_ms: 9000, kind: ended, terminal: completed}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from voxproxy.core.analysis.vad import Spurt
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.raw import RawDecoder
from voxproxy.core.errors import FixtureError
from voxproxy.core.events import ToolEvent, ToolKind
from voxproxy.core.receipt import (
    TOOL_EVENT_FIELDS,
    CloseInfo,
    Receipt,
    Terminal,
    ToolEventFields,
)
from voxproxy.core.session import CallSession, SessionConfig
from voxproxy.core.timebase import NS_PER_MS, EpochAnchor
from voxproxy.core.turns import FlushMark
from voxproxy.receipts.policy import GateName
from voxproxy.receipts.verdict import Verdict
from voxproxy.yamlmodel import validate

FLOW_SECRET = b"voxproxy-flows"
FLOW_DIALECT = "flow"

EdgeKind = Literal[
    "connected",
    "answered",
    "caller_speech_start",
    "caller_speech_end",
    "agent_audio_start",
    "agent_audio_end",
    "flush",
    "ended",
]
FlowKind = Literal[EdgeKind, ToolKind]

_FIELDS: dict[str, frozenset[str]] = {
    "ended": frozenset({"terminal", "upstream_status"}),
    "state.updated": frozenset({"field", "version", "value_hash"}),
    "tool.started": frozenset(
        {"operation_id", "tool", "attempt", "state_version", "args_hash", "idempotency_key"}
    ),
    "tool.finished": frozenset({"operation_id", "status", "result_hash"}),
    "tool.cancelled": frozenset({"operation_id"}),
    "backend.verified": frozenset({"operation_id", "field", "value_hash"}),
    "confirmation": frozenset({"field", "value_hash"}),
    "outcome.verified": frozenset({"verified"}),
}
"""The fields each kind may carry (MEASUREMENT.md section 5); edges carry none."""

_INITIATOR: dict[str, Literal["caller", "agent", "proxy", "none"]] = {
    "completed": "caller",
    "caller_closed": "caller",
    "agent_closed": "agent",
    "caller_vanished": "none",
    "agent_vanished": "none",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class _FlowHead(_Model):
    t_ms: float = Field(ge=0, description="Time from call start.")
    kind: FlowKind
    terminal: Terminal | None = None
    upstream_status: int | None = None


# An edge of the call or a tool event; the head's fields first (pydantic puts the
# fields of the last base first).
class FlowEvent(ToolEventFields, _FlowHead):
    status: Literal["ok", "error", "timeout", "malformed"] | None = None

    @model_validator(mode="after")
    def _only_its_fields(self) -> FlowEvent:
        allowed = _FIELDS.get(self.kind, frozenset())
        given = {k for k in self.model_fields_set if k not in ("t_ms", "kind")}
        extra = sorted(given - allowed)
        if extra:
            raise ValueError(f"{self.kind} does not carry {', '.join(extra)}")
        if self.kind == "ended" and self.terminal is None:
            raise ValueError("ended needs its terminal state")
        if self.kind == "outcome.verified" and self.verified is None:
            raise ValueError("outcome.verified needs verified: true or false")
        return self


class FlowExpect(_Model):
    verdict: Verdict
    gate: GateName | None = None
    cause: str | None = None


class Flow(_Model):
    name: str = Field(min_length=1)
    description: str = ""
    expect: FlowExpect | None = None
    events: tuple[FlowEvent, ...]

    @model_validator(mode="after")
    def _well_formed(self) -> Flow:
        kinds = [e.kind for e in self.events]
        for once in ("connected", "ended"):
            if kinds.count(once) != 1:
                raise ValueError(f"a flow has exactly one {once} event (found {kinds.count(once)})")
        if kinds.count("answered") > 1:
            raise ValueError("a flow has at most one answered event")
        connected = next(e for e in self.events if e.kind == "connected")
        if connected.t_ms != 0:
            raise ValueError("connected is the call start: t_ms 0")
        end = next(e for e in self.events if e.kind == "ended")
        late = [e for e in self.events if e.t_ms > end.t_ms]
        if late:
            raise ValueError(f"{late[0].kind} at {late[0].t_ms} ms comes after ended")
        for who, start, stop in (
            ("caller", "caller_speech_start", "caller_speech_end"),
            ("agent", "agent_audio_start", "agent_audio_end"),
        ):
            open_at: float | None = None
            for e in _ordered(self.events):
                if e.kind == start:
                    if open_at is not None:
                        raise ValueError(
                            f"{start} at {e.t_ms} ms: the {who}'s edge opened at {open_at} ms "
                            "has no end"
                        )
                    open_at = e.t_ms
                elif e.kind == stop:
                    if open_at is None:
                        raise ValueError(f"{stop} at {e.t_ms} ms has no start")
                    if e.t_ms <= open_at:
                        raise ValueError(f"{stop} at {e.t_ms} ms does not follow its start")
                    open_at = None
        return self


def _ordered(events: tuple[FlowEvent, ...]) -> list[FlowEvent]:
    return sorted(events, key=lambda e: e.t_ms)  # stable: same-time events keep file order


def _ns(ms: float) -> int:
    return round(ms * NS_PER_MS)


def _spurts(events: list[FlowEvent], start: str, stop: str, end_ns: int) -> list[Spurt]:
    out: list[Spurt] = []
    onset: int | None = None
    for e in events:
        if e.kind == start:
            onset = _ns(e.t_ms)
        elif e.kind == stop and onset is not None:
            out.append(Spurt(onset, _ns(e.t_ms)))
            onset = None
    if onset is not None and end_ns > onset:
        out.append(Spurt(onset, end_ns))  # still going when the call ended
    return out


def _apply_flushes(agent: list[Spurt], flush_ns: list[int]) -> tuple[list[Spurt], list[FlushMark]]:
    """Cut agent audio at each flush (the playout model); note which flushes cut audio."""
    marks: list[FlushMark] = []
    spurts = list(agent)
    for t in flush_ns:
        cut = False
        for i, s in enumerate(spurts):
            if s.onset_ns < t <= s.offset_ns:
                cut = True
                spurts[i] = Spurt(s.onset_ns, t)
        marks.append(FlushMark(t, cut))
    return spurts, marks


def replay(flow: Flow, *, secret: bytes = FLOW_SECRET) -> Receipt:
    """The receipt a call with this timeline gets (no verdict attached). Pure."""
    events = _ordered(flow.events)
    end = next(e for e in events if e.kind == "ended")
    end_ns = _ns(end.t_ms)
    session = CallSession(
        RawDecoder(DialectOptions()),  # never fed: flows carry no wire messages
        0,
        secret=secret,
        link_id=f"flow:{flow.name}",
        config=SessionConfig(transport="offline"),
        anchor=EpochAnchor(mono_ns=0, wall_ns=0),
    )
    caller = _spurts(events, "caller_speech_start", "caller_speech_end", end_ns)
    agent, flushes = _apply_flushes(
        _spurts(events, "agent_audio_start", "agent_audio_end", end_ns),
        [_ns(e.t_ms) for e in events if e.kind == "flush"],
    )
    # Time order; at equal times a flush, then caller, then agent (as the session feeds).
    feed: list[tuple[int, int, Spurt | FlushMark]] = [
        *((f.t_ns, 0, f) for f in flushes),
        *((s.onset_ns, 1, s) for s in caller),
        *((s.onset_ns, 2, s) for s in agent),
    ]
    machine = session.turns
    for _, which, item in sorted(feed, key=lambda x: (x[0], x[1])):
        if isinstance(item, FlushMark):
            machine.flush(item)
        elif which == 1:
            machine.caller_spurt(item)
        else:
            machine.agent_spurt(item)
    answered: int | None = None
    for e in events:
        if e.kind == "answered":
            answered = _ns(e.t_ms)
            session.on_upstream_connected(answered)
        elif e.kind in _TOOL_KINDS:
            session.on_event(_tool_event(e))
    terminal = end.terminal
    assert terminal is not None  # validated
    close = CloseInfo(
        initiator=_INITIATOR.get(terminal, "proxy"),
        upstream_status=101 if answered is not None else end.upstream_status,
    )
    receipt = session.close(end_ns, terminal, close, dialect=FLOW_DIALECT)
    # Flushes reach the turn machine directly here, not through the session's decoder.
    summary = receipt.summary.model_copy(update={"flushes": len(flushes)})
    return receipt.model_copy(update={"summary": summary})


_TOOL_KINDS = frozenset(get_args(ToolKind))


def _tool_event(e: FlowEvent) -> ToolEvent:
    fields = e.model_dump(include=set(TOOL_EVENT_FIELDS))
    return ToolEvent(kind=e.kind, t_ns=_ns(e.t_ms), source="api", **fields)


# -- files (the edge) ---------------------------------------------------------------------


def parse_flow(data: Any, source: str = "<flow>") -> Flow:
    return validate(Flow, data, source, "flow", error=FixtureError)


def load_flow(path: str | Path) -> Flow:
    """A flow file, YAML or JSON."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        data = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise FixtureError(f"{path}: cannot read flow: {exc}") from None
    return parse_flow(data, str(path))


def load_flows(directory: str | Path) -> list[Flow]:
    """Every ``*.yaml``, ``*.yml`` and ``*.json`` flow in ``directory``, by file name."""
    root = Path(directory)
    paths = sorted(p for p in root.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
    return [load_flow(p) for p in paths]
