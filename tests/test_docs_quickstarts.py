"""The quickstarts' examples work as written: every ``voxproxy`` command line in them
parses with today's flags, and the load quickstart's scenario YAML loads and runs
against the mock agent (every expectation met)."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml
from support.child import mock_agent_process
from support.loadcli import run_load

from voxproxy.cli import build_parser
from voxproxy.commands.load_merge import rewrite_argv
from voxproxy.loadgen.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("quickstart-staging.md", "quickstart-load.md", "quickstart-traces.md")


def _blocks(name: str, lang: str) -> list[str]:
    text = (ROOT / name if name == "README.md" else ROOT / "docs" / name).read_text()
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def _commands(name: str) -> list[list[str]]:
    out = []
    for block in _blocks(name, "sh"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("#", 1)[0].strip().rstrip("&").strip()
            words = shlex.split(line) if line else []
            while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):  # VAR=value prefixes
                words.pop(0)
            if words and words[0] == "voxproxy":
                out.append(words[1:])
    return out


@pytest.mark.parametrize("name", [*DOCS, "README.md"])
def test_every_command_line_in_the_quickstart_parses(name: str) -> None:
    commands = _commands(name)
    assert commands, name
    parser = build_parser()
    for argv in commands:
        parser.parse_args(rewrite_argv(argv))  # exits 2 on an unknown flag or value


def test_the_readme_links_each_quickstart() -> None:
    readme = (ROOT / "README.md").read_text()
    for name in DOCS:
        assert f"(docs/{name})" in readme, name


def test_the_install_lines_work_before_the_package_is_on_pypi() -> None:
    """voxproxy is not on the package index yet: no quickstart starts with a bare
    ``pip install voxproxy`` (it finds nothing), each points at the README's ways that
    work today, and the wheels the README installs are the ones `make wheels` names."""
    for name in DOCS:
        lines = [
            line.split("#", 1)[0].split()
            for block in _blocks(name, "sh")
            for line in block.splitlines()
        ]
        assert ["pip", "install", "voxproxy"] not in lines, name
        assert "(../README.md#installing-the-package)" in (ROOT / "docs" / name).read_text()
    readme = (ROOT / "README.md").read_text()
    assert "## Installing the package" in readme
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    wheels = re.findall(r"dist/(voxproxy-[^ ']+\.whl)", readme)
    assert wheels and all(w.startswith(f"voxproxy-{version}-") for w in wheels), wheels
    assert "git+https://" in readme


def test_the_collector_example_is_yaml_with_its_pipelines() -> None:
    (block,) = _blocks("quickstart-traces.md", "yaml")
    config = yaml.safe_load(block)
    assert set(config["service"]["pipelines"]) == {"traces", "metrics", "logs"}


@pytest.mark.slow
def test_the_load_quickstart_scenario_runs_against_the_mock_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (block,) = [b for b in _blocks("quickstart-load.md", "yaml") if "order_status" in b]
    path = tmp_path / "order_status.yaml"
    path.write_text(block)
    scenario = load_scenario(path)
    assert scenario.name == "order_status" and scenario.expect is not None
    with mock_agent_process() as found:
        status = run_load(
            f"ws://127.0.0.1:{found.group(1)}",
            tmp_path / "run2",
            "--calls",
            "2",
            "--concurrency",
            "2",
            scenario=str(path),
        )
    out = capsys.readouterr().out
    results = json.loads((tmp_path / "run2" / "results.json").read_text())
    assert [c["failures"] for c in results["calls"]] == [[], []], out
    assert status == 0
