"""report.html reads as it should: numbers keep their unit on their line, CDFs start at
0, a call's timeline marks each time to first sound, counts agree with their nouns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from voxproxy.loadgen import report
from voxproxy.loadgen.caller import CallRecord
from voxproxy.loadgen.results import CallOutcome, summarize
from voxproxy.loadgen.scenario import find_scenario


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    drawn: list[Any] = []

    def keep(fig: Any) -> str:
        drawn.append(fig)
        return "<svg></svg>"

    monkeypatch.setattr(report, "_svg", keep)
    return drawn


def test_cdf_axes_start_at_zero(figures: list[Any]) -> None:
    report.cdf({"a": [400.0, 500.0, 900.0]}, "ms", "ttfs")
    (ax,) = figures[0].axes
    assert ax.get_ylim()[0] == 0.0
    assert ax.get_ylim()[1] >= 1.0


def _outcome(scenario: str) -> CallOutcome:
    """A call of ``scenario`` with an empty record, to draw a timeline on."""
    return CallOutcome(find_scenario(scenario)[0], 0, "CA1", "raw", CallRecord(t0_ns=0))


def test_a_timeline_marks_each_time_to_first_sound(figures: list[Any]) -> None:
    outcome = _outcome("normal_question")
    result = {
        "passed": True,
        "turns": [
            {"truth": {"caller_offset_ms": 1500.0, "ttfs_ms": 640.0}},
            {"truth": {"caller_offset_ms": 6000.0, "ttfs_ms": None}},  # no response: no mark
        ],
    }
    report._timeline(outcome, result)
    (ax,) = figures[0].axes
    assert [t.get_text() for t in ax.texts if t.get_text()] == ["ttfs 640 ms"]
    (arrow,) = [t for t in ax.texts if not t.get_text()]
    assert arrow.xy == (pytest.approx(2.14), 1.9) and arrow.xyann == (1.5, 1.9)


def test_a_timeline_marks_where_each_threshold_falls(figures: list[Any]) -> None:
    outcome = _outcome("interruption")
    result = {
        "passed": True,
        "turns": [
            {
                "barge_in": False,
                "truth": {"caller_onset_ms": 200.0, "caller_offset_ms": 1500.0, "ttfs_ms": 640.0},
                "limits": {"ttfs_ms_max": 1200.0, "stop_latency_ms_max": None},
            },
            {
                "barge_in": True,
                "truth": {"caller_onset_ms": 3000.0, "caller_offset_ms": 4000.0, "ttfs_ms": None},
                "limits": {"ttfs_ms_max": None, "stop_latency_ms_max": 500.0},
            },
        ],
    }
    report._timeline(outcome, result)
    (ax,) = figures[0].axes
    dashed = [ln.get_xdata()[0] for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert dashed == [pytest.approx(2.7), pytest.approx(3.5)]


def _result(no_response: int) -> dict[str, Any]:
    return {
        "scenario": "a",
        "passed": True,
        "error": None,
        "turns": [],
        "noises": [],
        "silences": [],
        "no_response": no_response,
        "failures": [],
        "pacing_lag_ms_p99": None,
        "transcripts_unmatched": 0,
    }


@pytest.mark.parametrize(
    ("missed", "words"), [(1, "1 missed response,"), (2, "2 missed responses,")]
)
def test_counts_agree_with_their_nouns_and_units_do_not_wrap(
    tmp_path: Path, missed: int, words: str
) -> None:
    meta = {"target": "ws://x", "dialect": "raw", "calls": 1, "concurrency": 1, "finished_at": "t"}
    report.write_report(tmp_path / "r.html", meta, [], summarize([_result(missed)]), [])
    page = (tmp_path / "r.html").read_text()
    assert words in page
    assert "0 turns, 0 barge-ins" in page
    assert "td{white-space:nowrap}" in page
