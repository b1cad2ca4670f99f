"""The run summary says first what went wrong with the run itself: calls that did not get
through, a wire the target did not expect, a generator that could not keep its own clock."""

from __future__ import annotations

import io
from typing import Any

import pytest

from voxproxy.loadgen.report import write_report
from voxproxy.loadgen.results import (
    PACING_LAG_LIMIT_MS,
    error_cause,
    overload_warning,
    problem_lines,
    summarize,
)
from voxproxy.loadgen.runner import NO_TERMINAL_COLUMNS, print_summary


def _result(scenario: str, lag_p99: float | None) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "passed": True,
        "error": None,
        "turns": [],
        "noises": [],
        "silences": [],
        "no_response": 0,
        "failures": [],
        "pacing_lag_ms_p99": lag_p99,
        "transcripts_unmatched": 0,
    }


def test_a_generator_that_fell_behind_its_clock_is_called_out(tmp_path: Any) -> None:
    slow = summarize([_result("a", 1.2), _result("a", 14.5), _result("b", None)])
    assert slow["all"]["pacing_lag_ms_p99"] == 14.5 and slow["all"]["generator_overloaded"]
    assert slow["b"]["generator_overloaded"] is False
    warning = overload_warning(slow)
    assert warning is not None and "pacing lag p99 14.5 ms > 5 ms" in warning
    out = io.StringIO()
    print_summary(slow, file=out)
    assert "fell behind its own clock" in out.getvalue()
    meta = {"target": "ws://x", "dialect": "raw", "calls": 3, "concurrency": 3, "finished_at": "t"}
    write_report(tmp_path / "report.html", meta, [], slow, [])
    assert "fell behind its own clock" in (tmp_path / "report.html").read_text()
    # A run that kept its clock says nothing.
    fine = summarize([_result("a", PACING_LAG_LIMIT_MS - 1.0)])
    assert overload_warning(fine) is None and not fine["all"]["generator_overloaded"]
    out = io.StringIO()
    print_summary(fine, file=out)
    assert "fell behind" not in out.getvalue()


def test_the_summary_fits_the_terminal_and_cuts_no_name() -> None:
    summary = summarize([_result("normal_question", 1.0), _result("background_noise", 1.0)])
    for width in (80, 100, 160):
        out = io.StringIO()
        print_summary(summary, file=out, width=width)
        lines = out.getvalue().splitlines()
        assert lines and max(len(line) for line in lines) <= width, width
        assert "…" not in out.getvalue()


def test_a_wire_the_target_proxy_did_not_expect_comes_first() -> None:
    def spoke(wire: str | None) -> dict[str, Any]:
        r = _result("a", 1.0)
        r["receipt"] = {"dialect": "twilio", "wire_looks_like": wire}
        return r

    summary = summarize([spoke("raw"), spoke("raw"), spoke(None), _result("a", 1.0)])
    assert summary["all"]["dialect_mismatches"] == {"raw twilio": 2}
    (line,) = problem_lines(summary)
    assert line.startswith("2 calls spoke raw, but the target's voxproxy expects twilio")
    assert "--dialect twilio" in line
    out = io.StringIO()
    print_summary(summary, file=out, width=80)
    assert out.getvalue().startswith(line + "\n")
    assert problem_lines(summarize([spoke(None)])) == []


def test_a_failed_call_is_counted_under_its_cause_without_addresses() -> None:
    refused = "ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 9)"
    assert error_cause(refused) == "connection refused"
    status = "InvalidStatus: HTTP 503 from the target: voxproxy is shutting down"
    assert error_cause(status) == "HTTP 503 from the target: voxproxy is shutting down"
    rs = [_result("a", 1.0) for _ in range(3)]
    rs[0]["error"], rs[1]["error"] = refused, status
    summary = summarize(rs)
    assert summary["all"]["errors"] == 2
    assert problem_lines(summary) == [
        "2 of 3 calls failed: connection refused (×1); "
        "HTTP 503 from the target: voxproxy is shutting down (×1)"
    ]


def test_without_a_terminal_the_table_is_not_squeezed_to_80_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    summary = summarize([_result("normal_question", 1.0)])
    out = io.StringIO()  # a pipe or a log file
    print_summary(summary, file=out)
    lines = out.getvalue().splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("┏"))
    end = next(i for i, line in enumerate(lines) if line.startswith("┡"))
    header = " ".join(lines[top + 1 : end])
    assert end - top - 1 <= 2, lines[top:end]  # at most two header lines, no word cut
    for word in ("scenario", "ttfs", "barge-ins", "stopped", "reprompts", "missed", "proxy"):
        assert f" {word} " in header, word
    assert max(len(line) for line in lines) <= NO_TERMINAL_COLUMNS
