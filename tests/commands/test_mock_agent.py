"""``voxproxy mock-agent`` (``voxproxy/commands/mock_agent.py``): every flag reaches the
agent's config, a bad flag exits 2 before anything listens, and ``--transport webrtc``: a
WebRTC agent from the command line that ``voxproxy load --transport webrtc`` can call
(WHIP) with every expectation met."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from support.child import mock_agent_process
from support.loadcli import hello_scenario, run_load

import voxproxy.mockagent
import voxproxy.proxy.server
from voxproxy.cli import main
from voxproxy.mockagent import MockAgentConfig


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[tuple[MockAgentConfig, str, int]]:
    """What ``voxproxy mock-agent`` asked to serve, and where; nothing listens."""
    got: list[tuple[MockAgentConfig, str, int]] = []

    async def run_cli(config: MockAgentConfig, host: str, port: int) -> None:
        got.append((config, host, port))

    monkeypatch.setattr(voxproxy.mockagent, "run_cli", run_cli)
    monkeypatch.setattr(voxproxy.proxy.server, "run_loop", asyncio.run)
    for name in ("LISTEN", "DIALECT", "DELAY_MS", "SEED", "TRANSPORT", "HYPOTHESES"):
        monkeypatch.delenv(f"VOXPROXY_MOCK_AGENT_{name}", raising=False)
    return got


def test_every_flag_reaches_the_agent_s_config(
    served: list[tuple[MockAgentConfig, str, int]], tmp_path: Path
) -> None:
    hypotheses = tmp_path / "heard.yaml"
    hypotheses.write_text("caller_hello: yellow\n")
    argv = [
        "mock-agent",
        *("--listen", "127.0.0.1:9123", "--dialect", "twilio", "--sample-rate", "8000"),
        *("--delay-ms", "250", "--jitter-ms", "40", "--send-mode", "burst"),
        *("--barge-in", "silent", "--reaction-ms", "90", "--seed", "7"),
        *("--post-events-url", "http://127.0.0.1:9", "--events-token", "tok"),
        *("--tool-latency-ms", "120", "--transcripts", "--hypotheses", str(hypotheses)),
    ]
    assert main(argv) == 0
    ((config, host, port),) = served
    assert (host, port) == ("127.0.0.1", 9123)
    assert config == MockAgentConfig(
        dialect="twilio",
        sample_rate_hz=8000,
        delay_ms=250.0,
        jitter_ms=40.0,
        send_mode="burst",
        barge_in="silent",
        reaction_ms=90.0,
        seed=7,
        post_events_url="http://127.0.0.1:9",
        events_token="tok",
        tool_latency_ms=120.0,
        transcripts=True,
        transcript_hypotheses={"caller_hello": "yellow"},
    )


def test_without_flags_it_is_the_reference_agent_on_its_port(
    served: list[tuple[MockAgentConfig, str, int]],
) -> None:
    assert main(["mock-agent"]) == 0
    assert served == [(MockAgentConfig(), "127.0.0.1", 8766)]


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        (["--sample-rate", "0"], "--sample-rate"),
        (["--delay-ms", "-1"], "--delay-ms"),
        (["--dialect", "telnyx"], "--dialect"),
        (["--listen", "nowhere"], "--listen"),
        (["--hypotheses", "/nonexistent/heard.yaml"], "heard.yaml: cannot read"),
    ],
)
def test_a_bad_flag_exits_2_and_serves_nothing(
    served: list[tuple[MockAgentConfig, str, int]],
    bad: list[str],
    named: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    try:
        status = main(["mock-agent", *bad])
    except SystemExit as exc:  # argparse's own refusal
        status = exc.code
    assert status == 2
    assert served == []
    assert named in capsys.readouterr().err


@pytest.mark.slow
def test_a_webrtc_mock_agent_answers_a_load_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    offers = r"WebRTC offers on (http://127\.0\.0\.1:\d+/whip) \(WHIP\)"
    with mock_agent_process("--transport", "webrtc", pattern=offers) as found:
        assert "/api/offer (Pipecat)" in found.string
        status = run_load(
            found.group(1),
            tmp_path / "run",
            *("--transport", "webrtc", "--calls", "1"),
            scenario=hello_scenario(tmp_path),
        )
    capsys.readouterr()
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    (call,) = results["calls"]
    assert call["error"] is None and call["failures"] == []
    assert all(t["truth"]["ttfs_ms"] is not None for t in call["turns"])
    assert status == 0
