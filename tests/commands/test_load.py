"""``voxproxy load`` against a target that is not there: the causes come first."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path

import pytest
from support.loadcli import run_load
from support.ports import refusing_port

from voxproxy.cli import main
from voxproxy.harness.child import (
    clean_env,
    cli_command,
    kill,
    mock_agent_process,
    proxy_command,
    read_port,
)


def test_a_dead_target_is_named_with_its_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with refusing_port() as port:
        status = run_load(f"ws://127.0.0.1:{port}", tmp_path / "run", "--calls", "2")
    out, err = capsys.readouterr()
    assert status == 1
    # The default wire is said, not assumed.
    assert "speaking the raw wire (the default)" in err
    # Before the table: how many calls failed, and why, counted per cause.
    first = out.splitlines()[0]
    assert first == "2 of 2 calls failed: connection refused (×2)", out
    assert "2 did not get through: causes above" in out
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["all"]["error_causes"] == {"connection refused": 2}
    report = (tmp_path / "run" / "report.html").read_text()
    assert "2 of 2 calls failed: connection refused (×2)" in report


@pytest.mark.slow
def test_a_voxproxy_whose_agent_is_dead_says_so_per_call_and_in_the_load_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with refusing_port() as dead:
        proc = subprocess.Popen(
            proxy_command(
                *("--upstream", f"ws://127.0.0.1:{dead}", "--dialect", "twilio"),
                *("--receipts", str(tmp_path / "r.jsonl"), "--secret", "s"),
            ),
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
        )
        try:
            port = read_port(proc.stderr)
            status = run_load(
                f"ws://127.0.0.1:{port}", tmp_path / "run", "--dialect", "twilio", "--calls", "3"
            )
            proc.send_signal(signal.SIGTERM)
            _, log = proc.communicate(timeout=15)
        finally:
            kill(proc)
    out, err = capsys.readouterr()
    assert status == 1
    assert "speaking the raw wire" not in err
    cause = "HTTP 502 from the target: agent unreachable: Connection refused"
    assert out.splitlines()[0] == f"3 of 3 calls failed: {cause} (×3)", out
    # The proxy logged every call it could not put through, with the cause.
    warnings = re.findall(r"WARNING voxproxy\.proxy: (?:worker \d+: )?call (c_\w+): (.*)", log)
    assert len(warnings) == 3, log
    assert len({call for call, _ in warnings}) == 3
    assert {why for _, why in warnings} == {
        "agent unreachable: Connection refused (the caller was answered HTTP 502)"
    }


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_writes_what_finished_says_so_and_exits_130(tmp_path: Path, workers: int) -> None:
    with mock_agent_process("--send-mode", "burst", "--delay-ms", "100") as found:
        load = subprocess.Popen(
            cli_command(
                "load",
                "normal_question",
                "--target",
                f"ws://127.0.0.1:{found.group(1)}",
                "--dialect",
                "raw",
                "--calls",
                "6",
                "--concurrency",
                str(workers),
                "--workers",
                str(workers),
                "--out",
                str(tmp_path / "run"),
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
        )
        try:
            assert load.stderr is not None
            lines = []
            # Without a terminal, load says its progress in lines: wait for the first call.
            while not any(ln.startswith("voxproxy load: 1/6 calls") for ln in lines):
                line = load.stderr.readline()
                assert line, lines
                lines.append(line)
            assert lines[-1].startswith("voxproxy load: 1/6 calls · 0 failed · ETA "), lines
            load.send_signal(signal.SIGINT)
            out, err = load.communicate(timeout=60)
        finally:
            kill(load)
    assert load.returncode == 130, (out, err)
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    finished = len(results["calls"])
    # The progress line had counted one finished call when SIGINT went; more may end
    # before the signal lands, never all six (the rest were still playing).
    assert finished >= 1 and finished != 6, finished
    assert results["run"]["interrupted"] is True and results["run"]["finished_calls"] == finished
    assert f"interrupted: {finished} of 6 calls had finished" in err, err
    assert "Traceback" not in err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["all"]["calls"] == finished
    report = (tmp_path / "run" / "report.html").read_text()
    assert f"interrupted: {finished} of 6 calls had finished" in report


@pytest.mark.slow
def test_an_arrival_rate_starts_calls_on_schedule_and_counts_the_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with mock_agent_process() as found:
        # 4 calls a second for 1 s: due at 0, 0.25, 0.5 and 0.75 s; a call lasts seconds,
        # so with 2 in flight at most, the last two find both busy.
        status = run_load(
            f"ws://127.0.0.1:{found.group(1)}",
            tmp_path / "run",
            "--dialect",
            "raw",
            "--arrival-rate",
            "4",
            "--duration",
            "1",
            "--concurrency",
            "2",
        )
    out = capsys.readouterr().out
    assert status == 1
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["run"]["calls"] == 4 and results["run"]["arrivals_over_s"] == 0.75
    errors = [c["error"] for c in results["calls"]]
    assert errors[:2] == [None, None]
    assert errors[2:] == ["dropped: --concurrency calls were in flight when it was due"] * 2
    assert out.splitlines()[0] == (
        "2 of 4 calls failed: dropped: --concurrency calls were in flight when it was due (×2)"
    )
    report = (tmp_path / "run" / "report.html").read_text()
    assert "4 calls arriving over 0.75 s, at most 2 in flight" in report


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--arrival-rate", "2"], "--arrival-rate needs --duration"),
        (["--arrival-rate", "2", "--duration", "5", "--calls", "3"], "give no --calls"),
        (["--duration", "5"], "--duration and --ramp-up go with --arrival-rate"),
    ],
)
def test_arrival_rate_flags_go_together(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["load", "normal_question", "--target", "ws://127.0.0.1:9", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--calls", "0"], "--calls, --concurrency and --workers must be at least 1"),
        (["--workers", "0"], "--calls, --concurrency and --workers must be at least 1"),
        (["--proxy-secret", "s"], "--proxy-receipts and --proxy-secret go together"),
        (["--header", "a:b", "--header", ":v"], "--header wants NAME:VALUE, got ':v'"),
        (["--dialect", "twilio", "--param", "ab"], "--param wants NAME=VALUE, got 'ab'"),
        (
            ["--target", "http://agent"],
            "--target must be a ws:// or wss:// URL, got 'http://agent'",
        ),
        (
            ["--transport", "webrtc"],
            "--transport webrtc needs an http(s):// target, got 'ws://127.0.0.1:9'",
        ),
        (
            ["--transport", "webrtc", "--target", "http://agent", "--proxy-receipts", "r.jsonl"],
            "--proxy-receipts cannot be matched to WebRTC calls",
        ),
    ],
)
def test_a_mistaken_flag_is_named_before_anything_is_played(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["load", "normal_question", "--target", "ws://127.0.0.1:9", *argv]) == 2
    err = capsys.readouterr().err
    assert f"voxproxy: error: {message}" in err
    # The flags are checked before the default wire is said: a mistake is the only line.
    assert "speaking the raw wire" not in err
