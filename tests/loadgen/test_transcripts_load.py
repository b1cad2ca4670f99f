"""A load run against a mock agent that mishears: the scorecard, the numbers and the
not-recognized list come out of results.json, summary.json and report.html, over loopback,
through a voxproxy whose receipts stay free of any transcript text."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from support.livecall import agent_behind_proxy
from support.waiting import wait_until

from voxproxy.core.receipt import Receipt
from voxproxy.loadgen.runner import LoadPlan, outcomes, run_calls, write_results
from voxproxy.loadgen.scenario import load_scenario
from voxproxy.mockagent import MockAgent, MockAgentConfig

SECRET = b"transcripts"
WAIT = "  - wait: {until: agent_end, quiet_ms: 300}\n"
SCENARIOS = {
    # A confused digit, then a dropped negation.
    "digits_and_no": "  - say: caller_order_number\n" + WAIT + "  - say: caller_no_dont\n" + WAIT,
    # A name (the acronym IBAN) misheard; the IBAN's digits right.
    "iban": "  - say: caller_iban\n" + WAIT,
    # A dropped negation alone (a short call).
    "no": "  - say: caller_no_dont\n" + WAIT,
    # Differences the policy forgives (a contraction; accents in Spanish).
    "forgiven": "  - say: caller_where_is_order\n" + WAIT + "  - say: caller_es_pedido\n" + WAIT,
}


async def _load(
    tmp_path: Path, dialect: str, names: list[str]
) -> tuple[dict[str, Any], list[dict[str, Any]], Path, MockAgent, dict[str, Receipt]]:
    # A short answer keeps each call brief; the agent reports what it heard in each turn.
    agent = MockAgent(
        MockAgentConfig(
            dialect=dialect,  # type: ignore[arg-type]
            transcripts=True,
            responses=("agent_reprompt",),
            seed=4,
        )
    )
    async with agent_behind_proxy(agent, SECRET) as (port, receipts):
        scenarios = []
        for name in names:
            path = tmp_path / f"{name}.yaml"
            path.write_text(f"name: '{name}'\nsteps:\n{SCENARIOS[name]}")
            scenarios.append((load_scenario(path), tmp_path))
        plan = LoadPlan(
            target=f"ws://127.0.0.1:{port}",
            dialect=dialect,
            scenarios=tuple(scenarios),
            calls=len(names),
            concurrency=len(names),
        )
        records = await run_calls(plan, list(range(len(names))))
        await wait_until(lambda: len(receipts) == len(names), what="every call's receipt")
    out = tmp_path / "out"
    write_results(out, plan, outcomes(plan, records, receipts, SECRET))
    summary = json.loads((out / "summary.json").read_text())
    results = json.loads((out / "results.json").read_text())["calls"]
    return summary, results, out, agent, receipts


@pytest.mark.slow
async def test_a_load_run_scores_what_the_agent_heard(tmp_path: Path) -> None:
    started = time.monotonic()
    names = ["digits_and_no", "iban", "forgiven"]
    summary, results, out, agent, receipts = await _load(tmp_path, "raw", names)
    elapsed = time.monotonic() - started
    # The mock named every clip from the audio alone.
    assert sorted(clip for log in agent.calls for _t, clip, _s in log.heard) == sorted(
        [
            "caller_order_number",
            "caller_no_dont",
            "caller_iban",
            "caller_where_is_order",
            "caller_es_pedido",
        ]
    )
    # Per turn, in results.json: the reference, what was heard, and the figures.
    turns = {t["clip"]: t["transcript"] for r in results for t in r["turns"]}
    assert all(t["status"] == "scored" for t in turns.values())
    no = turns["caller_no_dont"]
    assert no["hypothesis"] == "No, wait, do send it."
    assert (no["deletions"], no["terms"]["missed"]) == (1, ["not"])
    assert no["after_offset_ms"] > 0
    digits = turns["caller_order_number"]["numbers"]
    assert (digits["matched"], digits["total"]) == (0, 1)
    assert digits["items"] == [{"reference": "471928365012", "heard": "471928365072", "ok": False}]
    assert turns["caller_where_is_order"]["errors"] == 0  # "I'd" = "I would"
    assert turns["caller_es_pedido"]["errors"] == 0  # accents
    assert turns["caller_es_pedido"]["language"] == "es"
    # Per scenario and over the run, in summary.json.
    heard = summary["all"]["transcripts"]
    assert heard["turns"]["scored"] == 5 and heard["unmatched_transcripts"] == 0
    assert heard["numbers"]["text"] == "1 of 2"
    assert heard["term_error_rate"] == 0.5  # "no" heard, "not" lost
    assert (heard["substitutions"], heard["deletions"], heard["insertions"]) == (2, 1, 1)
    missed = {r["word"]: r for r in heard["not_recognized"]}
    assert set(missed) == {"not", "iban", "471928365012"}
    assert "domain term list" in missed["iban"]["hint"]
    card = heard["scorecard"]
    assert card["dimensions"]["numbers"]["score"] == 50.0
    assert card["dimensions"]["speaker_attribution"]["left_out"]
    assert card["dimensions"]["segmentation"]["left_out"]
    assert card["total"] is not None and "scaled to sum to 100" in card["note"]
    assert summary["forgiven"]["transcripts"]["wer"] == 0.0
    assert summary["iban"]["transcripts"]["numbers"]["text"] == "1 of 1"
    assert summary["run"]["transcript_scoring"]["policy"].startswith("voxproxy-default@")
    # The report shows it beside the latency figures.
    page = (out / "report.html").read_text()
    assert "What the agent heard" in page and "Not recognized" in page
    assert "471928365072" in page and "1 of 2" in page
    # Receipts stay content-free: no transcript, reference or score text in them.
    assert len(receipts) == 3
    dumped = json.dumps([r.model_dump(mode="json") for r in receipts.values()]).lower()
    for text in ("order number", "send it", "es91", "eye ban", "pedido", "transcript"):
        assert text not in dumped
    assert elapsed < 30


@pytest.mark.slow
async def test_openai_realtime_transcription_events_are_scored_too(tmp_path: Path) -> None:
    summary, results, _out, _agent, _receipts = await _load(tmp_path, "openai-realtime", ["no"])
    (turn,) = results[0]["turns"]
    assert turn["transcript"]["status"] == "scored"
    assert turn["transcript"]["hypothesis"] == "No, wait, do send it."
    heard = summary["all"]["transcripts"]
    assert heard["terms"] == {"total": 2, "errors": 1}
    assert heard["not_recognized"][0]["word"] == "not"
