"""``voxproxy scenarios``: every built-in scenario load takes by name and every clip a
step can say, in full names, on one line each at 80 columns; --json for scripts."""

from __future__ import annotations

import json

import pytest

from voxproxy.cli import build_parser, main
from voxproxy.clips import load_clips
from voxproxy.commands.load import _settings
from voxproxy.loadgen.scenario import builtin_names


def test_the_json_lists_what_load_takes_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenarios", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    names = [s["name"] for s in found["scenarios"]]
    assert names == builtin_names() and len(names) >= 5
    for s in found["scenarios"]:
        assert 0 < s["caller_audio_s"] < s["longest_call_s"], s
        assert s["steps"] and s["description"]
    argv = ["load", *names, "--target", "ws://127.0.0.1:9", "--dialect", "raw"]
    plan = _settings(build_parser().parse_args(argv)).plan  # each one, by its name
    assert [scenario.name for scenario, _ in plan.scenarios] == names
    assert [c["name"] for c in found["clips"]] == list(load_clips())
    assert len(found["testbench"]["scenarios"]) >= 10


@pytest.mark.parametrize("columns", [80, 120])
def test_the_listing_names_everything_in_full_one_line_each(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], columns: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["scenarios"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= columns
    for name in [*builtin_names(), *load_clips()]:
        (line,) = [ln for ln in lines if ln.startswith(f"{name} ")]
        assert line.split()[0] == name
