"""The run summary says when the load generator could not keep its own clock."""

from __future__ import annotations

import io
from typing import Any

from voxproxy.loadgen.report import write_report
from voxproxy.loadgen.results import PACING_LAG_LIMIT_MS, overload_warning, summarize
from voxproxy.loadgen.runner import print_summary


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
