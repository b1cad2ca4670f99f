"""run_bench with the proxies elsewhere: a ProxyHost (the accuracy benchmark's proxy
process, benchmarks/proxyhost.py)."""

from __future__ import annotations

import json

import pytest
from support.benchmarks import load_benchmark
from support.groundtruth import NEVER_WITHHELD, require_published

from voxproxy.core.errors import UsageError
from voxproxy.core.ids import keyed_hash
from voxproxy.harness.bench import BenchAgent, run_bench
from voxproxy.loadgen.scenario import Scenario
from voxproxy.mockagent import MockAgentConfig

SECRET = b"bench-host-test"


def _scenario() -> Scenario:
    steps = [{"say": "caller_hello"}, {"wait": {"until": "agent_end", "quiet_ms": 300}}]
    return Scenario.model_validate({"name": "hello", "steps": steps})


async def test_posting_events_needs_the_in_process_proxies() -> None:
    agent = BenchAgent("a", MockAgentConfig(), 1, post_events=True)
    host = load_benchmark("proxyhost").SubprocessProxyHost()
    with pytest.raises(UsageError, match="post_events"):
        await run_bench([agent], ((_scenario(), None),), secret=SECRET, proxy_host=host)


@pytest.mark.slow
async def test_calls_go_through_the_hosts_proxies_and_get_its_receipts() -> None:
    agents = [
        BenchAgent(
            dialect,
            MockAgentConfig(
                dialect=dialect,  # type: ignore[arg-type]
                responses=("agent_reprompt",),
                delay_ms=300.0,
                send_mode="burst",
            ),
            1,
        )
        for dialect in ("raw", "twilio")
    ]
    # Every figure published (a busy machine's clock lag would withhold them): this test
    # is about the calls and receipts going through the host.
    host = load_benchmark("proxyhost").SubprocessProxyHost(
        max_seconds=120.0, max_uncertainty_ms=NEVER_WITHHELD
    )
    calls = await run_bench(agents, ((_scenario(), None),), secret=SECRET, proxy_host=host)
    assert [c.label for c in calls] == ["raw", "twilio"]
    assert host.stats["calls"] == 2  # both went through the child's proxies
    answers = []
    for c in calls:
        o = c.outcome
        assert o.record.error is None
        assert o.agent_log is not None and len(o.agent_log.responses) == 1
        assert o.receipt is not None
        assert o.receipt.call == keyed_hash(SECRET, o.call_id, "c_")
        assert o.receipt.verdict is not None  # judged by the host, as in-process
        responses = [t for t in o.receipt.turns if t.kind == "response"]
        assert len(responses) == 1
        answers += responses
    # Both measured (only shed measurement could withhold one here, and not both).
    require_published(answers, "bench host")


def test_receipts_from_a_newer_tree_are_read_without_the_fields_this_one_lacks() -> None:
    from support.receipt_samples import sample_receipt

    parse = load_benchmark("proxyhost").parse_receipt
    receipt = sample_receipt()
    data = json.loads(receipt.model_dump_json(by_alias=True))
    data["traffic"]["a_field_added_later"] = 1.0
    data["another"] = {"nested": True}
    assert parse(json.dumps(data)) == receipt
    assert parse(receipt.model_dump_json()) == receipt
    assert parse("{not json") is None
    assert parse(json.dumps({"call": "c_x"})) is None  # missing fields are not made up
