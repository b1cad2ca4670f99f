"""voxproxy proxy's arguments become the ServeConfig it runs (commands/proxy.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from voxproxy.cli import build_parser
from voxproxy.commands.proxy import serve_config
from voxproxy.proxy.lifecycle import DEFAULT_MAX_LOOP_LAG_MS
from voxproxy.telemetry.metrics import MAX_TOOL_NAME_LABELS


@pytest.mark.parametrize(
    "transport",
    [
        ["--upstream", "ws://127.0.0.1:1"],
        ["--transport", "webrtc", "--upstream", "http://127.0.0.1:1/offer"],
    ],
)
def test_the_loop_lag_bound_reaches_both_transports(transport: list[str]) -> None:
    parser = build_parser()
    base = ["proxy", *transport]
    assert serve_config(parser.parse_args(base)).proxy.max_loop_lag_ms == DEFAULT_MAX_LOOP_LAG_MS
    bounded = parser.parse_args([*base, "--max-loop-lag-ms", "250"])
    assert serve_config(bounded).proxy.max_loop_lag_ms == 250.0
    off = parser.parse_args([*base, "--max-loop-lag-ms", "0"])
    assert serve_config(off).proxy.max_loop_lag_ms is None


@pytest.mark.parametrize(
    "transport",
    [
        ["--upstream", "ws://127.0.0.1:1"],
        ["--transport", "webrtc", "--upstream", "http://127.0.0.1:1/offer"],
    ],
)
def test_the_declared_names_reach_the_wire_s_decoder_the_metrics_and_the_event_api(
    transport: list[str],
) -> None:
    parser = build_parser()
    base = ["proxy", *transport, "--events-token", "t" * 16]
    undeclared = serve_config(parser.parse_args(base))
    assert undeclared.proxy.dialect_options.names is None
    assert undeclared.telemetry.tool_names is None
    declared = serve_config(parser.parse_args([*base, "--event-names", "get_weather_v2, order"]))
    names = frozenset({"get_weather_v2", "order"})
    assert declared.proxy.dialect_options.names == names
    assert declared.telemetry.tool_names == names
    assert declared.events is not None and declared.events.names == names


def test_the_help_states_the_metrics_bound_on_undeclared_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["proxy", "--help"])
    assert f"the first {MAX_TOOL_NAME_LABELS} such" in " ".join(capsys.readouterr().out.split())


def test_the_milliseconds_metrics_of_0_1_are_gone() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["proxy", "--upstream", "ws://x", "--metrics-legacy-ms"])


def test_proxy_help_groups_its_options_by_concern() -> None:
    from voxproxy.cli import build_parser, subcommand_parsers

    proxy = next(p for p in subcommand_parsers(build_parser()) if p.command == "proxy")
    groups = {
        g.title: [a.option_strings[0] for a in g._group_actions]
        for g in proxy._action_groups
        if g._group_actions
    }
    assert groups.pop("options") == ["-h"]  # every flag under a heading of its own
    assert len(groups) >= 5 and max(len(flags) for flags in groups.values()) <= 12, groups
    assert "--upstream" in groups["the call"] and "--receipts" in groups["receipts and verdicts"]
    assert "--max-calls" in groups["capacity and limits"]
    help_text = proxy.format_help()
    assert help_text.startswith("usage: voxproxy proxy --upstream URL")
    assert len(help_text.split("\n\n")[0].splitlines()) == 1  # a usage line, not twenty


@pytest.mark.parametrize(
    "transport",
    [
        ["--upstream", "ws://127.0.0.1:1"],
        ["--transport", "webrtc", "--upstream", "http://127.0.0.1:1/offer"],
    ],
)
def test_captures_are_off_unless_asked_and_bounded_when_on(
    transport: list[str], tmp_path: Path
) -> None:
    import stat

    parser = build_parser()
    base = ["proxy", *transport]
    assert serve_config(parser.parse_args(base)).capture is None
    directory = tmp_path / "caps"
    on = serve_config(parser.parse_args([*base, "--capture", str(directory)]))
    assert on.capture is not None and on.capture.directory == directory
    assert (on.capture.max_calls, on.capture.max_bytes) == (1000, 1 << 30)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700  # made the owner's alone
    bounded = [*base, "--capture", str(directory), "--capture-max-calls", "7"]
    settings = serve_config(parser.parse_args([*bounded, "--capture-max-bytes", "1.5M"])).capture
    assert settings is not None and (settings.max_calls, settings.max_bytes) == (7, 1572864)
    assert settings.max_age_s is None and on.capture.max_age_s is None  # no age bound unless asked
    aged = serve_config(parser.parse_args([*bounded, "--capture-max-age", "7d"])).capture
    assert aged is not None and aged.max_age_s == 7 * 86400.0


def test_a_capture_directory_others_may_read_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from voxproxy.cli import main

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    argv = ["proxy", "--upstream", "ws://127.0.0.1:9", "--receipts", str(tmp_path / "r.jsonl")]
    assert main([*argv, "--capture", str(shared)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "others may read it (mode 0755)" in err[0], err
    with pytest.raises(SystemExit):
        build_parser().parse_args([*argv, "--capture-max-bytes", "lots"])
    with pytest.raises(SystemExit):
        build_parser().parse_args([*argv, "--capture-max-age", "0"])
