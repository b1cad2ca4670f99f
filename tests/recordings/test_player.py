"""report.html's players: the audio by relative path, names escaped, truth when beside."""

from __future__ import annotations

import json
from pathlib import Path

from support.receipt_samples import sample_receipt

from voxproxy.recordings.player import CallView, read_truth, write_player_report


def test_audio_is_referenced_relative_to_the_report_and_names_are_escaped(tmp_path: Path) -> None:
    audio = tmp_path / "calls" / "it's <a> call.wav"
    audio.parent.mkdir()
    audio.write_bytes(b"RIFF")
    report = tmp_path / "out" / "report.html"
    report.parent.mkdir()
    view = CallView("it's <a> call.wav", sample_receipt(), [(str(audio), 0.0)])
    write_player_report(report, [view], [("bad.wav", "an empty file (0 bytes)")])
    page = report.read_text()
    assert "src='../calls/it&#x27;s &lt;a&gt; call.wav'" in page
    assert "<a> call" not in page  # escaped everywhere
    assert "bad.wav" in page and "an empty file" in page
    assert page.count("<audio") == 1 and "class='mark ttfs'" in page
    assert "class='truth'" not in page


def test_truth_is_read_from_beside_the_recording(tmp_path: Path) -> None:
    audio = tmp_path / "call.wav"
    assert read_truth(audio) is None
    (tmp_path / "call.truth.json").write_text(json.dumps({"turns": [{"ttfs_ms": 500.0}]}))
    assert read_truth(audio) == {"turns": [{"ttfs_ms": 500.0}]}
    (tmp_path / "call.truth.json").write_text("not json")
    assert read_truth(audio) is None
