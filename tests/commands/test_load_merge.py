"""``voxproxy load --shard/--start-at/--run-id`` and ``voxproxy load merge``
(``voxproxy/commands/load_merge.py``): the two words read as one subcommand, the flags made
into a :class:`Sharding` (or none), the refusals, and the plan a shard's results describe."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from voxproxy.cli import main
from voxproxy.commands.load_merge import Sharding, rewrite_argv, sharding
from voxproxy.core.errors import ConfigError
from voxproxy.loadgen.runner import LoadPlan
from voxproxy.loadgen.scenario import find_scenario
from voxproxy.loadgen.shard import SHARD_FILE, Shard


def _plan(calls: int = 10, concurrency: int = 4) -> LoadPlan:
    return LoadPlan(
        target="ws://127.0.0.1:9/",
        dialect="twilio",
        scenarios=(find_scenario("normal_question"),),
        calls=calls,
        concurrency=concurrency,
        run_id="00000000000000000abc",
        seed=7,
    )


def _args(
    shard: str | None = None,
    start_at: str | None = None,
    run_id: str | None = None,
    workers: int = 1,
) -> argparse.Namespace:
    return argparse.Namespace(shard=shard, start_at=start_at, run_id=run_id, workers=workers)


def test_load_merge_is_read_as_the_load_merge_subcommand_and_nothing_else_is() -> None:
    assert rewrite_argv(["load", "merge", "a", "b"]) == ["load-merge", "a", "b"]
    assert rewrite_argv(["load", "normal_question"]) == ["load", "normal_question"]
    assert rewrite_argv(["proxy", "load", "merge"]) == ["proxy", "load", "merge"]
    assert rewrite_argv(["load"]) == ["load"]


def test_an_ordinary_run_has_no_sharding_and_a_run_id_alone_only_names_the_run() -> None:
    plan = _plan()
    assert sharding(_args(), plan) is None
    named = sharding(_args(run_id="AB"), plan)
    assert named is not None and named.shard is None and named.start_at is None
    assert named.plan.run_id == "000000000000000000ab"  # lower case, padded to 20 digits
    assert named.calls == plan.calls and named.view() == named.plan


def test_shards_of_one_start_derive_one_run_id_and_another_start_another() -> None:
    plan = _plan()
    at = "2026-12-01T12:00:00Z"
    first = sharding(_args(shard="0/2", start_at=at), plan)
    second = sharding(_args(shard="1/2", start_at=at), plan)
    later = sharding(_args(shard="0/2", start_at="2026-12-01T12:00:01Z"), plan)
    assert first is not None and second is not None and later is not None
    assert first.plan.run_id == second.plan.run_id != plan.run_id
    assert later.plan.run_id != first.plan.run_id
    assert len(first.plan.run_id) == 20
    assert first.shard == Shard(0, 2) and first.start_at == later.start_at - 1


def test_a_barrier_alone_is_one_shard_of_one() -> None:
    ran = sharding(_args(start_at="1700000000"), _plan())
    assert ran is not None and ran.shard is None and ran.start_at == 1_700_000_000.0
    assert ran.calls == 10


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (_args(shard="0/2"), "--start-at or --run-id"),
        (_args(shard="0/2", run_id="ab", workers=2), "do not go together"),
        (_args(shard="2/2", run_id="ab"), "--shard"),
        (_args(run_id="xyz"), "hex digits"),
        (_args(start_at="noon"), "--start-at"),
    ],
)
def test_flags_that_cannot_make_a_run_are_refused(args: argparse.Namespace, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        sharding(args, _plan())


def test_one_shard_of_one_needs_no_common_run_id() -> None:
    alone = sharding(_args(shard="0/1"), _plan())
    assert alone is not None and alone.shard == Shard(0, 1)


def test_a_shard_s_view_is_its_own_calls_and_its_share_of_the_concurrency() -> None:
    plan = _plan(calls=10, concurrency=4)
    views = [Sharding(plan, Shard(k, 3), None).view() for k in range(3)]
    assert [v.calls for v in views] == [4, 3, 3]
    assert sum(v.concurrency for v in views) == 4
    assert all(v.run_id == plan.run_id and v.scenarios == plan.scenarios for v in views)
    assert Sharding(plan, Shard(2, 3), None).calls == 3


def test_the_load_command_refuses_bad_shard_flags(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["load", "normal_question", "--target", "ws://127.0.0.1:9"]
    assert main([*base, "--shard", "0/2"]) == 2
    assert "--start-at or --run-id" in capsys.readouterr().err
    assert main([*base, "--shard", "2/2", "--run-id", "ab"]) == 2
    assert main([*base, "--shard", "0/2", "--run-id", "ab", "--workers", "2"]) == 2
    assert "do not go together" in capsys.readouterr().err
    assert main([*base, "--run-id", "xyz"]) == 2
    assert "hex digits" in capsys.readouterr().err


def test_merge_names_a_directory_without_a_shard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["load", "merge", str(tmp_path), "--out", str(tmp_path / "m")]) == 2
    assert SHARD_FILE in capsys.readouterr().err


def test_merge_wants_the_proxy_s_receipts_and_secret_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["load", "merge", str(tmp_path), "--out", str(tmp_path / "m")]
    assert main([*argv, "--proxy-receipts", str(tmp_path / "r.jsonl")]) == 2
    assert "go together" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()
