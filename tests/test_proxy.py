"""End to end over loopback: a scripted caller -> voxproxy -> the mock agent.

The proxy's receipt is compared with the truth that the caller (its own capture
and playout times) and the agent (which clip it sent where) know, and the
messages each side saw are compared with and without the proxy.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np
from support.groundtruth import NEVER_WITHHELD, beyond_lag

from voxproxy.clips import clip
from voxproxy.loadgen.caller import (
    BargeIn,
    CallerConfig,
    CallRecord,
    Say,
    ScriptedCaller,
    Step,
    WaitAgentEnd,
)
from voxproxy.loadgen.truth import turn_truths
from voxproxy.mockagent import CallLog, MockAgent, MockAgentConfig
from voxproxy.proxy import Proxy, ProxyConfig
from voxproxy.receipts.model import Receipt
from voxproxy.session import SessionConfig
from voxproxy.timebase import NS_PER_MS
from voxproxy.transports.websocket import RelayConfig


def script(barge_after_ms: float) -> list[Step]:
    return [
        Say(clip("caller_where_is_order")),
        WaitAgentEnd(quiet_ms=400),
        Say(clip("caller_topic_change")),
        BargeIn(after_ms=barge_after_ms, clip=clip("caller_interrupt")),
        WaitAgentEnd(quiet_ms=400),
        Say(clip("caller_yes")),
        WaitAgentEnd(quiet_ms=400),
    ]


@dataclass
class Outcome:
    receipt: Receipt
    record: CallRecord
    log: CallLog


SHORT: list[Step] = [Say(clip("caller_yes")), WaitAgentEnd(quiet_ms=300)]


async def one_call(
    n: int,
    dialect: str,
    mode: str,
    barge: str,
    delay_ms: float,
    via_proxy: bool = True,
    steps: list[Step] | None = None,
) -> Outcome:
    agent = MockAgent(
        MockAgentConfig(
            dialect=dialect,  # type: ignore[arg-type]
            send_mode=mode,  # type: ignore[arg-type]
            barge_in=barge,  # type: ignore[arg-type]
            delay_ms=delay_ms,
            jitter_ms=100.0,
            reaction_ms=120.0 + 40 * n,
            seed=n,
        )
    )
    await agent.start()
    receipts: list[Receipt] = []
    proxy = Proxy(
        ProxyConfig(
            RelayConfig(agent.url),
            dialect=dialect,
            secret=b"e2e",
            session=SessionConfig(max_uncertainty_ms=NEVER_WITHHELD),
        ),
        sinks=[receipts.append],
    )
    port = await proxy.start("127.0.0.1", 0)
    url = f"ws://127.0.0.1:{port}/e2e" if via_proxy else f"{agent.url}/e2e"
    caller = ScriptedCaller(
        CallerConfig(url=url, dialect=dialect, call_id=f"CA{n:032d}", seed=n),  # type: ignore[arg-type]
        steps if steps is not None else script(barge_after_ms=900.0 + 150 * n),
    )
    record = await caller.run()
    for _ in range(200):
        if receipts or not via_proxy:
            break
        await asyncio.sleep(0.02)
    await proxy.stop()
    await agent.stop()
    assert record.error is None, record.error
    if not via_proxy:
        return Outcome(None, record, agent.calls[0])  # type: ignore[arg-type]
    assert len(receipts) == 1
    return Outcome(receipts[0], record, agent.calls[0])


CALLS = [
    ("raw", "paced", "flush", 600.0),
    ("raw", "burst", "flush", 1200.0),
    ("raw", "paced", "silent", 900.0),
    ("twilio", "paced", "flush", 700.0),
    ("twilio", "burst", "flush", 1500.0),
    ("twilio", "paced", "silent", 1000.0),
]


async def test_live_calls_measure_ttfs_and_stop_latency_against_truth() -> None:
    outcomes = await asyncio.gather(*(one_call(n, *spec) for n, spec in enumerate(CALLS)))
    ttfs_err: list[float] = []
    stop_err: list[float] = []
    for spec, o in zip(CALLS, outcomes, strict=True):
        truths = turn_truths(o.record, o.log)
        responses = [t for t in o.receipt.turns if t.kind == "response"]
        assert len(responses) == len(truths) == 4, (spec, o.receipt.turns, truths)
        assert o.receipt.terminal == "caller_closed" if spec[0] == "raw" else "completed"
        assert o.receipt.anomalies == {}
        for truth, turn in zip(truths, responses, strict=True):
            assert truth.ttfs_ns is not None and turn.ttfs_ms is not None, (spec, turn)
            ttfs_err.append(
                beyond_lag(turn.ttfs_ms - truth.ttfs_ns / NS_PER_MS, turn.ttfs_uncertainty_ms)
            )
            if truth.barge_in:
                assert turn.barge_in is not None, (spec, turn)
                assert turn.barge_in.outcome == "stopped"
                assert turn.barge_in.evidence == ("flush" if spec[2] == "flush" else "ceased")
                assert (
                    truth.stop_latency_ns is not None and turn.barge_in.stop_latency_ms is not None
                )
                stop_err.append(
                    beyond_lag(
                        turn.barge_in.stop_latency_ms - truth.stop_latency_ns / NS_PER_MS,
                        turn.barge_in.stop_uncertainty_ms,
                    )
                )
            else:
                assert turn.barge_in is None
    t = np.abs(np.array(ttfs_err))
    s = np.abs(np.array(stop_err))
    print(f"live ttfs |err| p95 {np.percentile(t, 95):.1f} max {t.max():.1f} ms (n={t.size})")
    print(f"live stop |err| p95 {np.percentile(s, 95):.1f} max {s.max():.1f} ms (n={s.size})")
    # Looser than the fake-clock bounds: real scheduling jitter on both legs.
    assert np.percentile(t, 95) <= 30.0 and t.max() <= 60.0
    assert np.percentile(s, 95) <= 30.0 and s.max() <= 60.0


def _texts(messages: list[tuple[bool, bytes | str]]) -> list[bytes | str]:
    return [m for _is_text, m in messages]


async def test_the_agent_and_the_caller_see_the_same_bytes_with_and_without_the_proxy() -> None:
    runs = await asyncio.gather(
        *(
            one_call(0, dialect, "burst", "flush", 800.0, via_proxy=via, steps=SHORT)
            for dialect in ("raw", "twilio")
            for via in (False, True)
        )
    )
    for direct, proxied in (runs[0:2], runs[2:4]):
        for o in (direct, proxied):
            # What the caller sent is exactly what the agent received, in order ...
            assert _texts(o.log.caller_messages) == o.record.messages_sent
            # ... and what the agent sent is exactly what the caller received.
            assert _texts(o.log.sent_messages) == o.record.messages_received
            assert [type(m) for m in o.record.messages_sent] == [
                bytes if not is_text else str for is_text, _ in o.log.caller_messages
            ]
        # The two calls follow the same script; their wire shapes match.
        assert [type(m) for m in direct.record.messages_sent[:3]] == [
            type(m) for m in proxied.record.messages_sent[:3]
        ]
