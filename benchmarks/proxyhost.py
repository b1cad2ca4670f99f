"""voxproxy in its own process for the accuracy benchmark, and a CPU hog to contend with it.

Run as a script, this is the child: one :class:`~voxproxy.proxy.Proxy` per upstream
agent URL on 127.0.0.1, optionally pinned to one CPU, each receipt written to stdout as
one line (``R <receipt json>``), until its stdin closes (or ``--max-seconds`` pass);
then it drains, prints ``END <stats json>`` and exits. :class:`SubprocessProxyHost` is
the parent's side (a :class:`voxproxy.harness.bench.ProxyHost`), :class:`CpuHog` a
busy loop pinned to a CPU that stops by itself when its parent goes away.

Child:  python benchmarks/proxyhost.py --upstream ws://127.0.0.1:PORT [--cpu 0]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import resource
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pydantic import ValidationError  # noqa: E402

from voxproxy.core.receipt import Receipt  # noqa: E402
from voxproxy.core.session import SessionConfig  # noqa: E402
from voxproxy.proxy.server import ProxyServer, ServeConfig, run_loop  # noqa: E402
from voxproxy.proxy.websocket import ProxyConfig  # noqa: E402
from voxproxy.receipts.policy import load_policy  # noqa: E402
from voxproxy.transports.websocket import RelayConfig  # noqa: E402

HERE = Path(__file__).resolve()


# -- the child ------------------------------------------------------------------------------


async def _serve(args: argparse.Namespace) -> None:
    policy = load_policy()
    out = sys.stdout

    def write(receipt: Receipt) -> None:
        out.write("R " + receipt.model_dump_json() + "\n")
        out.flush()

    session = SessionConfig(max_uncertainty_ms=args.max_uncertainty_ms)
    servers = [
        ProxyServer(
            ServeConfig(
                ProxyConfig(RelayConfig(url), secret=bytes.fromhex(args.secret), session=session),
                listen=("127.0.0.1", 0),
                receipts=None,
                policy=policy,
                sinks=(write,),
                drain_timeout_s=2.0,
            )
        )
        for url in args.upstream
    ]
    ports = [await s.start() for s in servers]
    gc.freeze()  # as the CLI does once it is up
    out.write("PORTS " + json.dumps(ports) + "\n")
    out.flush()
    loop = asyncio.get_running_loop()
    eof: asyncio.Future[None] = loop.create_future()

    def wait_eof() -> None:  # the parent closes our stdin when it is done (or gone)
        sys.stdin.buffer.read()
        loop.call_soon_threadsafe(lambda: eof.done() or eof.set_result(None))

    threading.Thread(target=wait_eof, daemon=True).start()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(eof, args.max_seconds)
    for s in servers:
        await s.stop()
    proxies = [s.proxy for s in servers if s.proxy is not None]
    usage = resource.getrusage(resource.RUSAGE_SELF)
    stats = {
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "loop_lag_ms_max": round(max(p.clock_lag.max_lag_ns for p in proxies) / 1e6, 1),
        "calls": sum(p.calls for p in proxies),
    }
    out.write("END " + json.dumps(stats) + "\n")
    out.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description="voxproxy for the accuracy benchmark")
    parser.add_argument("--upstream", action="append", required=True, help="agent ws:// URL")
    parser.add_argument("--secret", required=True, help="call-id secret, hex")
    parser.add_argument("--cpu", type=int, default=None, help="pin to this CPU")
    parser.add_argument("--max-uncertainty-ms", type=float, default=50.0)
    parser.add_argument("--max-seconds", type=float, default=1800.0, help="stop by itself")
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    run_loop(_serve(args))


# -- the parent's side ----------------------------------------------------------------------


def parse_receipt(text: str) -> Receipt | None:
    """A receipt the child wrote; fields this process's model does not know are dropped
    (the child imports the package afresh, and the tree may have moved on meanwhile)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    for _ in range(20):
        try:
            return Receipt.model_validate(data)
        except ValidationError as exc:
            extra = [e["loc"] for e in exc.errors() if e["type"] == "extra_forbidden"]
            if not extra:
                return None
            for loc in extra:
                node: Any = data
                for key in loc[:-1]:
                    node = node[key]
                node.pop(loc[-1], None)
    return None


class SubprocessProxyHost:
    """Proxies in a child process (a :class:`voxproxy.harness.bench.ProxyHost`)."""

    def __init__(
        self,
        *,
        cpu: int | None = None,
        max_uncertainty_ms: float = 50.0,
        max_seconds: float = 1800.0,
    ) -> None:
        self.cpu = cpu
        self.max_uncertainty_ms = max_uncertainty_ms
        self.max_seconds = max_seconds
        self.pid: int | None = None
        self.stats: dict[str, Any] = {}
        self.unreadable = 0  # receipts this process's model could not read
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ports: asyncio.Future[list[int]] | None = None
        self._receipts: dict[str, Receipt] = {}
        self._log: IO[bytes] | None = None  # the child's stderr, shown if it fails

    async def start(self, upstreams: Sequence[str], secret: bytes) -> list[str]:
        cmd = [sys.executable, str(HERE), "--secret", secret.hex()]
        cmd += ["--max-uncertainty-ms", str(self.max_uncertainty_ms)]
        cmd += ["--max-seconds", str(self.max_seconds)]
        if self.cpu is not None:
            cmd += ["--cpu", str(self.cpu)]
        for url in upstreams:
            cmd += ["--upstream", url]
        self._log = tempfile.TemporaryFile()
        self._proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=self._log,
            limit=64 * 1024 * 1024,
        )
        self.pid = self._proc.pid
        self._ports = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read())
        try:
            ports = await asyncio.wait_for(asyncio.shield(self._ports), 60)
        except (TimeoutError, RuntimeError) as exc:
            raise RuntimeError(f"the proxy process did not start: {self.stderr_tail()}") from exc
        return [f"ws://127.0.0.1:{p}" for p in ports]

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        async for raw in self._proc.stdout:
            line = raw.decode()
            kind, _, body = line.partition(" ")
            if kind == "R":
                receipt = parse_receipt(body)
                if receipt is None:
                    self.unreadable += 1
                else:
                    self._receipts[receipt.call] = receipt
            elif kind == "PORTS" and self._ports is not None and not self._ports.done():
                self._ports.set_result(json.loads(body))
            elif kind == "END":
                self.stats = json.loads(body)
        if self._ports is not None and not self._ports.done():
            self._ports.set_exception(RuntimeError("the proxy process exited"))

    def stderr_tail(self, n: int = 2000) -> str:
        if self._log is None or self._log.closed:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-n:]

    def cpu_seconds(self) -> float | None:
        """The child's user+system CPU so far (Linux /proc), None once it is gone."""
        if self.pid is None:
            return None
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def stop(self) -> Mapping[str, Receipt]:
        proc = self._proc
        if proc is None:
            return {}
        self._proc = None
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            if self._reader is not None:
                await asyncio.wait_for(self._reader, 60)
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        finally:
            if self._log is not None:
                self._log.close()
        return dict(self._receipts)


_HOG = """
import os, sys, time
cpu, duty, limit = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
if cpu >= 0:
    os.sched_setaffinity(0, {cpu})
parent, end, period = os.getppid(), time.monotonic() + limit, 0.01
while time.monotonic() < end and os.getppid() == parent:
    t = time.monotonic()
    while time.monotonic() - t < period * duty:
        pass
    if duty < 1.0:
        time.sleep(period * (1.0 - duty))
"""


class CpuHog:
    """A busy loop pinned to ``cpu`` (None: free to run on any), busy ``duty`` of every
    10 ms. It stops when told, when its parent exits, or after ``max_seconds``."""

    def __init__(self, cpu: int | None, duty: float = 1.0, max_seconds: float = 1800.0) -> None:
        self.cpu = cpu
        self.duty = min(1.0, max(0.0, duty))
        self.max_seconds = max_seconds
        self._proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        cpu = -1 if self.cpu is None else self.cpu
        args = [str(cpu), str(self.duty), str(self.max_seconds)]
        self._proc = await asyncio.create_subprocess_exec(sys.executable, "-c", _HOG, *args)

    async def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.returncode is None:
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            proc.kill()
            await proc.wait()


def cpu_times(cpu: int) -> tuple[int, int] | None:
    """(busy, total) jiffies of one CPU since boot (Linux /proc/stat), None elsewhere."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, *values = line.split()
        if name == f"cpu{cpu}":
            v = [int(x) for x in values]
            idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
            return sum(v[:8]) - idle, sum(v[:8])
    return None


if __name__ == "__main__":
    main()
