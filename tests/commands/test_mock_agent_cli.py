"""``voxproxy mock-agent --transport webrtc``: a WebRTC agent from the command line, that
``voxproxy load --transport webrtc`` can call (WHIP) with every expectation met."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from voxproxy.cli import main
from voxproxy.harness.child import mock_agent_process


@pytest.mark.slow
def test_a_webrtc_mock_agent_answers_a_load_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    offers = r"WebRTC offers on (http://127\.0\.0\.1:\d+/whip) \(WHIP\)"
    with mock_agent_process("--transport", "webrtc", pattern=offers) as found:
        assert "/api/offer (Pipecat)" in found.string
        status = main(
            [
                "load",
                "normal_question",
                "--transport",
                "webrtc",
                "--target",
                found.group(1),
                "--calls",
                "1",
                "--out",
                str(tmp_path / "run"),
            ]
        )
    capsys.readouterr()
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    (call,) = results["calls"]
    assert call["error"] is None and call["failures"] == []
    assert all(t["truth"]["ttfs_ms"] is not None for t in call["turns"])
    assert status == 0
