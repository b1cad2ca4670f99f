"""Derived tool checks (voxproxy.core.effects) on hand-built event timelines."""

from __future__ import annotations

from voxproxy.core.effects import derive, mismatched_confirmations
from voxproxy.core.events import ToolEvent

MS = 1_000_000


def test_a_call_built_from_state_already_corrected_is_a_stale_write() -> None:
    events = [
        ToolEvent("state.updated", 0, field="order", version=1, value_hash="h1"),
        ToolEvent("state.updated", 100 * MS, field="order", version=2, value_hash="h2"),
        ToolEvent(
            "tool.started",
            200 * MS,
            operation_id="op1",
            tool="update",
            state_version=1,
            idempotency_key="k",
        ),
        ToolEvent("tool.finished", 400 * MS, operation_id="op1", status="ok"),
    ]
    out = derive(events, [])
    assert out.stale_writes == 1
    assert out.calls[0].stale_cause == "outdated_state"
    # The same call built from the current version is fine.
    fresh = [
        *events[:2],
        ToolEvent(
            "tool.started",
            200 * MS,
            operation_id="op1",
            tool="update",
            state_version=2,
            idempotency_key="k",
        ),
        events[3],
    ]
    assert derive(fresh, []).stale_writes == 0


def test_only_the_last_confirmation_of_a_field_is_compared_with_the_backend() -> None:
    corrected = [
        ToolEvent("confirmation", 100 * MS, field="date", value_hash="old"),
        ToolEvent("backend.verified", 200 * MS, field="date", value_hash="new"),
        ToolEvent("confirmation", 300 * MS, field="date", value_hash="new"),
    ]
    assert mismatched_confirmations(corrected) == []
    assert derive(corrected, []).confirmation_mismatches == 0
    wrong = [*corrected[:2], ToolEvent("confirmation", 300 * MS, field="date", value_hash="old")]
    assert [e.value_hash for e in mismatched_confirmations(wrong)] == ["old"]
    assert derive(wrong, []).confirmation_mismatches == 1
