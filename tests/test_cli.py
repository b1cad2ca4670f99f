"""The parser machinery of voxproxy/cli.py, in process: VOXPROXY_<COMMAND>_<FLAG>
defaults (every variable of every subcommand changes its own subcommand and no other,
generated from the parsers), the proxy's old names with their warning, the flag on the
command line winning, a bad variable failing only the subcommand that has the flag, and
the one rule that every subcommand is a module of voxproxy.commands."""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.child import clean_env, cli_command
from support.envvars import export
from support.flowkit import flow_receipts

from voxproxy.cli import (
    EnvParser,
    build_parser,
    env_name,
    legacy_env_name,
    main,
    subcommand_parsers,
)
from voxproxy.commands import MODULES
from voxproxy.core.errors import ConfigError

UPSTREAM = ["proxy", "--upstream", "ws://agent:1/"]
PROBE = "zz-env-probe"  # no number, URL, HOST:PORT or choice: a typed flag fails on it
NOT_FLAGS = {"VOXPROXY_PURE_PYTHON", "VOXPROXY_FIXTURES"}  # read by the package, not flags


@pytest.fixture(autouse=True)
def _no_voxproxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in os.environ:
        if name.startswith("VOXPROXY_") and name not in NOT_FLAGS:
            monkeypatch.delenv(name)


def _runnable(parser: argparse.ArgumentParser) -> list[EnvParser]:
    """The subcommands a user runs (not ``transcripts``, which only holds ``score``)."""
    return [
        p
        for p in subcommand_parsers(parser)
        if not any(isinstance(a, argparse._SubParsersAction) and a.required for a in p._actions)
    ]


def _argv(parser: EnvParser) -> list[str]:
    """The subcommand's words and its required arguments, each with a value it takes."""
    argv = parser.command.split()
    for action in parser._actions:
        if action.required and not isinstance(action, argparse._SubParsersAction):
            value = str(next(iter(action.choices))) if action.choices else "ws://agent:1/"
            argv += [*action.option_strings[:1], value]
    return argv


def _parsed() -> dict[str, dict[str, Any] | str]:
    """Each runnable subcommand's own flags as parsed under the environment as it is now
    (the parser is built anew: it reads the environment as it is built), or the message
    of the ConfigError it raised. Only its own: its parents' flags are not its to read."""
    parser = build_parser()
    out: dict[str, dict[str, Any] | str] = {}
    for target in _runnable(parser):
        try:
            args = parser.parse_args(_argv(target))
        except ConfigError as exc:
            out[target.command] = str(exc)
            continue
        out[target.command] = {
            a.dest: getattr(args, a.dest) for a in target._actions if a.dest != "help"
        }
    return out


def _variables() -> list[tuple[str, str, str, argparse.Action]]:
    """(subcommand, variable, old name, its action) for every variable of every
    subcommand, checked against the parsers' actions: every flag that stores one value
    has exactly one."""
    out = []
    for parser in subcommand_parsers(build_parser()):
        single = [
            a
            for a in parser._actions
            if isinstance(a, (argparse._StoreAction, argparse._StoreTrueAction))
            and any(o.startswith("--") for o in a.option_strings)
        ]
        assert sorted(parser.env_vars.values()) == sorted(a.dest for a in single), parser.prog
        for action in single:
            flag = next(o for o in action.option_strings if o.startswith("--"))
            name = env_name(parser.command, flag)
            assert parser.env_vars[name] == action.dest
            out.append((parser.command, name, legacy_env_name(flag), action))
    return out


def _probe(action: argparse.Action) -> str:
    return "true" if isinstance(action, argparse._StoreTrueAction) else PROBE


def _changed(got: dict[str, Any] | str, before: dict[str, Any] | str, name: str, dest: str) -> bool:
    """Whether the variable ``name`` took effect: a typed flag fails on the probe, naming
    the variable; any other flag parses to something else than without it."""
    if isinstance(got, str):
        assert name in got, got
        return True
    assert isinstance(before, dict)
    return bool(got[dest] != before[dest])


def test_the_variables_are_named_by_subcommand_and_flag_and_never_collide() -> None:
    assert env_name("proxy", "--max-calls") == "VOXPROXY_PROXY_MAX_CALLS"
    assert env_name("receipts export", "--out") == "VOXPROXY_RECEIPTS_EXPORT_OUT"
    assert env_name("load-merge", "--out") == "VOXPROXY_LOAD_MERGE_OUT"
    assert legacy_env_name("--max-calls") == "VOXPROXY_MAX_CALLS"
    names = [name for _, name, _, _ in _variables()]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert not NOT_FLAGS & set(names)
    # The proxy's old names are not the new name of any variable.
    old = {legacy for command, _, legacy, _ in _variables() if command == "proxy"}
    assert not old & set(names), old & set(names)


def test_every_variable_changes_its_own_subcommand_and_no_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    baseline = _parsed()
    assert all(isinstance(b, dict) for b in baseline.values()), baseline
    variables = _variables()
    assert {c for c, _, _, _ in variables} >= {"proxy", "mock-agent", "load", "receipts"}
    for command, name, _, action in variables:
        monkeypatch.setenv(name, _probe(action))
        parsed = _parsed()
        for other, got in parsed.items():
            if other == command:
                assert _changed(got, baseline[other], name, action.dest), name
            else:
                assert got == baseline[other], f"{name} changed `{other}`"
        monkeypatch.delenv(name)


def test_the_old_names_set_the_proxy_only_and_it_warns_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = _parsed()
    variables = _variables()
    new_names = {name for _, name, _, _ in variables}
    proxy_old = {old: action for c, _, old, action in variables if c == "proxy"}
    capsys.readouterr()
    for old in sorted({old for _, _, old, _ in variables} - new_names):
        action = proxy_old.get(old)
        monkeypatch.setenv(old, PROBE if action is None else _probe(action))
        parsed = _parsed()
        said = capsys.readouterr().err
        for other, got in parsed.items():
            if other == "proxy" and action is not None:
                assert _changed(got, baseline[other], old, action.dest), old
            else:
                assert got == baseline[other], f"{old} changed `{other}`"
        if action is not None and isinstance(parsed["proxy"], dict):  # parsed: it warned
            assert said.count("\n") == 1 and old in said and "VOXPROXY_PROXY_" in said, said
        else:
            assert said == "", said
        monkeypatch.delenv(old)
    # One that is now a new name too: load's --proxy-receipts was VOXPROXY_PROXY_RECEIPTS,
    # now the proxy's own --receipts (the same file), and load's is VOXPROXY_LOAD_...
    assert "VOXPROXY_PROXY_RECEIPTS" in new_names


def test_the_new_name_wins_over_the_old_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VOXPROXY_MAX_CALLS", "7")
    monkeypatch.setenv("VOXPROXY_PROXY_MAX_CALLS", "8")
    monkeypatch.setenv("VOXPROXY_OTEL", "yes")
    args = build_parser().parse_args(UPSTREAM)
    assert (args.max_calls, args.otel) == (8, True)
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and "VOXPROXY_OTEL" in said[0] and "VOXPROXY_MAX_CALLS" not in said[0]


def test_the_exports_of_the_issue_leave_other_subcommands_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A container's proxy settings, exported: before, they broke these three.
    export(
        monkeypatch,
        VOXPROXY_POLICY="latency-only",
        VOXPROXY_DIALECT="auto",
        VOXPROXY_LISTEN="0.0.0.0:8765",
    )
    parser = build_parser()
    assert parser.parse_args(["transcripts", "score", "r.json"]).policy is None
    assert parser.parse_args(["mock-agent"]).listen == ("127.0.0.1", 8766)
    assert parser.parse_args(["mock-agent"]).dialect == "raw"
    assert parser.parse_args(["load", "x", "--target", "ws://a:1/"]).dialect is None
    proxy = parser.parse_args(UPSTREAM)
    assert (proxy.policy, proxy.dialect, proxy.listen) == (
        "latency-only",
        "auto",
        ("0.0.0.0", 8765),
    )


def test_a_flag_reads_its_variable_and_the_command_line_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VOXPROXY_PROXY_MAX_CALLS", "7")
    monkeypatch.setenv("VOXPROXY_PROXY_OTEL", "yes")
    args = build_parser().parse_args(UPSTREAM)
    assert (args.max_calls, args.otel) == (7, True)
    assert build_parser().parse_args([*UPSTREAM, "--max-calls", "9"]).max_calls == 9


def test_a_required_flag_may_come_from_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOXPROXY_PROXY_UPSTREAM", "ws://agent:2/")
    assert build_parser().parse_args(["proxy"]).upstream == "ws://agent:2/"


def test_a_variable_that_does_not_parse_fails_only_its_subcommand(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VOXPROXY_PROXY_MAX_CALLS", "many")
    with pytest.raises(ConfigError, match="VOXPROXY_PROXY_MAX_CALLS='many'"):
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


def test_an_old_name_the_command_line_overrides_is_not_warned_of(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VOXPROXY_SECRET", "from-the-shell")
    args = build_parser().parse_args([*UPSTREAM, "--secret=given"])
    assert args.secret == "given" and capsys.readouterr().err == ""
    assert build_parser().parse_args(UPSTREAM).secret == "from-the-shell"
    assert "VOXPROXY_SECRET" in capsys.readouterr().err


def test_bare_voxproxy_and_a_bare_group_print_their_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("usage: voxproxy") and "mock-agent" in out.out and out.err == ""
    assert main(["transcripts"]) == 0
    assert capsys.readouterr().out.startswith("usage: voxproxy transcripts")


@pytest.mark.parametrize(
    "argv",
    [
        ["schema", "receipt"],
        ["receipts", "--receipts", "{r}", "--json"],
        ["receipts", "--receipts", "{r}"],
        ["receipts", "export", "--receipts", "{r}"],
        ["verdict", "{r}"],
        ["gate", "{r}"],
    ],
)
def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path, argv: list[str]) -> None:
    """`voxproxy receipts --json | head`: no BrokenPipeError traceback, the status of a
    command that SIGPIPE ended (141)."""
    receipts = tmp_path / "r.jsonl"
    receipts.write_text("".join(r.to_json_line() for r in flow_receipts()))
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes its first byte
    try:
        done = subprocess.run(
            cli_command(*(a.replace("{r}", str(receipts)) for a in argv)),
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


def test_every_option_says_its_default_at_most_once_and_never_the_environment_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VOXPROXY_PROXY_SECRET", "hunter2-from-the-environment")
    monkeypatch.setenv("VOXPROXY_PROXY_MAX_CALLS", "7")
    for parser in subcommand_parsers(build_parser()):
        for action in parser._actions:
            if action.option_strings and action.help:
                said = action.help.lower().count("default")
                assert said <= 1, (parser.command, action.option_strings, action.help)
        text = parser.format_help()
        assert "hunter2" not in text and "(default: 7)" not in text, parser.command
        if parser.env_vars:  # the variables' rule, once, at the end
            assert f"VOXPROXY_{parser.command.upper().replace(' ', '_').replace('-', '_')}_" in text
    proxy = {p.command: p for p in subcommand_parsers(build_parser())}["proxy"].format_help()
    proxy = " ".join(proxy.split())
    assert "(default: 200)" in proxy and "(default: 127.0.0.1:8765)" in proxy
    assert "(default: 100.0)" not in proxy  # as typed
