"""The child-process helpers the tests and the benchmarks start voxproxy with."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest

from support.child import (
    LISTENING_ANY,
    clean_env,
    cli_command,
    port_in_log,
    proxy_command,
    read_port,
    stop,
)
from support.envvars import export


def test_the_proxy_command_line_names_one_worker_and_the_listen_address() -> None:
    cmd = proxy_command("--upstream", "ws://a", listen="127.0.0.1:9", workers=2)
    head = ["-m", "voxproxy.cli", "proxy", "--workers", "2", "--listen", "127.0.0.1:9"]
    assert cmd[1:] == [*head, "--upstream", "ws://a"]
    assert cli_command("mock-agent") == [cmd[0], "-m", "voxproxy.cli", "mock-agent"]


def test_the_clean_environment_drops_voxproxy_settings_and_the_named_prefixes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    export(monkeypatch, VOXPROXY_SECRET="x", OTEL_SERVICE_NAME="y", KEEP_ME="z")
    assert "VOXPROXY_SECRET" not in clean_env() and clean_env()["OTEL_SERVICE_NAME"] == "y"
    env = clean_env("OTEL_")
    assert "OTEL_SERVICE_NAME" not in env and env["KEEP_ME"] == "z"


def test_the_port_is_read_from_the_first_line_that_names_it() -> None:
    text = "starting\nvoxproxy: listening on ws://127.0.0.1:4321/ (twilio)\nmore\n"
    assert read_port(io.StringIO(text)) == 4321
    assert read_port(io.BytesIO(text.encode())) == 4321
    webrtc = "offers on http://127.0.0.1:555/whip\n"
    assert read_port(io.StringIO(webrtc), LISTENING_ANY) == 555


def test_a_child_that_ends_before_naming_its_port_fails_with_what_it_said() -> None:
    with pytest.raises(AssertionError, match="bad flag"):
        read_port(io.StringIO("error: bad flag\n"))


def test_the_port_in_a_log_file_and_a_stop_that_asks_first(tmp_path: Path) -> None:
    log = tmp_path / "child.log"
    log.write_text("x\nlistening on ws://127.0.0.1:8765/\n")
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert port_in_log(proc, log) == 8765
    finally:
        stop(proc)
    assert proc.returncode == -15  # SIGTERM was enough


def test_a_log_that_never_names_a_port_kills_the_child_and_says_the_log(tmp_path: Path) -> None:
    log = tmp_path / "child.log"
    log.write_text("nothing yet\n")
    proc = subprocess.Popen(["sleep", "30"])
    with pytest.raises(RuntimeError, match="nothing yet"):
        port_in_log(proc, log, timeout_s=0)
    assert proc.wait(10) == -9
