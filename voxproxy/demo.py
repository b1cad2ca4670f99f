"""``voxproxy demo``: a mock agent, the proxy in front of it, scripted calls through both.

Everything runs in one process on loopback. Each call's receipt is printed as
a table next to the caller's own ground truth, so the proxy's figures can be
checked at a glance; receipts go to ``<out>/receipts.jsonl``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from voxproxy.fixtures import clip
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
from voxproxy.receipts.writer import ReceiptWriter
from voxproxy.report import receipt_table
from voxproxy.transports.websocket import RelayConfig

NS_PER_MS = 1_000_000


@dataclass(frozen=True, slots=True)
class DemoCall:
    title: str
    dialect: str
    send_mode: str
    barge_in: str
    delay_ms: float


DEMO_CALLS = (
    DemoCall("raw PCM, paced agent that flushes on barge-in", "raw", "paced", "flush", 700.0),
    DemoCall("Twilio, bursty agent that flushes on barge-in", "twilio", "burst", "flush", 900.0),
    DemoCall("Twilio, paced agent that never stops", "twilio", "paced", "never", 500.0),
)


def demo_script() -> list[Step]:
    return [
        Say(clip("caller_where_is_order")),
        WaitAgentEnd(),
        Say(clip("caller_topic_change")),
        BargeIn(after_ms=1200.0, clip=clip("caller_interrupt")),
        WaitAgentEnd(),
        Say(clip("caller_thanks")),
        WaitAgentEnd(),
    ]


async def run_one(
    call: DemoCall, n: int, writer: ReceiptWriter, console: Console
) -> tuple[Receipt | None, CallRecord, CallLog | None]:
    agent = MockAgent(
        MockAgentConfig(
            dialect=call.dialect,  # type: ignore[arg-type]
            send_mode=call.send_mode,  # type: ignore[arg-type]
            barge_in=call.barge_in,  # type: ignore[arg-type]
            delay_ms=call.delay_ms,
            seed=n,
        )
    )
    receipts: list[Receipt] = []
    await agent.start()
    proxy = Proxy(
        ProxyConfig(RelayConfig(agent.url), dialect="auto", secret=b"demo-secret"),
        sinks=[receipts.append, writer.write],
    )
    port = await proxy.start("127.0.0.1", 0)
    caller = ScriptedCaller(
        CallerConfig(
            url=f"ws://127.0.0.1:{port}/demo/{n}",
            dialect=call.dialect,  # type: ignore[arg-type]
            call_id=f"CA{n:032d}",
            seed=n,
        ),
        demo_script(),
    )
    record = await caller.run()
    deadline = time.monotonic() + 5
    while not receipts and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await proxy.stop()
    await agent.stop()
    log = agent.calls[0] if agent.calls else None
    return (receipts[0] if receipts else None), record, log


async def run_demo(out: str) -> int:
    console = Console(width=max(Console().width, 120))
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    writer = ReceiptWriter(out_dir / "receipts.jsonl")
    console.print(
        f"[bold]voxproxy demo[/]: {len(DEMO_CALLS)} calls, each through its own mock agent "
        "and proxy on loopback, run at once (about 30 s of real-time audio)…"
    )
    results = await asyncio.gather(
        *(run_one(call, n, writer, console) for n, call in enumerate(DEMO_CALLS))
    )
    writer.close()
    failures = 0
    for call, (receipt, record, log) in zip(DEMO_CALLS, results, strict=True):
        if receipt is None or record.error:
            failures += 1
            console.print(f"[red]{call.title}: no receipt ({record.error})[/]")
            continue
        console.print(receipt_table(receipt, title=call.title))
        if log is not None:
            t = Table(title="the caller's own ground truth", title_justify="left")
            t.add_column("caller utterance")
            t.add_column("true ttfs", justify="right")
            t.add_column("true stop latency", justify="right")
            for i, truth in enumerate(turn_truths(record, log)):
                t.add_row(
                    f"{i}: {truth.caller_clip}" + (" (barge-in)" if truth.barge_in else ""),
                    "—" if truth.ttfs_ns is None else f"{truth.ttfs_ns / NS_PER_MS:.1f} ms",
                    ""
                    if truth.stop_latency_ns is None
                    else f"{truth.stop_latency_ns / NS_PER_MS:.1f} ms",
                )
            console.print(t)
        console.print()
    console.print(f"receipts: {out_dir / 'receipts.jsonl'} ({writer.written} written)")
    return 1 if failures else 0
