"""Soak: memory, file descriptors and tasks stay flat over long calls and many calls.

Three phases, in this order:

1. ``core-long``: one call of ``--core-minutes`` (30) minutes of audio through the
   measurement core (a ``CallSession`` fed Twilio messages on a fake clock): a
   rendered four-turn conversation (``support.scripted``; one barge-in, marks, a
   clear) looped with its clock shifted, never closed until the end. RSS is sampled
   every simulated minute (after a full GC).
2. ``proxy``: ``--proxy-minutes`` (10) minutes of real time through a live proxy in
   this process (receipts appended to a file with fsync), ``--proxy-calls`` (4)
   concurrent callers each placing back-to-back calls of ``--call-seconds`` (60)
   against the mock agent (Twilio, with barge-ins); the callers and the agent run in
   a child process pinned away from this one when two CPUs exist. RSS of this
   process is sampled every ``--sample-s`` seconds.
3. ``core-short``: ``--short-calls`` (3000) short calls in sequence through the
   core, each a fresh session closed into a receipt that is serialized as the writer
   would. RSS is sampled every 250 calls.

Slopes come from ``numpy.polyfit`` over the samples after a warm-up (the first
fifth): KB per (simulated) minute for phases 1 and 2, KB per 1000 calls for phase 3.
Open file descriptors (``/proc/self/fd``) and ``asyncio.all_tasks()`` are counted
before the proxy starts taking calls and after its last call ended; the difference
is the leak. The last line is one JSON object with the slopes and the leak counts.

Run:  .venv/bin/python benchmarks/soak.py                      # about 12 minutes
      .venv/bin/python benchmarks/soak.py --quick              # about a minute
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # support.*: the helpers tests and benchmarks share

import benchkit  # noqa: E402
import record  # noqa: E402
from support.scripted import BargePlan, CallPlan, ScriptedCall, TurnPlan, render  # noqa: E402

from voxproxy.clips import load_clips  # noqa: E402
from voxproxy.core.dialects import make_decoder  # noqa: E402
from voxproxy.core.receipt import CloseInfo  # noqa: E402
from voxproxy.core.session import CallSession  # noqa: E402
from voxproxy.core.timebase import NS_PER_S  # noqa: E402
from voxproxy.harness.ports import free_port  # noqa: E402

PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
SECRET = b"soak-secret"


def rss_kb() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE_KB


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def fd_targets() -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # (the fd of the listing itself is gone)
            out.append(f"{fd}:{os.readlink(f'/proc/self/fd/{fd}')}")
    return sorted(out)


def slope(xs: list[float], ys: list[float], skip: float = 0.2) -> float:
    """Least-squares slope of ys over xs, after the first ``skip`` of the samples."""
    k = int(len(xs) * skip)
    x, y = np.array(xs[k:], dtype=float), np.array(ys[k:], dtype=float)
    if x.size < 3 or np.ptp(x) == 0:
        return float("nan")
    return float(np.polyfit(x, y, 1)[0])


def conversation(seed: int, turns: int = 4) -> ScriptedCall:
    """A Twilio conversation with known speech: turns, one barge-in with a flush, marks."""
    clips = load_clips()
    callers = ["caller_where_is_order", "caller_order_number", "caller_yes", "caller_thanks"]
    agents = ["agent_order_status", "agent_long_answer", "agent_confirm", "agent_hours"]
    rng = random.Random(seed)
    plan = []
    for i in range(turns):
        barge = BargePlan(1500.0, 250.0, "flush") if i == 1 else None
        plan.append(
            TurnPlan(clips[callers[i % 4]], clips[agents[i % 4]], rng.uniform(400, 1200), barge)
        )
    return render(CallPlan(dialect="twilio", send_mode="paced", turns=tuple(plan), seed=seed))


def _is_setup(payload: bytes | str) -> bool:
    return isinstance(payload, str) and (
        '"event": "start"' in payload
        or '"event": "connected"' in payload
        or '"event": "stop"' in payload
    )


# -- phase 1: one long call through the core ---------------------------------------------------


def core_long(minutes: float) -> dict[str, Any]:
    call = conversation(seed=1)
    cycle_ns = call.end_ns
    body = [(t, d, p) for t, d, p in call.messages if not _is_setup(p)]
    setup = [(t, d, p) for t, d, p in call.messages if _is_setup(p) and "stop" not in p]
    session = CallSession(make_decoder("twilio"), 0, secret=SECRET, link_id="soak-long")
    for t, d, p in setup:
        session.on_message(d, p, t)
    gc.collect()
    samples_min: list[float] = [0.0]
    samples_kb: list[float] = [rss_kb()]
    target_ns = int(minutes * 60 * NS_PER_S)
    offset = 0
    next_sample = 60 * NS_PER_S
    t_wall = time.monotonic()
    messages = 0
    while offset < target_ns:
        for t, d, p in body:
            session.on_message(d, p, offset + t)
            messages += 1
            if offset + t >= next_sample:
                gc.collect()
                samples_min.append(next_sample / 60 / NS_PER_S)
                samples_kb.append(rss_kb())
                next_sample += 60 * NS_PER_S
        offset += cycle_ns
    receipt = session.close(offset, "completed", CloseInfo(initiator="caller"))
    wall = time.monotonic() - t_wall
    audio_min = receipt.traffic.caller_audio_ms / 60_000
    out = {
        "audio_minutes": round(audio_min, 1),
        "messages": messages,
        "turns": receipt.summary.turns,
        "measurement_errors": receipt.anomalies.get("measurement_error", 0),
        "wall_s": round(wall, 1),
        "rss_start_kb": samples_kb[0],
        "rss_end_kb": samples_kb[-1],
        "rss_slope_kb_per_min": round(slope(samples_min, samples_kb), 2),
        "receipt_kb": round(len(receipt.to_json_line()) / 1024, 1),
        "rss_kb": samples_kb,
    }
    del session, receipt
    return out


# -- phase 3: many short calls through the core ------------------------------------------------


def core_short(calls: int) -> dict[str, Any]:
    call = conversation(seed=2, turns=1)
    every = 250
    xs: list[float] = []
    ys: list[float] = []
    t_wall = time.monotonic()
    fd0 = fds()
    for i in range(calls):
        session = CallSession(make_decoder("twilio"), 0, secret=SECRET, link_id=f"short{i}")
        for t, d, p in call.messages:
            session.on_message(d, p, t)
        receipt = session.close(call.end_ns, "completed", CloseInfo(initiator="caller"))
        line = receipt.to_json_line()
        assert line.endswith("\n")
        if i % every == 0 or i == calls - 1:
            gc.collect()
            xs.append(i / 1000)
            ys.append(rss_kb())
    return {
        "calls": calls,
        "audio_s_per_call": round(call.end_ns / NS_PER_S, 1),
        "wall_s": round(time.monotonic() - t_wall, 1),
        "rss_start_kb": ys[0],
        "rss_end_kb": ys[-1],
        "rss_slope_kb_per_1000_calls": round(slope(xs, ys), 2),
        "fd_leak": fds() - fd0,
        "rss_kb": ys,
    }


# -- phase 2: real time through the proxy ------------------------------------------------------


async def _callers(proxy_port: int, agent_port: int, calls: int, seconds: float, each_s: float):  # type: ignore[no-untyped-def]
    """The child process: the mock agent, and callers placing calls back to back."""
    from voxproxy.loadgen.caller import BargeIn, CallerConfig, Say, ScriptedCaller, WaitAgentEnd
    from voxproxy.mockagent import MockAgent, MockAgentConfig

    clips = load_clips()
    agent = MockAgent(
        MockAgentConfig(
            dialect="twilio",
            delay_ms=500.0,
            responses=("agent_order_status", "agent_confirm", "agent_hours"),
        )
    )
    await agent.start("127.0.0.1", agent_port)
    deadline = time.monotonic() + seconds
    placed = [0]
    failed = [0]

    async def caller(k: int) -> None:
        await asyncio.sleep(k * 0.7)
        n = 0
        while time.monotonic() + 5 < deadline:
            steps: list[Any] = []
            t_call = min(each_s, deadline - time.monotonic() - 2)
            # A turn is ~8 s; every other turn the caller barges in.
            for turn in range(max(1, int(t_call // 8))):
                if turn % 2:
                    steps.append(BargeIn(after_ms=800, clip=clips["caller_yes"]))
                else:
                    steps.append(Say(clips["caller_where_is_order"]))
                steps.append(WaitAgentEnd(quiet_ms=300))
            cid = f"CA{k:04d}{n:028d}"
            config = CallerConfig(
                url=f"ws://127.0.0.1:{proxy_port}/",
                dialect="twilio",
                call_id=cid,
                keep_messages=False,
                tail_ms=300,
            )
            record = await ScriptedCaller(config, steps).run()
            placed[0] += 1
            failed[0] += record.error is not None
            n += 1

    await asyncio.gather(*(caller(k) for k in range(calls)))
    await agent.stop()
    print(json.dumps({"placed": placed[0], "failed": failed[0]}), flush=True)


async def proxy_phase(minutes: float, calls: int, each_s: float, sample_s: float) -> dict[str, Any]:
    from voxproxy.proxy.websocket import Proxy, ProxyConfig
    from voxproxy.receipts.writer import ReceiptWriter, read_receipts
    from voxproxy.transports.websocket import RelayConfig

    tmp = Path(tempfile.mkdtemp(prefix="soak-"))
    agent_port, proxy_port = free_port(), free_port()
    writer = ReceiptWriter(tmp / "receipts.jsonl")
    proxy = Proxy(
        ProxyConfig(RelayConfig(f"ws://127.0.0.1:{agent_port}"), dialect="twilio", secret=SECRET),
        sinks=[writer.write],
    )
    await proxy.start("127.0.0.1", proxy_port)
    await asyncio.sleep(0.2)  # (the writer's thread opens its file)
    gc.collect()
    # Counted once listening: the listener and uvloop's reserve fd (libuv keeps /dev/null
    # open to survive EMFILE on accept) are there before and after.
    fd0, tasks0 = fds(), len(asyncio.all_tasks())
    targets0 = fd_targets()
    seconds = minutes * 60
    cmd = [sys.executable, __file__, "--callers", str(proxy_port), str(agent_port), str(calls)]
    cmd += ["--seconds", str(seconds), "--call-seconds", str(each_s)]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, cwd=ROOT, text=True)
    if (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {0})
        os.sched_setaffinity(child.pid, {1})
    t0 = time.monotonic()
    xs: list[float] = []
    ys: list[float] = []
    active: list[int] = []
    while child.poll() is None:
        gc.collect()
        xs.append((time.monotonic() - t0) / 60)
        ys.append(rss_kb())
        active.append(proxy.active)
        print(
            f"  proxy {xs[-1]:5.1f} min: RSS {ys[-1] / 1024:6.1f} MB, {proxy.active} active, "
            f"{proxy.calls} receipts",
            file=sys.stderr,
            flush=True,
        )
        deadline = time.monotonic() + sample_s
        while child.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
    out, _ = await asyncio.to_thread(child.communicate)
    load = json.loads(out.strip().splitlines()[-1])
    for _ in range(100):  # the last calls' receipts
        if proxy.active == 0:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)
    gc.collect()
    fd1, tasks1 = fds(), len(asyncio.all_tasks())
    new_fds = sorted(set(fd_targets()) - set(targets0))
    relays_left = len(proxy.server.relays)
    await proxy.stop()
    writer.close()
    receipts = list(read_receipts(tmp / "receipts.jsonl"))
    return {
        "minutes": round((time.monotonic() - t0) / 60, 2),
        "concurrent_calls": calls,
        "calls_placed": load["placed"],
        "calls_failed": load["failed"],
        "receipts": len(receipts),
        "receipts_with_measurement_errors": sum(
            1 for r in receipts if r.anomalies.get("measurement_error")
        ),
        "rss_start_kb": ys[0] if ys else None,
        "rss_end_kb": ys[-1] if ys else None,
        "rss_slope_kb_per_min": round(slope(xs, ys), 2),
        "fd_leak": fd1 - fd0,
        "new_fds": new_fds,
        "task_leak": tasks1 - tasks0,
        "relays_left": relays_left,
        "active_left": proxy.active,
        "rss_kb": ys,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--core-minutes", type=float, default=30.0)
    parser.add_argument("--proxy-minutes", type=float, default=10.0)
    parser.add_argument("--proxy-calls", type=int, default=4)
    parser.add_argument("--call-seconds", type=float, default=60.0)
    parser.add_argument("--sample-s", type=float, default=10.0)
    parser.add_argument("--short-calls", type=int, default=3000)
    parser.add_argument("--quick", action="store_true", help="30 s proxy, 300 short calls")
    parser.add_argument("--callers", nargs=3, type=int, metavar=("PROXY", "AGENT", "CALLS"))
    parser.add_argument("--seconds", type=float, default=60.0)
    record.add_flag(parser)
    args = parser.parse_args()
    if args.callers:
        import uvloop

        proxy_port, agent_port, calls = args.callers
        uvloop.run(_callers(proxy_port, agent_port, calls, args.seconds, args.call_seconds))
        return
    if args.quick:
        args.proxy_minutes, args.short_calls, args.sample_s = 0.5, 300, 3.0
        args.call_seconds = 20.0
    signal.signal(signal.SIGINT, signal.default_int_handler)

    print(f"core-long: {args.core_minutes:.0f} min of audio ...", file=sys.stderr, flush=True)
    long_ = core_long(args.core_minutes)
    print(f"proxy: {args.proxy_minutes} min real time ...", file=sys.stderr, flush=True)
    import uvloop

    proxy = uvloop.run(
        proxy_phase(args.proxy_minutes, args.proxy_calls, args.call_seconds, args.sample_s)
    )
    print(f"core-short: {args.short_calls} calls ...", file=sys.stderr, flush=True)
    short = core_short(args.short_calls)

    from rich.console import Console

    table = benchkit.figures_table(
        "soak: memory and leaks",
        ("phase", "length", "RSS start", "RSS end", "RSS slope", "fd leak", "task leak"),
    )
    table.add_row(
        "core, one long call",
        f"{long_['audio_minutes']} min audio, {long_['turns']} turns",
        f"{long_['rss_start_kb'] / 1024:.1f} MB",
        f"{long_['rss_end_kb'] / 1024:.1f} MB",
        f"{long_['rss_slope_kb_per_min']} KB/min",
        "",
        "",
    )
    table.add_row(
        "proxy, real time",
        f"{proxy['minutes']} min, {proxy['calls_placed']} calls",
        f"{(proxy['rss_start_kb'] or 0) / 1024:.1f} MB",
        f"{(proxy['rss_end_kb'] or 0) / 1024:.1f} MB",
        f"{proxy['rss_slope_kb_per_min']} KB/min",
        str(proxy["fd_leak"]),
        str(proxy["task_leak"]),
    )
    table.add_row(
        "core, short calls",
        f"{short['calls']} calls",
        f"{short['rss_start_kb'] / 1024:.1f} MB",
        f"{short['rss_end_kb'] / 1024:.1f} MB",
        f"{short['rss_slope_kb_per_1000_calls']} KB/1000 calls",
        str(short["fd_leak"]),
        "",
    )
    Console(width=150).print(table)
    for name, phase in (("core-long", long_), ("proxy", proxy), ("core-short", short)):
        print(f"{name} RSS samples (KB): {phase['rss_kb']}", file=sys.stderr)
    if proxy["new_fds"]:
        print(f"proxy: fds opened and not closed: {proxy['new_fds']}", file=sys.stderr)
    summary = {
        "core_long_audio_minutes": long_["audio_minutes"],
        "core_long_rss_slope_kb_per_min": long_["rss_slope_kb_per_min"],
        "core_long_measurement_errors": long_["measurement_errors"],
        "core_long_receipt_kb": long_["receipt_kb"],
        "proxy_minutes": proxy["minutes"],
        "proxy_calls": proxy["calls_placed"],
        "proxy_calls_failed": proxy["calls_failed"],
        "proxy_receipts": proxy["receipts"],
        "proxy_rss_slope_kb_per_min": proxy["rss_slope_kb_per_min"],
        "proxy_fd_leak": proxy["fd_leak"],
        "proxy_task_leak": proxy["task_leak"],
        "proxy_relays_left": proxy["relays_left"],
        "core_short_calls": short["calls"],
        "core_short_rss_slope_kb_per_1000_calls": short["rss_slope_kb_per_1000_calls"],
        "core_short_fd_leak": short["fd_leak"],
    }
    record.finish("soak", summary, args)


if __name__ == "__main__":
    main()
