"""``voxproxy gate``: the release gate's exit status and its one-screen explanation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.flowkit import flow_receipts, healthy, write_jsonl

from voxproxy.cli import main
from voxproxy.commands.gate import MAX_ROWS
from voxproxy.receipts.store import connect, insert


@pytest.fixture(autouse=True)
def _wide_and_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    for name in ("VOXPROXY_GATE_POLICY", "VOXPROXY_GATE_STORE"):
        monkeypatch.delenv(name, raising=False)


def ev(kind: str, t_ms: float, **fields: Any) -> dict[str, Any]:
    return {"t_ms": t_ms, "kind": kind, **fields}


def verified_booking(op: str) -> list[dict[str, Any]]:
    return [
        ev("tool.started", 1600, operation_id=op, tool="book", idempotency_key="k"),
        ev("tool.finished", 1900, operation_id=op, status="ok"),
        ev("backend.verified", 2000, operation_id=op, field="slot", value_hash="s1"),
        ev("confirmation", 2500, field="slot", value_hash="s1"),
    ]


def test_clean_receipts_pass_with_a_short_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_jsonl(
        tmp_path / "r.jsonl",
        [healthy(name="a", tools=verified_booking("a1")), healthy(name="b")],
    )
    policy = tmp_path / "p.yaml"
    policy.write_text("critical_tools: [book]\n")
    assert main(["gate", str(path), "--policy", str(policy)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("release gate: passed")
    assert "2 call(s), 1 tool call(s), 1 confirmation(s), 1 critical action(s)" in out
    assert "critical tools: book" in out
    assert len(out.splitlines()) <= 5


def test_failures_are_explained_by_call_turn_operation_and_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    receipts = flow_receipts()
    path = write_jsonl(tmp_path / "r.jsonl", receipts)
    policy = tmp_path / "p.yaml"
    policy.write_text("critical_tools: [transfer_call]\n")
    assert main(["gate", str(path), "--policy", str(policy)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("release gate: FAILED: 4 finding(s) in 4 of 12 call(s)")
    lines = out.splitlines()

    def row(op: str) -> list[str]:
        (line,) = [x for x in lines if f" {op} " in x]
        return [cell.strip() for cell in line.split("│")]

    retry = receipts[6]  # unsafe_retry_after_timeout
    assert row("op_2") == [
        "unsafe retry",
        retry.call,
        "0",
        "op_2",
        "book_appointment",
        "retry of op_1 without an idempotency key (previous attempt: timeout)",
    ]
    assert row("op_7")[0] == "stale write" and row("op_7")[-1].endswith(
        "correction without a cancel"
    )
    assert row("op_3")[-1] == "finished ok after a barge-in without a cancel"
    assert row("op_9")[0] == "critical, unverified"
    assert row("op_9")[-1] == (
        "critical action (no finish) with no backend.verified for operation op_9"
    )
    assert (
        "stale write: 2 · confirmation ≠ backend: 0 · unsafe retry: 1 · critical, unverified: 1"
        in out
    )


def test_a_confirmation_mismatch_fails_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = [*verified_booking("a")[:3], ev("confirmation", 2500, field="slot", value_hash="s0")]
    r = healthy(tools=tools)
    db = tmp_path / "r.db"
    conn = connect(db)
    insert(conn, [r])
    conn.close()
    assert main(["gate", "--store", str(db)]) == 1
    out = capsys.readouterr().out
    assert "confirmation ≠ backend" in out and r.call in out
    assert "confirmed slot differs from the backend's value" in out


def test_many_findings_stay_on_one_screen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = [*verified_booking("a")[:3], ev("confirmation", 2500, field="slot", value_hash="s0")]
    path = write_jsonl(tmp_path / "r.jsonl", [healthy(name=str(i), tools=tools) for i in range(40)])
    assert main(["gate", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"… and {40 - MAX_ROWS} more finding(s)" in out
    assert len(out.splitlines()) <= MAX_ROWS + 8


def test_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl: cannot read receipts" in capsys.readouterr().err
    path = write_jsonl(tmp_path / "r.jsonl", [healthy()])
    policy = tmp_path / "p.yaml"
    policy.write_text("critical_tools: book\n")
    assert main(["gate", str(path), "--policy", str(policy)]) == 2
    assert "p.yaml: invalid policy" in capsys.readouterr().err


def test_the_gate_names_the_policy_as_the_proxy_does_and_why_it_is_that_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from voxproxy.receipts.policy import load_policy
    from voxproxy.receipts.verdict import judged

    latency_only = load_policy("latency-only")
    path = write_jsonl(tmp_path / "r.jsonl", [judged(healthy(name="a"), latency_only)])
    assert main(["gate", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"policy {latency_only.label}; judged under latency-only" in out
