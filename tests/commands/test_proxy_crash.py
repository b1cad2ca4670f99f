"""The proxy as a process, killed or starved: ``kill -9`` loses no receipt (the call
journal), and running out of file descriptors is logged."""

from __future__ import annotations

import asyncio
import json
import re
import resource
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from support.child import clean_env, proxy_command
from support.faultkit import SECRET, ULAW_SILENCE, call_hash, call_sid, router_agent, twilio_start
from support.waiting import wait_until
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection

from voxproxy.core.dialects.twilio import TwilioCallerWire
from voxproxy.receipts.journal import journal_path
from voxproxy.receipts.writer import read_receipts


@contextmanager
def proxy_process(
    upstream: str, receipts: Path, log: Path, *extra: str, fd_limit: int | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    cmd = proxy_command("--upstream", upstream, "--dialect", "twilio", "--secret", SECRET.decode())
    cmd += ["--receipts", str(receipts), "--drain-timeout", "0", *extra]

    def limit() -> None:
        if fd_limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))

    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd, env=clean_env("OTEL_"), stdout=out, stderr=out, preexec_fn=limit
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def last_alive_ns(journal: Path) -> int:
    """The journal's last sign of life (wall clock), 0 before the first."""
    alive = [0]
    for line in journal.read_text().splitlines():
        with suppress(ValueError):  # a line still being written
            rec = json.loads(line)
            if isinstance(rec, dict) and isinstance(rec.get("alive"), int):
                alive.append(rec["alive"])
    return max(alive)


def listening_port(log: Path, after: int = 0) -> int | None:
    found = re.findall(r"listening on ws://127\.0\.0\.1:(\d+)", log.read_text()[after:])
    return int(found[-1]) if found else None


def receipts_in(path: Path) -> list[object]:
    return list(read_receipts(path)) if path.exists() else []


@pytest.mark.slow
async def test_kill_9_loses_no_receipt(tmp_path: Path) -> None:
    receipts, log = tmp_path / "r.jsonl", tmp_path / "proxy.log"
    journal = journal_path(receipts)

    async def silent(ws: ServerConnection) -> None:
        await ws.wait_closed()

    async with router_agent(silent=silent) as agent:
        with proxy_process(agent.url, receipts, log) as proc:
            await wait_until(lambda: listening_port(log) is not None, 15.0)
            port = listening_port(log)
            done, live = call_sid("finished"), call_sid("inflight")
            # One call ends before the crash: its receipt is written once, not twice.
            wire = TwilioCallerWire("MZ" + done[2:], done)
            async with connect(f"ws://127.0.0.1:{port}/echo/done") as ws:
                await ws.send(wire.start())
                await ws.send(wire.media(ULAW_SILENCE))
                await ws.recv()
                await ws.send(wire.stop())
            await wait_until(lambda: len(receipts_in(receipts)) == 1, 15.0)
            # Two calls in progress: one named by the wire, one that never said a word.
            named = await connect(f"ws://127.0.0.1:{port}/echo/inflight")
            await named.send(twilio_start(live))
            await named.send(TwilioCallerWire("MZ" + live[2:], live).media(ULAW_SILENCE))
            await named.recv()
            mute = await connect(f"ws://127.0.0.1:{port}/silent/mute")
            await wait_until(
                lambda: journal.exists() and call_hash(live) in journal.read_text(), 15.0
            )
            await wait_until(lambda: journal.read_text().count('"open"') == 3, 15.0)
            # A sign of life journalled after both calls opened (one every 2 s).
            opened_ns = time.time_ns()
            await wait_until(lambda: last_alive_ns(journal) >= opened_ns, 15.0, "a sign of life")
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            for ws in (named, mute):
                ws.transport.abort()
        assert [r.terminal for r in receipts_in(receipts)] == ["completed"]  # type: ignore[attr-defined]
        start = len(log.read_text())
        with proxy_process(agent.url, receipts, log) as proc:
            await wait_until(lambda: len(receipts_in(receipts)) == 3, 15.0)
            await wait_until(lambda: listening_port(log, start) is not None, 15.0)
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
    got = list(read_receipts(receipts))
    assert [r.terminal for r in got] == ["completed", "proxy_crashed", "proxy_crashed"]
    crashed = {r.call_id_source: r for r in got[1:]}
    named_r, mute_r = crashed["wire"], crashed["proxy"]
    assert named_r.call == call_hash(live) and named_r.dialect == "twilio"
    assert named_r.upstream_connect_ms is not None and named_r.close.upstream_status == 101
    assert named_r.duration_ms > 0.0  # up to its last sign of life (journalled every 2 s)
    assert named_r.verdict is not None and named_r.policy is not None
    assert mute_r.call.startswith("c_") and mute_r.call != named_r.call
    assert not journal.exists()  # all written: the clean stop removed it
    assert "2 call(s) were in progress when the last proxy stopped" in log.read_text()


@pytest.mark.slow
async def test_running_out_of_file_descriptors_is_logged(tmp_path: Path) -> None:
    receipts, log = tmp_path / "r.jsonl", tmp_path / "proxy.log"
    async with router_agent() as agent:
        with proxy_process(
            agent.url, receipts, log, "--handshake-timeout", "30", fd_limit=64
        ) as proc:
            await wait_until(lambda: listening_port(log) is not None, 15.0)
            port = listening_port(log)
            held = []
            for _ in range(100):  # more connections than descriptors (none sends a request)
                with suppress(OSError):
                    held.append(await asyncio.open_connection("127.0.0.1", port))
            await wait_until(lambda: "out of file descriptors" in log.read_text(), 15.0)
            for _, w in held:
                w.transport.abort()
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
    text = log.read_text()
    assert "raise the limit (ulimit -n) or lower --max-calls" in text
