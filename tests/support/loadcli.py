"""``voxproxy load`` run in this process, for the tests of the command line."""

from __future__ import annotations

from pathlib import Path

from voxproxy.cli import main


def run_load(target: str, out: Path, *flags: str, scenario: str = "normal_question") -> int:
    """``voxproxy load SCENARIO --target TARGET FLAGS --out OUT``: its exit status."""
    return main(["load", scenario, "--target", target, *flags, "--out", str(out)])
