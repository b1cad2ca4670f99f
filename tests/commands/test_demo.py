"""``voxproxy demo`` (``voxproxy/commands/demo.py``): its flags reach the demo and its
status is the command's. The demo itself (a mock agent, the proxy, scripted calls) is
:mod:`voxproxy.harness.demo`'s, tested in tests/harness/test_demo.py; here it is faked."""

from __future__ import annotations

import pytest

import voxproxy.harness.demo
from voxproxy.cli import main


@pytest.fixture
def demos(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int | None]]:
    ran: list[tuple[str, int | None]] = []

    async def run_demo(out: str, concurrency: int | None = None) -> int:
        ran.append((out, concurrency))
        return 1 if out == "failing" else 0

    monkeypatch.setattr(voxproxy.harness.demo, "run_demo", run_demo)
    for name in ("OUT", "CONCURRENCY"):
        monkeypatch.delenv(f"VOXPROXY_DEMO_{name}", raising=False)
    return ran


def test_the_defaults_size_the_run_for_this_machine(demos: list[tuple[str, int | None]]) -> None:
    assert main(["demo"]) == 0
    assert demos == [("voxproxy-demo", None)]


def test_the_flags_reach_the_demo_and_its_status_is_the_command_s(
    demos: list[tuple[str, int | None]],
) -> None:
    assert main(["demo", "--out", "failing", "--concurrency", "3"]) == 1
    assert demos == [("failing", 3)]


def test_the_environment_sets_the_flags_and_the_command_line_wins(
    demos: list[tuple[str, int | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOXPROXY_DEMO_OUT", "from-env")
    monkeypatch.setenv("VOXPROXY_DEMO_CONCURRENCY", "2")
    assert main(["demo"]) == 0
    assert main(["demo", "--out", "given"]) == 0
    assert demos == [("from-env", 2), ("given", 2)]


def test_a_concurrency_that_is_no_number_exits_2(demos: list[tuple[str, int | None]]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["demo", "--concurrency", "many"])
    assert refused.value.code == 2 and demos == []
