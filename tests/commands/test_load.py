"""``voxproxy load`` against a target that is not there: the causes come first."""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
from pathlib import Path

import pytest
from support.child import (
    clean_env,
    cli_command,
    kill,
    mock_agent_process,
    proxy_command,
    read_port,
)
from support.loadcli import hello_scenario, run_load
from support.ports import refusing_port

from voxproxy.cli import main


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
                hello_scenario(tmp_path),
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
            *shlex.split("--dialect raw --arrival-rate 4 --duration 1 --concurrency 2"),
            scenario=hello_scenario(tmp_path),
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


def test_ctrl_c_is_said_before_the_figures_of_the_calls_that_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    import voxproxy.commands.load as load_command
    from voxproxy.loadgen.caller import CallRecord

    # Two of five calls finished (one of them failed) when Ctrl-C came.
    finished = [(0, "c0", CallRecord()), (1, "c1", CallRecord(error="OSError: reset"))]
    monkeypatch.setattr(load_command, "_play", lambda load, counter: (finished, True))
    both = io.StringIO()  # stdout and stderr as a terminal shows them, in order
    monkeypatch.setattr(sys, "stdout", both)
    monkeypatch.setattr(sys, "stderr", both)
    status = run_load("ws://127.0.0.1:9", tmp_path / "run", "--dialect", "raw", "--calls", "5")
    lines = both.getvalue().splitlines()
    assert status == 130
    assert lines[0].startswith("interrupted: 2 of 5 calls had finished"), lines
    assert lines[-1].startswith("interrupted after "), lines[-1]
    assert "of the 2 calls that finished, 1 failed an expectation" in lines[-1]


def test_webrtc_calls_say_nothing_of_a_websocket_wire(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from voxproxy.cli import build_parser
    from voxproxy.commands.load import _settings
    from voxproxy.core.errors import ConfigError

    argv = ["load", "normal_question", "--transport", "webrtc", "--target", "http://a:1/whip"]
    assert _settings(build_parser().parse_args(argv)).plan.transport == "webrtc"
    assert "raw wire" not in capsys.readouterr().err
    with pytest.raises(ConfigError, match="--transport webrtc calls send Opus"):
        _settings(build_parser().parse_args([*argv, "--dialect", "twilio"]))
    _settings(build_parser().parse_args([*argv[:2], "--target", "ws://a:1/"]))
    assert "speaking the raw wire (the default)" in capsys.readouterr().err


def test_the_quickstart_arrival_rate_holds_its_calls_by_default(tmp_path: Path) -> None:
    """docs/quickstart-load.md's order_status.yaml at its --arrival-rate: its calls last
    about 35 s against the mock agent (longer on a loaded machine), so the default cap
    must hold the arrivals of a call as long as its script allows (30 s of arrivals was
    too few and dropped arrivals against a healthy agent)."""
    from voxproxy.cli import build_parser
    from voxproxy.commands.load import _settings
    from voxproxy.loadgen.scenario import find_scenario
    from voxproxy.loadgen.steps import DEFAULT_TAIL_MS, caller_audio_s, longest_call_s

    doc = (Path(__file__).resolve().parents[2] / "docs" / "quickstart-load.md").read_text()
    found = re.search(r"```yaml\n(# voxproxy load scenario: order_status.yaml.*?)```", doc, re.S)
    command = re.search(r"voxproxy load order_status.yaml (.*--arrival-rate.*)", doc)
    assert found is not None and command is not None
    scenario = tmp_path / "order_status.yaml"
    scenario.write_text(found.group(1))
    flags = command.group(1).split()
    settings = _settings(build_parser().parse_args(["load", str(scenario), *flags]))
    rate = float(flags[flags.index("--arrival-rate") + 1])
    steps = find_scenario(str(scenario))[0].caller_steps(tmp_path)
    assert 10 < caller_audio_s(steps) < 35  # the caller's own clips and silences
    longest = longest_call_s(steps, DEFAULT_TAIL_MS)
    assert longest > 60  # two waits for the agent's answer, 40 s each at most
    assert settings.plan.concurrency >= rate * longest > rate * 35


def test_load_help_groups_its_options_by_concern() -> None:
    from voxproxy.cli import build_parser, subcommand_parsers

    load = next(p for p in subcommand_parsers(build_parser()) if p.command == "load")
    groups = {
        g.title: [a.option_strings[0] for a in g._group_actions if a.option_strings]
        for g in load._action_groups
        if g._group_actions
    }
    assert groups.pop("options") == ["-h"]
    assert groups.pop("positional arguments") == []  # SCENARIO
    assert len(groups) == 4 and max(len(flags) for flags in groups.values()) <= 8, groups
    assert "--arrival-rate" in groups["how many, how fast"]
    assert load.format_help().startswith("usage: voxproxy load SCENARIO [SCENARIO ...] --target")
