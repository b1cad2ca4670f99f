"""``voxproxy proxy --store --policy``: every receipt is judged and also stored."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path

import pytest
import websockets
from support.child import clean_env, kill, proxy_command, read_port

from voxproxy.cli import build_parser
from voxproxy.receipts.policy import load_policy
from voxproxy.receipts.store import query_receipts


def test_store_and_policy_flags_and_their_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("VOXPROXY_PROXY_POLICY", "VOXPROXY_PROXY_STORE"):
        monkeypatch.delenv(name, raising=False)
    args = build_parser().parse_args(["proxy", "--upstream", "ws://a"])
    assert (args.store, args.policy) == (None, None)
    args = build_parser().parse_args(
        ["proxy", "--upstream", "ws://a", "--store", "r.db", "--policy", "p.yaml"]
    )
    assert (args.store, args.policy) == ("r.db", "p.yaml")
    monkeypatch.setenv("VOXPROXY_PROXY_STORE", "/data/receipts.db")
    monkeypatch.setenv("VOXPROXY_PROXY_POLICY", "/etc/voxproxy/policy.yaml")
    args = build_parser().parse_args(["proxy", "--upstream", "ws://a"])
    assert (args.store, args.policy) == ("/data/receipts.db", "/etc/voxproxy/policy.yaml")


def test_a_bad_policy_stops_the_proxy_before_it_listens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from voxproxy.cli import main

    policy = tmp_path / "p.yaml"
    policy.write_text("gates: [outcome, reachability]\n")
    assert main(["proxy", "--upstream", "ws://127.0.0.1:9", "--policy", str(policy)]) == 2
    assert "p.yaml: invalid policy" in capsys.readouterr().err


@pytest.mark.slow
def test_the_running_proxy_judges_and_stores_each_receipt(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("version: staging-3\nmax_first_response_ms: 900\n")
    proc = subprocess.Popen(
        proxy_command(
            "--upstream",
            "ws://127.0.0.1:9",  # nothing listens there: the call is unreachable
            "--receipts",
            str(tmp_path / "r.jsonl"),
            "--store",
            str(tmp_path / "r.db"),
            "--policy",
            str(policy),
            "--secret",
            "s",
        ),
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    try:
        port = read_port(proc.stderr)

        async def one_call() -> None:
            with pytest.raises(websockets.InvalidStatus):
                async with websockets.connect(f"ws://127.0.0.1:{port}/", open_timeout=10):
                    pass

        asyncio.run(one_call())
        proc.send_signal(signal.SIGTERM)
        _, log = proc.communicate(timeout=15)
        assert proc.returncode == 0, log
        assert "1 receipt(s) stored in" in log
    finally:
        kill(proc)
    expected = load_policy(policy).hash
    (line,) = (tmp_path / "r.jsonl").read_text().splitlines()
    written = json.loads(line)
    assert written["policy"] == expected
    assert (written["verdict"]["verdict"], written["verdict"]["gate"]) == (
        "unreachable",
        "reachability",
    )
    (stored,) = query_receipts(tmp_path / "r.db")
    assert stored.call == written["call"] and stored.policy == expected
    assert stored.verdict is not None and stored.verdict.verdict == "unreachable"
