"""Receipts from short inline timelines, through the flow replayer (the real machinery)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from support.scripted.flows import load_flows, parse_flow, replay
from voxproxy.core.receipt import Receipt

FLOWS_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "flows"
POLICIES_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "policies"

Edge = tuple[float, float | None]  # (start, end); end None: still going when the call ends


def events(
    *,
    caller: Sequence[Edge] = (),
    agent: Sequence[Edge] = (),
    flushes: Sequence[float] = (),
    tools: Iterable[dict[str, Any]] = (),
    answered_ms: float | None = 100.0,
    end_ms: float = 10_000.0,
    terminal: str = "completed",
    outcome: bool | None = True,
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"t_ms": 0, "kind": "connected"}]
    if answered_ms is not None:
        out.append({"t_ms": answered_ms, "kind": "answered"})
    for who, edges in (("caller_speech", caller), ("agent_audio", agent)):
        for start, end in edges:
            out.append({"t_ms": start, "kind": f"{who}_start"})
            if end is not None:
                out.append({"t_ms": end, "kind": f"{who}_end"})
    out.extend({"t_ms": t, "kind": "flush"} for t in flushes)
    out.extend(dict(t) for t in tools)
    if outcome is not None:
        out.append({"t_ms": end_ms - 10, "kind": "outcome.verified", "verified": outcome})
    out.append({"t_ms": end_ms, "kind": "ended", "terminal": terminal})
    return out


def call(name: str = "t", **kwargs: Any) -> Receipt:
    """A receipt for the timeline :func:`events` builds from ``kwargs``."""
    return replay(parse_flow({"name": name, "events": events(**kwargs)}))


def healthy(**overrides: Any) -> Receipt:
    """Answered, one 600 ms response, an outcome check that holds."""
    kwargs: dict[str, Any] = {"caller": [(500, 1500)], "agent": [(2100, 3000)], "end_ms": 4000}
    kwargs.update(overrides)
    return call(**kwargs)


def tool_event(kind: str, t_ms: float, **fields: Any) -> dict[str, Any]:
    """A tool, state or outcome event of a flow, at ``t_ms`` from the call's start."""
    return {"t_ms": t_ms, "kind": kind, **fields}


def retried_after_timeout(
    t_ms: float, tool: str, first: tuple[str, str], second: tuple[str, str]
) -> list[dict[str, Any]]:
    """A call of ``tool`` at ``t_ms`` that times out, and its retry (attempt 2) that
    succeeds: each is (operation id, idempotency key)."""
    (op1, key1), (op2, key2) = first, second
    start = {"tool": tool, "args_hash": "h"}
    return [
        tool_event("tool.started", t_ms, operation_id=op1, **start, idempotency_key=key1),
        tool_event("tool.finished", t_ms + 300, operation_id=op1, status="timeout"),
        tool_event(
            "tool.started", t_ms + 400, operation_id=op2, **start, idempotency_key=key2, attempt=2
        ),
        tool_event("tool.finished", t_ms + 600, operation_id=op2, status="ok"),
    ]


def flow_receipts() -> list[Receipt]:
    return [replay(f) for f in load_flows(FLOWS_DIR)]


def write_jsonl(path: Path, receipts: Iterable[Receipt]) -> Path:
    path.write_text("".join(r.to_json_line() for r in receipts), encoding="utf-8")
    return path
