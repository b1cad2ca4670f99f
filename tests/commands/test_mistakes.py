"""Common mistakes on the command line get one line that says what to fix, and exit 2."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "voxproxy.cli", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def busy_port() -> object:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("voxproxy: error:")]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return lines[0]


@pytest.mark.slow
def test_a_port_already_in_use(busy_port: int, tmp_path: Path) -> None:
    base = ["--upstream", "ws://127.0.0.1:9/", "--receipts", str(tmp_path / "r.jsonl")]
    for flag, extra in (
        ("--listen", []),
        ("--metrics-listen", ["--listen", "127.0.0.1:0"]),
    ):
        line = _one_line_error(_run("proxy", *base, *extra, flag, f"127.0.0.1:{busy_port}"))
        assert "address already in use" in line and str(busy_port) in line, line
        assert "choose another port" in line
    events = ["--listen", "127.0.0.1:0", "--events-token", "t" * 24]
    line = _one_line_error(
        _run("proxy", *base, *events, "--events-listen", f"127.0.0.1:{busy_port}")
    )
    assert "address already in use" in line and str(busy_port) in line, line
    line = _one_line_error(_run("mock-agent", "--listen", f"127.0.0.1:{busy_port}"))
    assert "address already in use" in line


@pytest.mark.slow
def test_a_receipts_path_whose_parent_is_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    line = _one_line_error(
        _run(
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "ws://127.0.0.1:9/",
            "--receipts",
            str(blocker / "receipts.jsonl"),
        )
    )
    assert "a file stands where a directory is needed" in line and "not-a-dir" in line, line


def test_a_mistyped_flag_names_the_closest_one_in_one_line() -> None:
    done = _run("proxy", "--upstrem", "ws://127.0.0.1:9/")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "voxproxy proxy: error: unknown option --upstrem; did you mean --upstream? "
        "(see voxproxy proxy --help)"
    )
    assert "usage:" not in done.stderr


def test_help_shows_a_listen_default_as_it_is_typed() -> None:
    done = _run("proxy", "--help")
    assert done.returncode == 0
    assert "127.0.0.1:8765" in done.stdout.replace("\n", " ")
    assert "('127.0.0.1'" not in done.stdout


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["prxy"], "voxproxy: error: unknown command 'prxy'; did you mean proxy?"),
        (
            ["transcripts", "scor"],
            "voxproxy transcripts: error: unknown command 'scor'; did you mean score?",
        ),
        (
            ["proxy", "--upstream", "ws://127.0.0.1:9/", "--dialect", "twillio"],
            "voxproxy proxy: error: unknown --dialect 'twillio'; did you mean twilio?",
        ),
        (
            ["load", "normal_question", "--target", "ws://127.0.0.1:9", "--dialect", "zzz"],
            "voxproxy load: error: unknown --dialect 'zzz'; one of: raw,",
        ),
    ],
)
def test_a_mistyped_command_or_value_names_the_closest_one(argv: list[str], expected: str) -> None:
    done = _run(*argv)
    assert done.returncode == 2
    assert done.stderr.startswith(expected), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "usage:" not in done.stderr


def test_load_and_mock_agent_help_show_their_defaults() -> None:
    load = " ".join(_run("load", "--help").stdout.split())
    for said in ("calls in all (default: 1)", "(default: 10; with --arrival-rate", "(default: 1)"):
        assert said in load, said
    assert "--seed N seed of the callers' random noise" in load
    assert "(default: None)" not in load
    agent = " ".join(_run("mock-agent", "--help").stdout.split())
    for said in ("HOST:PORT (default: 127.0.0.1:8766)", "response delay (default: 600)"):
        assert said in agent, said
    assert "± response jitter (default: 0)" in agent and "(default: 0)" in agent
    assert "('127.0.0.1'" not in agent and "(default: None)" not in agent
