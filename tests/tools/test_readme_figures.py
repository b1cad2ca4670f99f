"""tools/readme_figures.py: the README's figures are the results file's, rendered.

The README quotes measured figures in one marked block; this test fails while that block
differs from what the script renders from docs/results.json, so a figure cannot be
changed in one place only."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support.benchmarks import load_benchmark

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "tools_readme_figures", ROOT / "tools" / "readme_figures.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


tool = _tool()


def _results() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ROOT / "docs" / "results.json").read_text())
    return data


def test_the_readme_block_is_the_results_file_rendered() -> None:
    text = (ROOT / "README.md").read_text()
    assert text.count(tool.BEGIN) == 1 and text.count(tool.END) == 1
    assert tool.replace_block(text, tool.render(_results())) == text, (
        "README.md's figures block differs from docs/results.json: "
        "run python tools/readme_figures.py"
    )
    assert tool.main(["--check"]) == 0


def test_every_figure_of_the_block_comes_from_an_entry() -> None:
    """Each row of the README's block has its entry: nothing says 'not measured yet'."""
    rendered = tool.render(_results())
    assert "not measured yet" not in rendered
    for row in tool.ROWS:
        assert row.key in _results()["benchmarks"], row.key


def _planted(tmp_path: Path, results: dict[str, Any], block: str = "old") -> tuple[Path, Path]:
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n\n{tool.BEGIN}\n{block}\n{tool.END}\n\nafter\n")
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    return readme, path


def test_a_stale_block_fails_the_check_and_is_rewritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _results()
    readme, path = _planted(tmp_path, results)
    args = ["--readme", str(readme), "--results", str(path)]
    assert tool.main([*args, "--check"]) == 1
    assert "differs" in capsys.readouterr().err
    assert "\nold\n" in readme.read_text()  # --check writes nothing
    assert tool.main(args) == 0
    text = readme.read_text()
    assert text.startswith("# x\n\nbefore\n\n") and text.endswith("\n\nafter\n")
    assert tool.main([*args, "--check"]) == 0
    # A figure changed in the results file shows in the block.
    capacity = results["benchmarks"]["capacity"]["headline"]
    capacity["voxproxy_calls"] += 1000
    path.write_text(json.dumps(results))
    assert tool.main([*args, "--check"]) == 1
    assert tool.main(args) == 0
    assert f"{capacity['voxproxy_calls']} calls" in readme.read_text()


def test_the_block_needs_its_two_markers_once(tmp_path: Path) -> None:
    for text in ("no block", f"{tool.BEGIN}\n{tool.END}\n{tool.BEGIN}\n{tool.END}", tool.END):
        with pytest.raises(ValueError, match="block"):
            tool.replace_block(text, "body")


def test_an_entry_lacking_a_shown_field_is_an_error_naming_it() -> None:
    results = copy.deepcopy(_results())
    del results["benchmarks"]["overhead"]["headline"]["levels"]
    with pytest.raises(ValueError, match="'overhead'"):
        tool.render(results)


def test_a_missing_entry_says_how_to_record_it() -> None:
    results = copy.deepcopy(_results())
    del results["benchmarks"]["memory"]
    rendered = tool.render(results)
    assert "not measured yet: `benchmarks/memory.py --record`" in rendered
    assert "| memory |" not in rendered  # no run row for it


def test_a_recorded_entry_shows_its_machine_build_and_commit_and_is_not_marked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = load_benchmark("record")
    results = copy.deepcopy(_results())
    old = results["benchmarks"]["memory"]
    monkeypatch.setattr("sys.argv", [str(ROOT / "benchmarks" / "memory.py"), "--record"])
    entry = record.entry(old["headline"])
    entry["machine"]["cpu"] = "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"
    entry["machine"]["load_average_start"] = [3.31, 2.0, 1.0]
    entry["build"].update(core="mypyc", commit="0123456789" * 4, dirty=True)
    results["benchmarks"]["memory"] = entry
    rendered = tool.render(results)
    (run,) = [line for line in rendered.splitlines() if line.startswith("| memory |")]
    assert "`benchmarks/memory.py`" in run
    assert "Intel Xeon Platinum 8375C, " in run and "load 3.3" in run
    assert "compiled, `0123456` + changes" in run
    assert tool.SEEDED_MARK not in run
    # Seeded entries stay marked, with the note saying where they came from.
    name = next(k for k, e in results["benchmarks"].items() if e["provenance"] != "recorded")
    (seeded,) = [line for line in rendered.splitlines() if line.startswith(f"| {name} |")]
    assert tool.SEEDED_MARK in seeded and "docs/performance.md" in rendered
