"""benchmarks/record.py: a benchmark's last line, recorded into the results file only when
asked, dated, with the machine and the build; and every benchmark ends through it."""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.benchmarks import load_benchmark

from voxproxy import native

ROOT = Path(__file__).resolve().parents[2]
# Scripts of benchmarks/ that are parts of a benchmark, not benchmarks: no last line of
# their own to record.
PARTS = {
    "record",
    "benchkit",
    "proxyhost",
    "accuracy_compare",
    "accuracy_report",
    "capacity_load",
    "capacity_relays",
    "cpushare",
    "overhead_load",
}


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    module = load_benchmark("record")
    monkeypatch.setattr(module, "RESULTS", tmp_path / "docs" / "results.json")
    monkeypatch.setattr(module, "ROOT", ROOT)
    return module


def _args(record: Any, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels")
    record.add_flag(parser)
    return parser.parse_args(argv)


def test_without_record_the_headline_is_the_last_line_and_nothing_is_written(
    record: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    record.finish("overhead", {"levels": [{"calls": 100}]}, _args(record, ["--levels", "100"]))
    out = capsys.readouterr().out
    assert json.loads(out.splitlines()[-1]) == {"levels": [{"calls": 100}]}
    assert not record.RESULTS.exists()


def test_a_recorded_run_is_dated_with_the_machine_and_the_build(
    record: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = [str(ROOT / "benchmarks" / "overhead.py"), "--levels", "100", "--record"]
    monkeypatch.setattr("sys.argv", argv)
    before = datetime.now().astimezone()
    record.finish("overhead", {"build": "x", "levels": []}, _args(record, argv[1:]))
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"build": "x", "levels": []}
    data = json.loads(record.RESULTS.read_text())
    assert data["format"] == record.FORMAT
    (name,) = data["benchmarks"]
    entry = data["benchmarks"][name]
    assert name == "overhead"
    assert entry["headline"] == {"build": "x", "levels": []}
    assert entry["command"] == "benchmarks/overhead.py --levels 100"
    assert entry["provenance"] == "recorded"
    assert datetime.fromisoformat(entry["date"]) >= before.replace(microsecond=0)
    machine = entry["machine"]
    assert machine["cores"] == os.cpu_count()
    assert machine["usable_cores"] == len(os.sched_getaffinity(0))
    assert len(machine["load_average_start"]) == 3 and len(machine["load_average_end"]) == 3
    assert machine["python"] and machine["platform"]
    build = entry["build"]
    assert build["core"] == native.build()
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    assert build["commit"] == (head or None)
    assert isinstance(build["dirty"], bool) or build["commit"] is None


def test_record_as_names_the_entry_and_other_entries_are_kept(
    record: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    record.finish("capacity", {"voxproxy_calls": 1}, _args(record, ["--record"]))
    record.finish("capacity", {"voxproxy_calls": 2}, _args(record, ["--record-as", "cap-2w"]))
    record.finish("capacity", {"voxproxy_calls": 3}, _args(record, ["--record"]))
    entries = json.loads(record.RESULTS.read_text())["benchmarks"]
    assert list(entries) == ["cap-2w", "capacity"]
    assert entries["capacity"]["headline"] == {"voxproxy_calls": 3}  # the last run replaces
    assert entries["cap-2w"]["headline"] == {"voxproxy_calls": 2}
    assert "recorded as 'cap-2w'" in capsys.readouterr().err


def test_the_command_leaves_out_the_record_flags(record: Any) -> None:
    script = str(ROOT / "benchmarks" / "capacity.py")
    assert record.command([script, "--record", "--core-share", "0.3"]) == (
        "benchmarks/capacity.py --core-share 0.3"
    )
    assert record.command([script, "--record-as", "capacity-2w", "--relays", "a,b"]) == (
        "benchmarks/capacity.py --relays a,b"
    )
    assert record.command([script, "--record-as=x", "--label", "it's"]) == (
        "benchmarks/capacity.py --label 'it'\"'\"'s'"
    )


def test_a_results_file_of_another_format_is_refused(record: Any) -> None:
    record.RESULTS.parent.mkdir(parents=True)
    record.RESULTS.write_text('{"format": 99, "benchmarks": {}}')
    with pytest.raises(ValueError, match="format 99"):
        record.write_entry(record.RESULTS, "x", {})


def _calls(path: Path) -> set[str]:
    """The ``record.<name>`` functions a script calls."""
    tree = ast.parse(path.read_text())
    return {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "record"
    }


def test_every_benchmark_takes_the_flag_and_ends_through_finish() -> None:
    scripts = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if p.stem not in PARTS)
    assert len(scripts) >= 15  # the folder's benchmarks are found
    missing = {p.stem: {"add_flag", "finish"} - _calls(p) for p in scripts}
    assert {k: v for k, v in missing.items() if v} == {}
    # ... and none prints its last line another way after finish.
    for path in scripts:
        text = path.read_text()
        assert not re.search(r"record\.finish\([^)]*\)\s*\n\s*print\(", text), path.name


def test_the_results_file_in_the_repository_is_complete_and_cites_what_exists() -> None:
    data = json.loads((ROOT / "docs" / "results.json").read_text())
    assert data["format"] == 1 and data["benchmarks"]
    performance = (ROOT / "docs" / "performance.md").read_text()
    headings = set(re.findall(r"^#+ (.+)$", performance, flags=re.M))
    for name, entry in data["benchmarks"].items():
        assert set(entry) >= {"command", "date", "machine", "build", "provenance", "headline"}
        assert entry["command"].startswith("benchmarks/"), name
        script = ROOT / entry["command"].split()[0]
        assert script.exists(), name
        datetime.fromisoformat(entry["date"])
        if entry["provenance"] != "recorded":
            # Carried over by hand: it names the page and a section of it that exists.
            assert entry["provenance"].startswith("seeded from docs/performance.md"), name
            (section,) = re.findall(r'"([^"]+)"', entry["provenance"])[:1]
            assert section in headings, (name, section)
