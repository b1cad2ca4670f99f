"""Memory of a ``voxproxy proxy`` process under bursting agents and under ordinary calls
(issue 14, item 5), on loopback.

One proxy process (``--dialect twilio``, receipts to a file) in front of an agent
that runs in this process, and the resident memory (VmRSS) of the proxy from
/proc, sampled every 50 ms:

- ``burst``: ``--burst-calls`` (3) calls, one after the other, to an agent that
  answers the caller's ``start`` with ``--burst-minutes`` (90) minutes of audio in
  1 s Twilio media messages, sent as fast as the sockets take them (an agent far
  ahead of real time: before the playout queue was bounded, each such call held
  all of it as samples, ~86 MB, and kept it after the call until the cyclic
  garbage collector ran). The caller reads everything, sends 20 ms frames in real
  time meanwhile, then ``stop``.
- ``normal``: ``--normal-calls`` (100) ordinary calls, ``--concurrency`` (10) at a
  time: each sends ``--normal-seconds`` (2) s of 20 ms frames in real time to an
  agent that echoes them.

Reported per phase: RSS before, at its peak, and after its last call's receipt
is written (plus 1 s). ``PYTHONPATH`` passes to the proxy, so another checkout's
``voxproxy`` can be measured the same way, e.g. the code before the fix (run from
outside the checkout: ``python -m`` puts the working directory first on the path)::

    git archive <commit> voxproxy | tar -x -C /tmp/old
    cd /tmp && PYTHONPATH=/tmp/old /path/to/checkout/.venv/bin/python \
        /path/to/checkout/benchmarks/memory.py

Usage: ``.venv/bin/python benchmarks/memory.py [--burst-calls 3] [--normal-calls 100]``
(about a minute). The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import record
from hostile import proc_status, start_proxy
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from voxproxy.core.dialects.twilio import TwilioAgentWire, TwilioCallerWire

SILENCE_20MS = b"\xff" * 160  # 20 ms of 8 kHz mu-law silence
SECOND = bytes(range(256)) * 31 + bytes(64)  # 1 s of 8 kHz mu-law (not silence)


class Sampler:
    """The proxy's VmRSS, sampled in the background: the peak since the last reset."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kb = 0
        self._task: asyncio.Task[None] | None = None

    def now_kb(self) -> int:
        return proc_status(self.pid)["VmRSS"]

    def reset(self) -> int:
        self.peak_kb = self.now_kb()
        return self.peak_kb

    async def _run(self) -> None:
        while True:
            self.peak_kb = max(self.peak_kb, self.now_kb())
            await asyncio.sleep(0.05)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


@contextlib.asynccontextmanager
async def agent(burst_s: int) -> AsyncIterator[int]:
    """``/burst/...``: after the caller's start, ``burst_s`` 1 s media messages at once;
    ``/echo/...``: every media message back."""

    async def handler(ws: ServerConnection) -> None:
        assert ws.request is not None
        with contextlib.suppress(ConnectionClosed):
            if ws.request.path.startswith("/burst"):
                stream = ""
                async for m in ws:
                    if isinstance(m, str) and '"start"' in m:
                        stream = json.loads(m).get("streamSid", "")
                        break
                wire = TwilioAgentWire(stream)
                message = wire.media(SECOND)
                for _ in range(burst_s):
                    await ws.send(message)
                await ws.send(wire.mark("end-of-burst"))
                await ws.wait_closed()
            else:
                async for m in ws:
                    if isinstance(m, str) and '"media"' in m:
                        await ws.send(m)

    async with serve(
        handler, "127.0.0.1", 0, compression=None, max_size=None, ping_interval=None
    ) as server:
        yield next(iter(server.sockets)).getsockname()[1]


def receipts_written(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text().splitlines() if line.strip())


async def wait_receipts(path: Path, n: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while receipts_written(path) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{receipts_written(path)} of {n} receipts written")
        await asyncio.sleep(0.05)


async def bursting_call(port: int, name: str) -> int:
    """A call whose agent bursts; returns how many agent messages the caller read."""
    sid = "CA" + name.encode().hex().ljust(32, "0")[:32]
    wire = TwilioCallerWire("MZ" + sid[2:], sid)
    got = 0
    async with connect(
        f"ws://127.0.0.1:{port}/burst/{name}", compression=None, max_size=None
    ) as ws:
        await ws.send(wire.connected())
        await ws.send(wire.start())
        done = asyncio.Event()

        async def read() -> None:
            nonlocal got
            async for m in ws:
                got += 1
                if isinstance(m, str) and '"mark"' in m:
                    done.set()
                    return

        reader = asyncio.create_task(read())
        while not done.is_set() and not reader.done():  # real-time frames meanwhile
            await ws.send(wire.media(SILENCE_20MS))
            await asyncio.sleep(0.02)
        await reader
        await ws.send(wire.stop())
    return got


async def normal_call(port: int, name: str, seconds: float) -> None:
    sid = "CA" + name.encode().hex().ljust(32, "0")[:32]
    wire = TwilioCallerWire("MZ" + sid[2:], sid)
    async with connect(f"ws://127.0.0.1:{port}/echo/{name}", compression=None) as ws:
        await ws.send(wire.connected())
        await ws.send(wire.start())
        for _ in range(int(seconds * 50)):
            await ws.send(wire.media(SILENCE_20MS))
            await ws.recv()
            await asyncio.sleep(0.02)
        await ws.send(wire.stop())


async def run(args: argparse.Namespace) -> dict[str, Any]:
    burst_s = int(args.burst_minutes * 60)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        async with agent(burst_s) as agent_port:
            flags = ["--upstream", f"ws://127.0.0.1:{agent_port}", "--dialect", "twilio"]
            proc, port = start_proxy(flags, tmp / "memory.log")
            receipts = tmp / "memory.jsonl"
            sampler = Sampler(proc.pid)
            try:
                await asyncio.sleep(0.5)
                start_kb = sampler.reset()
                sampler.start()
                read = [await bursting_call(port, f"burst{i}") for i in range(args.burst_calls)]
                await wait_receipts(receipts, args.burst_calls)
                await asyncio.sleep(1.0)
                burst = {
                    "calls": args.burst_calls,
                    "agent_audio_min_per_call": args.burst_minutes,
                    "agent_messages_read": read,
                    "rss_before_kb": start_kb,
                    "rss_peak_kb": sampler.peak_kb,
                    "rss_after_kb": sampler.now_kb(),
                }
                before_kb = sampler.reset()
                gate = asyncio.Semaphore(args.concurrency)

                async def one(i: int) -> None:
                    async with gate:
                        await normal_call(port, f"normal{i}", args.normal_seconds)

                await asyncio.gather(*(one(i) for i in range(args.normal_calls)))
                await wait_receipts(receipts, args.burst_calls + args.normal_calls)
                await asyncio.sleep(1.0)
                normal = {
                    "calls": args.normal_calls,
                    "concurrency": args.concurrency,
                    "seconds_per_call": args.normal_seconds,
                    "rss_before_kb": before_kb,
                    "rss_peak_kb": sampler.peak_kb,
                    "rss_after_kb": sampler.now_kb(),
                }
                lines = receipts.read_text().splitlines()
                anomalies = [json.loads(line)["anomalies"] for line in lines[: args.burst_calls]]
            finally:
                await sampler.stop()
                proc.terminate()
                proc.wait(20)
    return {
        "rss_start_kb": start_kb,
        "burst": burst,
        "burst_receipt_anomalies": anomalies,
        "normal": normal,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--burst-calls", type=int, default=3)
    parser.add_argument("--burst-minutes", type=float, default=90.0)
    parser.add_argument("--normal-calls", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--normal-seconds", type=float, default=2.0)
    record.add_flag(parser)
    args = parser.parse_args()
    result = asyncio.run(run(args))
    mb = 1024.0
    print(f"voxproxy proxy RSS (MB), started at {result['rss_start_kb'] / mb:.1f}")
    print(f"{'phase':<48} {'before':>8} {'peak':>8} {'after':>8}")
    for key, label in (
        ("burst", f"{args.burst_calls} bursting calls ({args.burst_minutes:g} min of audio each)"),
        ("normal", f"{args.normal_calls} normal calls ({args.concurrency} at a time)"),
    ):
        p = result[key]
        print(
            f"{label:<48} {p['rss_before_kb'] / mb:>8.1f} {p['rss_peak_kb'] / mb:>8.1f}"
            f" {p['rss_after_kb'] / mb:>8.1f}"
        )
    print(f"bursting calls' anomalies: {result['burst_receipt_anomalies']}")
    record.finish("memory", result, args)


if __name__ == "__main__":
    main()
