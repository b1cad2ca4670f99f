"""``voxproxy mock-agent --transport webrtc``: a WebRTC agent from the command line, that
``voxproxy load --transport webrtc`` can call (WHIP) with every expectation met."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.child import mock_agent_process
from support.loadcli import run_load


@pytest.mark.slow
def test_a_webrtc_mock_agent_answers_a_load_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    offers = r"WebRTC offers on (http://127\.0\.0\.1:\d+/whip) \(WHIP\)"
    with mock_agent_process("--transport", "webrtc", pattern=offers) as found:
        assert "/api/offer (Pipecat)" in found.string
        status = run_load(found.group(1), tmp_path / "run", "--transport", "webrtc", "--calls", "1")
    capsys.readouterr()
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    (call,) = results["calls"]
    assert call["error"] is None and call["failures"] == []
    assert all(t["truth"]["ttfs_ms"] is not None for t in call["turns"])
    assert status == 0
