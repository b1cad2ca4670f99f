"""What ``verdict`` and ``gate`` judge (``voxproxy/commands/_inputs.py``): receipts read
from files and a store, each with where it came from, bad input named in one line, and
the policy they are judged under (the one the proxy used, when it was a profile)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from support.flowkit import healthy, write_jsonl

from voxproxy.commands._inputs import (
    DEFAULT_RECEIPTS,
    Sourced,
    judged_inputs,
    judging_policy,
    load_receipts,
)
from voxproxy.core.errors import ConfigError
from voxproxy.receipts.policy import Policy, load_policy
from voxproxy.receipts.store import connect, insert
from voxproxy.receipts.verdict import judged


def test_receipts_come_from_every_file_then_the_store_each_named_by_its_source(
    tmp_path: Path,
) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [healthy(name="a1"), healthy(name="a2")])
    b = write_jsonl(tmp_path / "b.jsonl", [healthy(name="b1")])
    db = tmp_path / "r.db"
    conn = connect(db)
    insert(conn, [healthy(name="s1")])
    conn.close()
    got = load_receipts([str(a), str(b)], str(db))
    assert [item.source for item in got] == [str(a), str(a), str(b), str(db)]
    calls = [item.receipt.call for item in got]
    assert len(set(calls)) == 4  # four receipts, none read twice


def test_without_inputs_the_proxy_s_default_file_here_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=f"no {DEFAULT_RECEIPTS} here"):
        load_receipts([], None)
    write_jsonl(tmp_path / DEFAULT_RECEIPTS, [healthy()])
    (only,) = load_receipts([], None)
    assert only.source == DEFAULT_RECEIPTS


def test_a_bad_line_is_named_by_file_receipt_number_and_field(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    good = healthy().to_json_line()
    path.write_text(good + good + '{"schema": "voxproxy.receipt/1"}\n')
    with pytest.raises(ConfigError, match=r"r\.jsonl: receipt 3 is not a valid receipt: \w"):
        load_receipts([str(path)], None)


@pytest.mark.parametrize(
    ("content", "says"),
    [(None, "cannot read receipts"), (b"\xff\xfe\n", "not UTF-8"), (b"", "no receipts found")],
)
def test_unreadable_inputs_are_config_errors(
    tmp_path: Path, content: bytes | None, says: str
) -> None:
    path = tmp_path / "r.jsonl"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError, match=says):
        load_receipts([str(path)], None)


def _sourced(*receipts_policies: Policy | None) -> list[Sourced]:
    out = []
    for k, policy in enumerate(receipts_policies):
        r = healthy(name=f"c{k}")
        out.append(Sourced("f", r if policy is None else judged(r, policy)))
    return out


def test_receipts_all_judged_under_one_profile_are_judged_under_it_again() -> None:
    latency_only = load_policy("latency-only")
    policy, why = judging_policy(None, _sourced(latency_only, latency_only))
    assert policy.hash == latency_only.hash
    assert why == "judged under latency-only, the profile the receipts carry"


def test_unjudged_receipts_or_the_default_s_own_need_no_word_of_another_policy() -> None:
    auto = load_policy()
    assert judging_policy(None, _sourced(None, None)) == (auto, None)
    assert judging_policy("auto", _sourced(auto, None)) == (auto, None)


def test_mixed_or_unknown_policies_fall_back_to_the_default_and_say_so() -> None:
    lax = Policy(max_first_response_ms=2000)
    latency_only = load_policy("latency-only")
    policy, why = judging_policy(None, _sourced(lax, latency_only, latency_only, None))
    assert policy.hash == load_policy().hash
    assert why is not None
    assert "the proxy judged 3 of 4 receipt(s) under another policy" in why
    assert f"{lax.hash} (a policy file, 1 receipt(s))" in why
    assert f"{latency_only.hash} (latency-only, 2 receipt(s))" in why
    assert why.endswith("give --policy to judge them as the proxy did")


def test_a_given_policy_wins_over_the_profile_the_receipts_carry() -> None:
    latency_only = load_policy("latency-only")
    policy, why = judging_policy("task-outcome", _sourced(latency_only))
    assert policy.profile == "task-outcome"
    assert why is not None and "(as --policy says)" in why and "give --policy" not in why
    assert judging_policy("latency-only", _sourced(latency_only)) == (latency_only, None)


def test_a_bad_policy_is_named_before_any_receipt_is_read(tmp_path: Path) -> None:
    bad = tmp_path / "strict.yaml"
    bad.write_text("max_first_response_ms: -1\n")
    args = argparse.Namespace(
        receipts=[str(tmp_path / "missing.jsonl")], store=None, policy=str(bad)
    )
    with pytest.raises(ConfigError, match=r"strict\.yaml"):
        judged_inputs(args)
    args.policy = None
    with pytest.raises(ConfigError, match=r"missing\.jsonl: cannot read"):
        judged_inputs(args)
