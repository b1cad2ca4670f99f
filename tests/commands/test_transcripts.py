"""``voxproxy transcripts score``: files in, scorecard out, a row in the run log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.seed002 import SAID, A, B

from voxproxy.cli import main


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def test_two_vendors_same_wer_and_the_log_calls_out_the_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ref.txt").write_text(SAID)
    (tmp_path / "a.txt").write_text(A)
    (tmp_path / "b.txt").write_text(B)
    log = tmp_path / "runs.csv"
    common = ["transcripts", "score", "--ref", str(tmp_path / "ref.txt"), "--log", str(log)]
    args_a = [*common, "--hyp", str(tmp_path / "a.txt"), "--model-version", "vendor-a-v1"]
    assert main([*args_a, "--json", str(tmp_path / "a.json")]) == 0
    out = capsys.readouterr().out
    assert "WER 10.0 %" in out and "term error rate 0.0 %" in out
    assert "numbers 1 of 1 exactly right" in out
    assert "call-out" not in out
    args_b = [*common, "--hyp", str(tmp_path / "b.txt"), "--model-version", "vendor-b-v1"]
    assert main(args_b) == 0
    out = capsys.readouterr().out
    assert "WER 10.0 %" in out and "term error rate 50.0 %" in out
    assert "number q3 heard as q2" in out
    assert "call-out" in out and "rose 50.0 points" in out
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["scorecard"]["total"] == 98.3
    assert report["policy"].startswith("voxproxy-default@sha256:")
    lines = log.read_text().splitlines()
    assert len(lines) == 3 and lines[0].startswith("date,model_version,terms,")
    assert ",vendor-b-v1,50.0,,0.0,,90.0,40.0,50.0,10.0," in lines[2]


def seg(speaker: str, start: float, end: float, words: str) -> dict[str, Any]:
    return {
        "session_id": "m",
        "speaker": speaker,
        "start_time": start,
        "end_time": end,
        "words": words,
    }


def test_seglst_with_speakers_and_a_human_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = [seg("priya", 0, 3, "[[Helios]] slips to Q3"), seg("omar", 3, 6, "we do [[not]] sign")]
    hyp = [seg("s1", 0, 3, "Helios slips to Q3"), seg("s1", 3, 6, "we do not sign")]
    (tmp_path / "ref.json").write_text(json.dumps(ref))
    (tmp_path / "hyp.json").write_text(json.dumps(hyp))
    (tmp_path / "human.yaml").write_text("segmentation: 60\nreaders: 2\n")
    code = main(
        [
            "transcripts", "score",
            "--ref", str(tmp_path / "ref.json"),
            "--hyp", str(tmp_path / "hyp.json"),
            "--human-scores", str(tmp_path / "human.yaml"),
            "--json", str(tmp_path / "out.json"),
        ]
    )  # fmt: skip
    assert code == 0
    card = json.loads((tmp_path / "out.json").read_text())["scorecard"]
    assert card["note"] == ""  # every dimension scored
    attr = card["attribution"]
    # Omar's four words on Priya's speaker: four deletions for Omar, four insertions for
    # Priya. Every word right (WER 0 %), every word of Omar's wrong twice (tcpWER 100 %).
    assert attr["metric"] == "tcpWER" and attr["wer"] == 0.0 and attr["cp_wer"] == 1.0
    assert card["dimensions"]["speaker_attribution"]["score"] == 0.0
    assert card["total"] == pytest.approx((30 * 100 + 25 * 0 + 20 * 100 + 15 * 60 + 10 * 100) / 100)
    assert "tcpWER 100.0 % − WER 0.0 % = 100.0 points" in capsys.readouterr().out


def _results(tmp_path: Path) -> Path:
    def turn(ref: str, hyp: str | None, status: str = "scored") -> dict[str, Any]:
        return {"transcript": {"reference": ref, "hypothesis": hyp, "status": status}}

    calls = [
        {
            "scenario": "orders",
            "turns": [
                turn("No, wait, don't send it.", "No wait, do send it."),
                turn("My order number is 4 7 1 9.", "My order number is 4719."),
            ],
        },
        {
            "scenario": "banking",
            "turns": [
                turn("My IBAN is E S 9 1.", "My eye ban is ES91."),
                turn("Yes, please.", None, "no_hypothesis"),
                turn("", None, "no_reference"),
            ],
        },
    ]
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"run": {}, "calls": calls}))
    return path


def test_rescoring_a_load_run_with_a_domain_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _results(tmp_path)
    assert main(["transcripts", "score", str(results), "--json", str(tmp_path / "a.json")]) == 0
    out = capsys.readouterr().out
    assert "looks like a name or code" in out  # IBAN, no term list names it
    first = json.loads((tmp_path / "a.json").read_text())
    assert first["turns"]["no_reference"] == 1 and first["turns"]["no_hypothesis"] == 1
    assert first["figures"]["numbers"]["text"] == "2 of 2"
    assert set(first["per_scenario"]) == {"orders", "banking"}
    terms = tmp_path / "bank.yaml"
    terms.write_text('name: bank\nterms:\n  jargon: [IBAN]\n  negations: ["not", "no"]\n')
    assert main(["transcripts", "score", str(results), "--terms", str(terms),
                 "--json", str(tmp_path / "b.json")]) == 0  # fmt: skip
    second = json.loads((tmp_path / "b.json").read_text())
    assert second["term_list"].startswith("bank@")
    words = {r["word"]: r for r in second["figures"]["not_recognized"]}
    assert words["iban"]["kind"] == "term" and words["not"]["kind"] == "term"
    assert second["figures"]["terms"] == {"total": 3, "errors": 2}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give a load run's results.json"),
        (["r.json", "--ref", "x"], "not both"),
        (["--ref", "x", "--hyp", "y", "--log", "l.csv"], "--log needs --model-version"),
    ],
)
def test_usage_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["transcripts", "score", *args]) == 2
    assert message in capsys.readouterr().err
