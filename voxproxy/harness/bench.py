"""Scenarios against in-process mock agents, each behind its own voxproxy.

The demo, the accuracy benchmark and tests all need the same arrangement: a
few mock agents with different behaviour, a proxy in front of each, scripted
callers through every proxy at once, and then each call's record, receipt and
agent log put side by side. :func:`run_bench` does that once, with the proxies in
this process or, given a :class:`ProxyHost`, wherever the host runs them (another
process, pinned to a core: the accuracy benchmark's contended run).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from voxproxy.core.errors import UsageError
from voxproxy.core.ids import keyed_hash
from voxproxy.core.receipt import Receipt
from voxproxy.harness.ports import free_port
from voxproxy.loadgen.results import CallOutcome
from voxproxy.loadgen.runner import LoadPlan, prepare_scenarios, run_calls
from voxproxy.loadgen.scenario import Scenario
from voxproxy.mockagent import MockAgent, MockAgentConfig
from voxproxy.proxy.server import EventsConfig, ProxyServer, ServeConfig
from voxproxy.proxy.websocket import ProxyConfig
from voxproxy.receipts.policy import Policy, load_policy
from voxproxy.simcall.log import CallLog
from voxproxy.transports.websocket import RelayConfig

# How long the callers' end may precede their calls' last receipts (a bound, not a pause:
# the wait ends when every call's receipt is in).
RECEIPTS_WAIT_S = 5.0


@dataclass(frozen=True, slots=True)
class BenchAgent:
    label: str
    config: MockAgentConfig
    calls: int  # calls placed against this agent (scenarios in rotation)
    post_events: bool = False  # the agent posts its tool and outcome events to the event API


@dataclass(frozen=True, slots=True)
class BenchCall:
    label: str  # the agent's label
    outcome: CallOutcome


class ProxyHost(Protocol):
    """Proxies run elsewhere: one in front of each upstream agent URL."""

    async def start(self, upstreams: Sequence[str], secret: bytes) -> list[str]:
        """Start a proxy per upstream; returns the ws:// URL callers dial for each."""
        ...

    async def stop(self) -> Mapping[str, Receipt]:
        """Drain and stop every proxy; returns every receipt written, by call."""
        ...


async def run_bench(
    agents: Sequence[BenchAgent],
    scenarios: tuple[tuple[Scenario, Path | None], ...],
    *,
    secret: bytes,
    concurrency: int = 64,
    extra_sinks: Sequence[Callable[[Receipt], None]] = (),
    proxy_dialect: str = "auto",
    policy: Policy | None = None,
    tag_scenario: bool = False,
    proxy_host: ProxyHost | None = None,
) -> list[BenchCall]:
    """Run every agent's calls at once; returns each call with its receipt and agent log.

    Receipts get their verdict under ``policy`` (default: the embedded policy). With
    ``tag_scenario`` each call's path names its scenario (``/<scenario>/<call id>``): the
    outcome testbench's channel to the mock agent's task scripts. With ``proxy_host`` the
    proxies are the host's (``extra_sinks``, ``policy`` and ``post_events`` are then the
    host's business: posting events is refused)."""
    if proxy_host is not None and any(spec.post_events for spec in agents):
        raise UsageError("post_events needs the in-process proxies (no proxy_host)")
    policy = policy or load_policy()
    prepare_scenarios(scenarios)  # before the proxies' clocks run
    receipts: dict[str, Receipt] = {}
    expected = [0]  # receipts awaited once the calls are done (0: not yet known)
    all_in = asyncio.Event()

    def keep(r: Receipt) -> None:
        receipts[r.call] = r
        if expected[0] and len(receipts) >= expected[0]:
            all_in.set()

    mocks: list[MockAgent] = []
    proxies: list[ProxyServer] = []
    plans: list[LoadPlan] = []
    targets: list[str] = []
    stamp = f"{int(time.time()):x}"
    hosted = False
    try:
        for spec in agents:
            config = spec.config
            token = secrets.token_hex(16)
            api_port = free_port() if spec.post_events else None
            if api_port is not None:
                config = replace(
                    config, post_events_url=f"http://127.0.0.1:{api_port}", events_token=token
                )
            mock = MockAgent(config)
            await mock.start()
            mocks.append(mock)
            if proxy_host is not None:
                continue
            proxy = ProxyServer(
                ServeConfig(
                    # No admission on loop lag: these proxies share the loop with the
                    # bench's own callers and agents, so its lag is the bench's load (all
                    # calls start at once), not an overload a caller should be refused for.
                    ProxyConfig(
                        RelayConfig(mock.url),
                        dialect=proxy_dialect,
                        secret=secret,
                        max_loop_lag_ms=None,
                    ),
                    listen=("127.0.0.1", 0),
                    workers=1,  # one proxy, one process: this one (with its agent and callers)
                    receipts=None,
                    policy=policy,
                    sinks=(keep, *extra_sinks),
                    events=None
                    if api_port is None
                    else EventsConfig(token, ("127.0.0.1", api_port)),
                    drain_timeout_s=1.0,
                )
            )
            proxies.append(proxy)
            await proxy.start()
            targets.append(proxy.url)
        if proxy_host is not None:
            hosted = True
            targets = await proxy_host.start([m.url for m in mocks], secret)
        for i, spec in enumerate(agents):
            plans.append(
                LoadPlan(
                    target=targets[i],
                    dialect=spec.config.dialect,
                    scenarios=scenarios,
                    calls=spec.calls,
                    concurrency=max(1, concurrency // max(1, len(agents))),
                    tag_path=True,  # the call id in the path names the agent's log
                    tag_scenario=tag_scenario,  # and the scenario before it (the testbench)
                    run_id=f"b{i:02d}{stamp}"[:20],
                    seed=1000 * i,
                )
            )
        runs = await asyncio.gather(*(run_calls(p, list(range(p.calls))) for p in plans))
        if not hosted:
            # The callers are done: wait for the proxies' last receipts (a call refused
            # before it was measured never has one; stop() then drains what is left).
            expected[0] = sum(len(records) for records in runs)
            if len(receipts) >= expected[0]:
                all_in.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(all_in.wait(), RECEIPTS_WAIT_S)
    finally:
        if hosted:
            assert proxy_host is not None
            receipts.update(await proxy_host.stop())
        for proxy in proxies:
            await proxy.stop()
        for mock in mocks:
            await mock.stop()
    out: list[BenchCall] = []
    for spec, plan, records, mock in zip(agents, plans, runs, mocks, strict=True):
        logs: dict[str, CallLog] = {
            log.path.rstrip("/").rsplit("/", 1)[-1]: log for log in mock.calls
        }
        for index, cid, record in records:
            scenario, _base = plan.scenarios[index % len(plan.scenarios)]
            outcome = CallOutcome(
                scenario=scenario,
                index=len(out),
                call_id=cid,
                dialect=plan.dialect,
                record=record,
                receipt=receipts.get(keyed_hash(secret, cid, "c_")),
                agent_log=logs.get(cid),
            )
            out.append(BenchCall(spec.label, outcome))
    return out
