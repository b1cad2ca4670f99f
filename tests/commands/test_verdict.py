"""``voxproxy verdict``, end to end: tables, JUnit XML, exit status, bad input."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.flowkit import flow_receipts, healthy, write_jsonl

from voxproxy.cli import main
from voxproxy.receipts.policy import Policy, load_policy
from voxproxy.receipts.store import connect, insert
from voxproxy.receipts.verdict import judge, judged


@pytest.fixture(autouse=True)
def _wide_and_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # rich tables on one line per row
    for name in ("VOXPROXY_VERDICT_POLICY", "VOXPROXY_VERDICT_STORE"):
        monkeypatch.delenv(name, raising=False)


def test_prints_verdicts_writes_junit_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    receipts = flow_receipts()
    path = write_jsonl(tmp_path / "r.jsonl", receipts)
    junit = tmp_path / "ci" / "verdicts.xml"
    assert main(["verdict", str(path), "--junit", str(junit)]) == 1
    out = capsys.readouterr().out
    policy = load_policy()
    assert f"verdicts under policy {policy.hash} (auto, version {policy.version})" in out
    for r in receipts:
        v = judge(r, policy)
        row = next(line for line in out.splitlines() if r.call in line)
        assert v.verdict in row and (v.gate or "") in row and (v.cause or "") in row
    assert "12 call(s): 1 pass, 11 not passing" in out
    counts = {}
    for line in out.split("by verdict and cause")[1].splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) == 6:
            counts[f"{cells[1]}/{cells[2]}/{cells[3]}"] = int(cells[4])
    assert counts["tool_effect_failed/tool_effect/stale_write"] == 2
    assert counts["barge_in_failed/interruption/"] == 2
    assert counts["insufficient_evidence/outcome/"] == 1
    assert sum(counts.values()) == 12

    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("12", "11", "0")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props == {"policy": policy.hash, "policy_version": "1"}
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [r.call for r in receipts]
    failures = [c.find("failure") for c in cases]
    assert sum(f is not None for f in failures) == 11
    by_call = {c.get("name"): c.find("failure") for c in cases}
    stale = by_call[receipts[7].call]  # stale_write_after_correction
    assert stale is not None
    assert stale.get("type") == "tool_effect_failed"
    assert stale.get("message", "").startswith(
        "tool_effect_failed at gate tool_effect: stale_write"
    )
    assert "cause: stale_write" in (stale.text or "")
    assert by_call[receipts[0].call] is None  # the pass flow
    assert cases[0].get("time") == "9.000"


def test_all_passing_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", [healthy(name="a"), healthy(name="b")])
    junit = tmp_path / "j.xml"
    assert main(["verdict", str(path), "--junit", str(junit)]) == 0
    assert "2 call(s): 2 pass, 0 not passing" in capsys.readouterr().out
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0"


def test_receipts_are_judged_again_under_the_given_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slow = healthy(agent=[(3000, 3900)])  # 1500 ms
    lax = judged(slow, Policy(max_first_response_ms=2000))
    assert lax.verdict is not None and lax.verdict.verdict == "pass"
    path = write_jsonl(tmp_path / "r.jsonl", [lax])
    assert main(["verdict", str(path)]) == 1  # the default policy: 1200 ms
    out = capsys.readouterr().out
    assert "slow_first_response" in out and "1 carried a different verdict before" in out
    policy = tmp_path / "lax.yaml"
    policy.write_text("max_first_response_ms: 2000\n")
    assert main(["verdict", str(path), "--policy", str(policy)]) == 0
    assert "carried a different verdict" not in capsys.readouterr().out


def test_the_policy_can_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_jsonl(tmp_path / "r.jsonl", [healthy(agent=[(3000, 3900)])])
    policy = tmp_path / "lax.yaml"
    policy.write_text("max_first_response_ms: 2000\n")
    monkeypatch.setenv("VOXPROXY_VERDICT_POLICY", str(policy))
    assert main(["verdict", str(path)]) == 0


def test_receipts_from_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    conn = connect(db)
    insert(conn, [healthy(name="a"), healthy(name="b", outcome=False)])
    conn.close()
    assert main(["verdict", "--store", str(db)]) == 1
    assert "2 call(s): 1 pass, 1 not passing" in capsys.readouterr().out


def test_bad_input_exits_2_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no receipts.jsonl here
    good = write_jsonl(tmp_path / "good.jsonl", [healthy()])

    def err(argv: list[str]) -> str:
        assert main(argv) == 2
        return capsys.readouterr().err

    assert "missing.jsonl: cannot read receipts" in err(
        ["verdict", str(tmp_path / "missing.jsonl")]
    )
    bad_policy = tmp_path / "strict.yaml"
    bad_policy.write_text("max_first_response_ms: -1\n")
    message = err(["verdict", str(good), "--policy", str(bad_policy)])
    assert "strict.yaml: invalid policy" in message and "greater than 0" in message
    invalid = tmp_path / "invalid.jsonl"
    invalid.write_text(healthy().to_json_line() + '{"schema": "voxproxy.receipt/1"}\n')
    message = err(["verdict", str(invalid)])
    assert "invalid.jsonl: receipt 2 is not a valid receipt" in message
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert "no receipts found in" in err(["verdict", str(empty)])
    assert "no receipts given and no receipts.jsonl here" in err(["verdict"])
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\xfa\n")
    assert "bin.jsonl: not a JSON-lines receipt file" in err(["verdict", str(binary)])
    assert "nostore.db: no receipt store there" in err(
        ["verdict", "--store", str(tmp_path / "nostore.db")]
    )
    assert "cannot write JUnit XML" in err(
        ["verdict", str(good), "--junit", str(good / "under-a-file.xml")]
    )


def test_without_inputs_the_proxy_s_default_file_here_is_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # As `voxproxy receipts` and `receipts export` do: the proxy's default --receipts.
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "receipts.jsonl", [healthy(name="a"), healthy(name="b", outcome=False)])
    assert main(["verdict"]) == 1
    assert "2 call(s): 1 pass, 1 not passing" in capsys.readouterr().out
    assert main(["gate"]) == 0
    assert "release gate: passed" in capsys.readouterr().out


def test_receipts_the_proxy_judged_under_a_profile_are_judged_under_it_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The proxy ran with --policy latency-only: its receipts carry that policy's hash.
    # `verdict` without --policy judged them under auto and printed another hash, silently.
    latency_only = load_policy("latency-only")
    no_outcome = healthy(outcome=False)  # auto requires no outcome check here either
    path = write_jsonl(tmp_path / "r.jsonl", [judged(no_outcome, latency_only)])
    assert main(["verdict", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"verdicts under policy {latency_only.label}" in out
    assert "judged under latency-only, the profile the receipts carry" in out
    # Told another policy, it says why the hashes differ.
    assert main(["verdict", str(path), "--policy", "task-outcome"]) in (0, 1)
    out = " ".join(capsys.readouterr().out.split())
    assert f"the proxy judged 1 of 1 receipt(s) under another policy: {latency_only.hash}" in out
    assert "(latency-only, 1 receipt(s)); judged here under task-outcome (as --policy says)" in out


def test_receipts_judged_under_a_policy_file_say_how_to_judge_them_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lax = Policy(max_first_response_ms=2000)
    path = write_jsonl(tmp_path / "r.jsonl", [judged(healthy(), lax)])
    assert main(["verdict", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"under another policy: {lax.hash} (a policy file, 1 receipt(s))" in out
    assert "judged here under auto (the default; no --policy given); give --policy" in out
