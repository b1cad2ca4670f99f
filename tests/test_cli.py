"""The parser machinery of voxproxy/cli.py, in process: VOXPROXY_* defaults, the
flag on the command line winning, a bad variable failing only the subcommand that has
the flag, and the one rule that every subcommand is a module of voxproxy.commands."""

from __future__ import annotations

import pytest

from voxproxy.cli import build_parser, env_name, main
from voxproxy.commands import MODULES
from voxproxy.errors import ConfigError

UPSTREAM = ["proxy", "--upstream", "ws://agent:1/"]


def test_a_flag_reads_its_variable_and_the_command_line_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert env_name("--max-calls") == "VOXPROXY_MAX_CALLS"
    monkeypatch.setenv("VOXPROXY_MAX_CALLS", "7")
    monkeypatch.setenv("VOXPROXY_OTEL", "yes")
    args = build_parser().parse_args(UPSTREAM)
    assert (args.max_calls, args.otel) == (7, True)
    assert build_parser().parse_args([*UPSTREAM, "--max-calls", "9"]).max_calls == 9


def test_a_required_flag_may_come_from_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOXPROXY_UPSTREAM", "ws://agent:2/")
    assert build_parser().parse_args(["proxy"]).upstream == "ws://agent:2/"


def test_a_variable_that_does_not_parse_fails_only_its_subcommand(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VOXPROXY_MAX_CALLS", "many")
    with pytest.raises(ConfigError, match="VOXPROXY_MAX_CALLS='many'"):
        build_parser().parse_args(UPSTREAM)
    assert build_parser().parse_args(["schema", "receipt"]).command == "schema"  # no --max-calls


def test_a_mistyped_flag_names_the_closest_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["proxy", "--upstream", "ws://a:1/", "--max-call", "3"])
    assert exited.value.code == 2
    assert "did you mean --max-calls?" in capsys.readouterr().err


def test_every_subcommand_is_a_module_of_commands_in_help_order() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    names = list(sub.choices)  # type: ignore[arg-type]
    assert names[0] == "proxy"
    modules = [n.replace("-", "_") for n in names]
    assert modules == MODULES
