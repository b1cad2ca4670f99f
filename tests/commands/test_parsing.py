"""voxproxy.commands.parsing: the parser machinery, on a small parser built here (the
whole command line's variables and help: tests/test_cli.py). The argument types, the
variable names, defaults shown once as typed, a flag read from its variable (a bad value
failing only when its command runs), and the one-line errors that name the closest flag."""

from __future__ import annotations

import argparse

import pytest
from support.envvars import export

from voxproxy.commands.parsing import (
    EnvParser,
    _flags,
    _with_default,
    byte_size,
    duration_s,
    env_name,
    host_port,
    legacy_env_name,
    non_negative_float,
    non_negative_int,
    positive_int,
    subcommand_parsers,
    upstream_url,
)
from voxproxy.core.errors import ConfigError


def _parser() -> tuple[EnvParser, EnvParser]:
    top = EnvParser(prog="voxproxy")
    sub = top.add_subparsers(dest="command", parser_class=EnvParser)
    tool = sub.add_parser("tool")
    tool.add_argument("--out-dir", default="x")
    tool.add_argument("--count", type=positive_int, default=3)
    tool.add_argument("--mode", choices=["a", "b"], default="a")
    tool.add_argument("--loud", action="store_true")
    return top, tool


# -- names --------------------------------------------------------------------------------


def test_a_variable_is_named_by_command_and_flag() -> None:
    assert env_name("receipts export", "--out") == "VOXPROXY_RECEIPTS_EXPORT_OUT"
    assert env_name("proxy", "--max-calls") == "VOXPROXY_PROXY_MAX_CALLS"
    assert legacy_env_name("--listen") == "VOXPROXY_LISTEN"


def test_the_flags_of_a_command_line_stop_at_double_dash() -> None:
    assert _flags(["--a=1", "-b", "x", "--c", "--", "--d"]) == ["--a", "--c"]


# -- argument types -----------------------------------------------------------------------


def test_host_port() -> None:
    assert host_port("0.0.0.0:8765") == ("0.0.0.0", 8765)
    assert host_port(":9") == ("127.0.0.1", 9)  # no host: loopback
    assert host_port("[::1]:80") == ("[::1]", 80)
    for bad in ("8765", "h:", "h:x", "h:65536", "h:-1"):
        with pytest.raises(argparse.ArgumentTypeError, match="HOST:PORT"):
            host_port(bad)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1", 1),
        ("2K", 2048),
        ("500M", 500 << 20),
        ("2G", 2 << 30),
        ("1.5k", 1536),
        ("3MB", 3 << 20),
    ],
)
def test_byte_size_takes_powers_of_1024(text: str, size: int) -> None:
    assert byte_size(text) == size


@pytest.mark.parametrize("text", ["0", "-1K", "K", "lots", ""])
def test_byte_size_refuses_what_is_no_positive_size(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        byte_size(text)


def test_the_number_types_and_the_upstream_url() -> None:
    assert positive_int("3") == 3 and non_negative_int("0") == 0 and non_negative_float("0") == 0.0
    for kind, bad in ((positive_int, "0"), (non_negative_int, "-1"), (non_negative_float, "-0.5")):
        with pytest.raises(argparse.ArgumentTypeError):
            kind(bad)
    for url in ("ws://a", "wss://a", "http://a", "https://a"):
        assert upstream_url(url) == url
    with pytest.raises(argparse.ArgumentTypeError, match="ws://"):
        upstream_url("ftp://a")


# -- defaults shown in help ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("default", "shown"),
    [
        (("127.0.0.1", 8765), "x (default: 127.0.0.1:8765)"),
        (100.0, "x (default: 100)"),
        (0.25, "x (default: 0.25)"),
        ("50%", "x (default: 50%%)"),  # argparse formats help with %
        (None, "x"),
        (False, "x"),
        ("", "x"),
        ([], "x"),
    ],
)
def test_a_default_is_shown_once_as_it_is_typed(default: object, shown: str) -> None:
    assert _with_default("x", default) == shown
    assert _with_default("x (default: 5)", 7) == "x (default: 5)"


def test_help_says_each_default_once_and_names_the_variables() -> None:
    _, tool = _parser()
    text = tool.format_help()
    assert text.count("(default: 3)") == 1
    assert "VOXPROXY_TOOL_<OPTION>" in text
    assert set(tool.env_vars) == {
        "VOXPROXY_TOOL_OUT_DIR",
        "VOXPROXY_TOOL_COUNT",
        "VOXPROXY_TOOL_MODE",
        "VOXPROXY_TOOL_LOUD",
    }


# -- the environment ----------------------------------------------------------------------


def test_a_flag_reads_its_variable_and_the_command_line_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    export(monkeypatch, VOXPROXY_TOOL_COUNT="9", VOXPROXY_TOOL_LOUD="yes", VOXPROXY_TOOL_MODE="b")
    top, _ = _parser()
    args = top.parse_args(["tool"])
    assert (args.count, args.loud, args.mode, args.out_dir) == (9, True, "b", "x")
    assert top.parse_args(["tool", "--count", "4"]).count == 4


@pytest.mark.parametrize(("name", "value"), [("COUNT", "0"), ("MODE", "c")])
def test_a_variable_that_does_not_parse_fails_when_its_command_runs(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(f"VOXPROXY_TOOL_{name}", value)
    top, _ = _parser()  # building the parser does not fail
    with pytest.raises(ConfigError, match=f"VOXPROXY_TOOL_{name}='{value}'"):
        top.parse_args(["tool"])


# -- errors -------------------------------------------------------------------------------


def test_a_mistyped_flag_names_the_closest_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    top, _ = _parser()
    with pytest.raises(SystemExit) as exit_:
        top.parse_args(["tool", "--cuont", "2"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        "voxproxy tool: error: unknown option --cuont; did you mean --count? "
        "(see voxproxy tool --help)\n"
    )


def test_a_mistyped_command_or_choice_names_the_closest_or_lists_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    top, _ = _parser()
    with pytest.raises(SystemExit):
        top.parse_args(["tol"])
    assert "unknown command 'tol'; did you mean tool?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        top.parse_args(["tool", "--mode", "zzz"])
    assert "unknown --mode 'zzz'; one of: a, b" in capsys.readouterr().err


def test_every_subcommand_parser_once_nested_ones_included() -> None:
    top, tool = _parser()
    sub = tool.add_subparsers(dest="inner", parser_class=EnvParser)
    inner = sub.add_parser("inner", aliases=["in"])
    assert subcommand_parsers(top) == [tool, inner]
    assert inner.command == "tool inner"


def test_a_groups_durations_take_no_negative_time_but_an_offset_may_be_signed() -> None:
    top = EnvParser(prog="voxproxy")
    tool = top.add_subparsers(dest="command", parser_class=EnvParser).add_parser("tool")
    group = tool.add_group("timing", "how long things take")
    group.add_seconds("--idle", 2.5, "idle for this long")
    group.add_ms("--wait-ms", 10.0, "wait this long")
    group.add_ms("--offset-ms", 0.0, "moved this far", signed=True)
    args = top.parse_args(["tool", "--offset-ms", "-5"])
    assert (args.idle, args.wait_ms, args.offset_ms) == (2.5, 10.0, -5.0)
    with pytest.raises(SystemExit):
        top.parse_args(["tool", "--wait-ms", "-1"])
    with pytest.raises(SystemExit):
        top.parse_args(["tool", "--idle", "-1"])
    shown = tool.format_help()
    assert "--idle S" in shown and "--wait-ms MS" in shown


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("30m", 1800.0), ("12h", 43200.0), ("7d", 604800.0),
     ("1.5h", 5400.0), (" 2D ", 172800.0)],
)  # fmt: skip
def test_a_duration_takes_seconds_minutes_hours_and_days(text: str, seconds: float) -> None:
    assert duration_s(text) == seconds


@pytest.mark.parametrize("text", ["0", "-5m", "soon", "", "inf", "nan", "7w"])
def test_a_duration_refuses_what_is_no_positive_time(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration_s(text)
