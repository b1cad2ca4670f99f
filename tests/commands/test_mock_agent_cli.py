"""``voxproxy mock-agent --transport webrtc``: a WebRTC agent from the command line, that
``voxproxy load --transport webrtc`` can call (WHIP) with every expectation met."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from voxproxy.cli import main


@pytest.mark.slow
def test_a_webrtc_mock_agent_answers_a_load_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOXPROXY_")}
    agent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "voxproxy.cli",
            "mock-agent",
            "--transport",
            "webrtc",
            "--listen",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert agent.stdout is not None
        line = agent.stdout.readline()
        found = re.search(r"WebRTC offers on (http://127\.0\.0\.1:\d+/whip) \(WHIP\)", line)
        assert found, line
        assert "/api/offer (Pipecat)" in line
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
    finally:
        agent.kill()
        agent.communicate()
    capsys.readouterr()
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    (call,) = results["calls"]
    assert call["error"] is None and call["failures"] == []
    assert all(t["truth"]["ttfs_ms"] is not None for t in call["turns"])
    assert status == 0
