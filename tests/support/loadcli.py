"""``voxproxy load`` run in this process, for the tests of the command line."""

from __future__ import annotations

from pathlib import Path

from voxproxy.cli import main


def run_load(target: str, out: Path, *flags: str, scenario: str = "normal_question") -> int:
    """``voxproxy load SCENARIO --target TARGET FLAGS --out OUT``: its exit status."""
    return main(["load", scenario, "--target", target, *flags, "--out", str(out)])


# One short question and its answer, held to normal_question's bound: seconds of real
# time instead of normal_question's 18 s, for tests of the command rather than of the
# conversation.
HELLO = """name: hello
description: One short question and its answer.
steps:
  - say: caller_hello
    expect: {response: true, ttfs_ms_max: 1200}
  - wait: agent_end
"""


def hello_scenario(folder: Path) -> str:
    """:data:`HELLO` written to ``folder``: its path, for ``voxproxy load``."""
    path = folder / "hello.yaml"
    path.write_text(HELLO)
    return str(path)
