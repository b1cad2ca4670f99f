"""The transcript section of a load run's report (``voxproxy/transcripts/html.py``), made
from summaries the scorer builds from handed-in turns and transcripts."""

from __future__ import annotations

import re
from typing import Any

from voxproxy.core.timebase import NS_PER_MS
from voxproxy.transcripts.html import MAX_ROWS, transcripts_section
from voxproxy.transcripts.loadrun import score_call, summarize_calls

MS = NS_PER_MS


def _figures(said: list[str], heard: list[str | None]) -> dict[str, Any]:
    """The transcript figures of one call whose turn k said ``said[k]`` and was heard
    as ``heard[k]`` (None: no transcript for it)."""
    speech = [(k * 4000 * MS, (k * 4000 + 1000) * MS, text) for k, text in enumerate(said)]
    transcripts = [
        ((k * 4000 + 1500) * MS, "user", text, True)
        for k, text in enumerate(heard)
        if text is not None
    ]
    entries, _ = score_call(speech, transcripts, 0)
    return summarize_calls([{"turns": [{"transcript": e} for e in entries]}])


def _summary(every: dict[str, Any], **scenarios: dict[str, Any] | None) -> dict[str, Any]:
    latency = {"ttfs_ms": {"p50": 612.4, "p95": 901.0}, "stop_latency_ms": {"p95": None}}
    out: dict[str, Any] = {name: {**latency, "transcripts": t} for name, t in scenarios.items()}
    out["all"] = {**latency, "transcripts": every}
    return out


def _rows(page: str) -> list[str]:
    return re.findall(r"<tr>(.*?)</tr>", page)


def test_without_a_scorecard_the_section_says_why_in_one_line() -> None:
    silent = _figures(["Where is my order?"], [])
    page = transcripts_section(_summary(silent))
    assert "Not scored: the agent reported no transcript of the caller&#x27;s speech." in page
    assert "<table" not in page
    page = transcripts_section({"all": {"ttfs_ms": {}}})
    assert "Not scored: no turn had both a reference text and the agent" in page


def test_each_scenario_s_row_sits_beside_its_latency() -> None:
    good = _figures(["Where is my order?"], ["where is my order"])
    half = _figures(["Order 4281, please."], ["order 4821 please"])
    page = transcripts_section(_summary(good, quick=good, order_4281=half, unscored=None))
    rows = {r.split("</td>")[0].removeprefix("<td>"): r for r in _rows(page) if "<td>" in r}
    assert "unscored" not in rows and "all" not in rows
    assert "<td>612 ms</td><td>901 ms</td><td>—</td>" in rows["quick"]
    assert "<td>0.0 %</td><td>0 / 0 / 0</td>" in rows["quick"]
    assert "<td>0 of 0</td>" in rows["quick"] and "<td>0 of 1</td>" in rows["order_4281"]
    assert "Scorecard, all calls: " in page and " / 100</h3>" in page


def test_what_the_agent_got_wrong_is_listed_and_capped_and_names_are_escaped() -> None:
    n = MAX_ROWS + 5
    said = [f"Order {4000 + k}, now." for k in range(n)]
    heard: list[str | None] = [f"order {5000 + k} now" for k in range(n - 1)] + [None]
    every = _figures(said, heard)
    page = transcripts_section(_summary(every, **{"<i>s</i>": every}))
    assert "<td>&lt;i&gt;s&lt;/i&gt;</td>" in page and "<i>" not in page  # escaped
    rows = _rows(page)
    numbers = [r for r in rows if re.fullmatch(r"<td>4\d{3}</td><td>5\d{3}</td>", r)]
    assert numbers[:2] == ["<td>4000</td><td>5000</td>", "<td>4001</td><td>5001</td>"]
    assert len(numbers) == MAX_ROWS  # capped: n numbers were missed
    words = [r for r in rows if re.match(r"<td>4\d{3}</td><td>1</td>", r)]
    assert len(words) == MAX_ROWS
    assert "1 turn(s) with no transcript from the agent" in page
    assert "Numbers: 0 of " in page


def test_a_run_heard_perfectly_recognized_every_word() -> None:
    every = _figures(["Thanks, that's all."], ["thanks that's all"])
    page = transcripts_section(_summary(every))
    assert "<p class='ok'>none</p>" in page
    assert "turn(s) with no transcript" not in page
    assert page.count("<h2>") == 1
