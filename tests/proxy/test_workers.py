"""``voxproxy proxy --workers N``: one port, one receipts file, one /metrics, one event API.

The multi-process test runs the real command on loopback; which worker holds a call
is read from /proc (the worker whose socket is the one the agent sees the call from).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.child import logged_child, proxy_command, terminated
from support.faultkit import ULAW_SILENCE, call_hash, call_sid, echo_media, router_agent
from support.waiting import wait_until
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection

from voxproxy.cli import build_parser
from voxproxy.commands.proxy import serve_config
from voxproxy.core.dialects.twilio import TwilioCallerWire
from voxproxy.proxy.journals import worker_journal
from voxproxy.proxy.workers import cgroup_cpu_quota, default_workers
from voxproxy.receipts.journal import journal_path
from voxproxy.receipts.writer import read_receipts

TOKEN = "workers-test-token-0123456789"
CALLS = 16


def _socket_owner(local_port: int, pids: list[int]) -> int | None:
    """The process among ``pids`` holding the TCP socket bound to ``local_port``."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in fh.readlines()[1:]:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == local_port:
                    inodes.add(fields[9])
    for pid in pids:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in inodes:
                return pid
    return None


def _logged(log: Path, pattern: str) -> re.Match[str] | None:
    return re.search(pattern, log.read_text(errors="replace"))


def _start_proxy(
    log: Path, upstream: str, receipts: Path, port: int = 0, workers: int = 2
) -> subprocess.Popen[bytes]:
    listen = f"127.0.0.1:{port}"
    cmd = proxy_command(
        "--upstream", upstream, "--dialect", "twilio", listen=listen, workers=workers
    )
    cmd += ["--secret", "fault-secret", "--receipts", str(receipts), "--drain-timeout", "5"]
    cmd += ["--metrics-listen", "127.0.0.1:0"]
    cmd += ["--events-token", TOKEN, "--events-listen", "127.0.0.1:0"]
    return logged_child(cmd, log)


async def _started(log: Path) -> tuple[int, list[int]]:
    """The port the workers share and their pids, once the parent says they listen."""
    await wait_until(lambda: _logged(log, r"listening on ws://") is not None, 60)
    started = _logged(log, r"listening on ws://127\.0\.0\.1:(\d+).*pids (\d+), (\d+)")
    assert started is not None, log.read_text()
    return int(started[1]), [int(started[2]), int(started[3])]


@pytest.mark.slow
async def test_two_workers_serve_one_port_one_receipts_file_one_metrics_one_event_api(
    tmp_path: Path,
) -> None:
    receipts = tmp_path / "receipts.jsonl"
    log = tmp_path / "proxy.log"
    peers: dict[str, int] = {}  # call name -> the proxy's port toward the agent

    async def record(ws: ServerConnection) -> None:
        assert ws.request is not None
        peers[ws.request.path.rsplit("/", 1)[-1]] = ws.remote_address[1]
        await echo_media(ws)

    async with router_agent(record=record) as agent:
        proc = _start_proxy(log, agent.url, receipts)
        try:
            port, pids = await _started(log)
            metrics = _logged(log, r"metrics on http://127\.0\.0\.1:(\d+)/metrics \(merged")
            events = _logged(log, r"event API on http://127\.0\.0\.1:(\d+)/v1\S+ \(forwarded")
            assert metrics is not None and events is not None, log.read_text()
            owners: dict[str, int | None] = {}
            accepted: dict[str, int] = {}

            async def call(name: str, http: aiohttp.ClientSession) -> None:
                sid = call_sid(name)
                wire = TwilioCallerWire("MZ" + sid[2:], sid)
                async with connect(
                    f"ws://127.0.0.1:{port}/record/{name}", compression=None, open_timeout=10
                ) as ws:
                    await ws.send(wire.connected())
                    await ws.send(wire.start())
                    await ws.send(wire.media(ULAW_SILENCE))
                    await asyncio.wait_for(ws.recv(), 10)  # echoed: the call is through
                    owners[name] = _socket_owner(peers[name], pids)
                    url = f"http://127.0.0.1:{events[1]}/v1/calls/{sid}/events"
                    body = {"type": "tool.started", "operation_id": f"op-{name}", "tool": "t"}
                    auth = {"Authorization": f"Bearer {TOKEN}"}
                    async with http.post(url, json=body, headers=auth) as answer:
                        accepted[name] = answer.status
                    await ws.send(wire.media(ULAW_SILENCE))
                    await asyncio.wait_for(ws.recv(), 10)
                    await ws.send(wire.stop())

            names = [f"w{i:02d}" for i in range(CALLS)]
            async with aiohttp.ClientSession() as http:
                await asyncio.gather(*(call(n, http) for n in names))
                await wait_until(lambda: len(list(read_receipts(receipts))) >= CALLS, 30)
                async with http.get(f"http://127.0.0.1:{metrics[1]}/metrics") as answer:
                    exposition = await answer.text()
                unknown = f"http://127.0.0.1:{events[1]}/v1/calls/CA-nobody/events"
                body = {"type": "tool.started", "operation_id": "op", "tool": "t"}
                auth = {"Authorization": f"Bearer {TOKEN}"}
                async with http.post(unknown, json=body, headers=auth) as answer:
                    assert answer.status == 404  # no worker holds it
                async with http.post(unknown, json=body) as answer:
                    assert answer.status == 401  # the workers check the token
        finally:
            code = terminated(proc)
    assert code == 0, log.read_text()
    # The calls landed on both workers.
    assert set(owners.values()) == set(pids), owners
    # One receipts file, every call in it exactly once, with the event posted for it.
    written = list(read_receipts(receipts))
    assert sorted(r.call for r in written) == sorted(call_hash(call_sid(n)) for n in names)
    assert accepted == dict.fromkeys(names, 202)
    for r in written:
        assert [e.kind for e in r.events] == ["tool.started"], r.call
    # One /metrics view: every call counted once.
    totals = {
        f.name: sum(s.value for s in f.samples if s.name.endswith("_total"))
        for f in text_string_to_metric_families(exposition)
    }
    assert totals["voxproxy_calls"] == CALLS
    assert not journal_path(receipts).exists()
    assert not worker_journal(receipts, 1).exists()


def test_workers_default_to_the_cpus_available_and_webrtc_to_one() -> None:
    args = build_parser().parse_args(["proxy", "--upstream", "ws://a"])
    assert serve_config(args).workers == default_workers()
    # The CPUs this process may run on, bounded by the cgroup's quota when it has one.
    expected = len(os.sched_getaffinity(0))
    quota = cgroup_cpu_quota()
    assert default_workers() == (expected if quota is None else min(expected, quota))
    args = build_parser().parse_args(["proxy", "--upstream", "ws://a", "--workers", "1"])
    assert serve_config(args).workers == 1
    webrtc = ["proxy", "--transport", "webrtc", "--upstream", "http://a"]
    assert serve_config(build_parser().parse_args(webrtc)).workers == 1
    from voxproxy.core.errors import ConfigError

    with pytest.raises(ConfigError, match="one process"):
        serve_config(build_parser().parse_args([*webrtc, "--workers", "2"]))


def test_the_default_is_the_allowed_cpus_within_the_quota(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import voxproxy.proxy.workers as workers

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    monkeypatch.setattr(workers, "cgroup_cpu_quota", lambda: None)
    assert default_workers() == 4
    monkeypatch.setattr(workers, "cgroup_cpu_quota", lambda: 2)
    assert default_workers() == 2
    monkeypatch.setattr(workers, "cgroup_cpu_quota", lambda: 8)
    assert default_workers() == 4


def test_the_cgroup_cpu_quota_bounds_the_default(tmp_path: Path) -> None:
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("max 100000\n")
    assert cgroup_cpu_quota(str(cpu_max)) is None
    cpu_max.write_text("150000 100000\n")
    assert cgroup_cpu_quota(str(cpu_max)) == 2  # 1.5 CPUs: rounded up
    cpu_max.write_text("50000 100000\n")
    assert cgroup_cpu_quota(str(cpu_max)) == 1
    assert cgroup_cpu_quota(str(tmp_path / "absent")) is None


@pytest.mark.slow
async def test_sigterm_lets_every_worker_s_calls_finish(tmp_path: Path) -> None:
    receipts = tmp_path / "receipts.jsonl"
    log = tmp_path / "proxy.log"
    async with router_agent() as agent:
        proc = _start_proxy(log, agent.url, receipts)
        try:
            port, _pids = await _started(log)
            names = [f"d{i:02d}" for i in range(8)]
            wires = {n: TwilioCallerWire("MZ" + call_sid(n)[2:], call_sid(n)) for n in names}
            calls = {}
            for n in names:
                ws = await connect(f"ws://127.0.0.1:{port}/echo/{n}", compression=None)
                await ws.send(wires[n].connected())
                await ws.send(wires[n].start())
                await ws.send(wires[n].media(ULAW_SILENCE))
                await asyncio.wait_for(ws.recv(), 10)
                calls[n] = ws
            proc.send_signal(signal.SIGTERM)
            await wait_until(lambda: _logged(log, r"worker 1: shutting down") is not None, 10)
            await wait_until(lambda: _logged(log, r"worker 0: shutting down") is not None, 10)
            # Draining: every call, whichever worker holds it, still goes through, then ends.
            for n, ws in calls.items():
                await ws.send(wires[n].media(ULAW_SILENCE))
                await asyncio.wait_for(ws.recv(), 10)
                await ws.send(wires[n].stop())
                await ws.close()
            code = await asyncio.to_thread(proc.wait, 30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert code == 0, log.read_text()
    written = list(read_receipts(receipts))
    assert sorted(r.call for r in written) == sorted(call_hash(call_sid(n)) for n in names)
    assert {r.terminal for r in written} == {"completed"}


@pytest.mark.slow
@pytest.mark.parametrize("workers", [2, 1])
async def test_a_second_proxy_on_a_port_a_voxproxy_serves_refuses_to_start(
    tmp_path: Path, workers: int
) -> None:
    """Issue 35 item 10: a second ``voxproxy proxy`` (with workers, SO_REUSEPORT) on the
    port a voxproxy with workers serves started silently and took half the callers."""
    async with router_agent() as agent:
        first = _start_proxy(tmp_path / "first.log", agent.url, tmp_path / "first.jsonl")
        try:
            port, _pids = await _started(tmp_path / "first.log")
            second_log = tmp_path / "second.log"
            second = _start_proxy(
                second_log, agent.url, tmp_path / "second.jsonl", port=port, workers=workers
            )
            try:
                code = await asyncio.to_thread(second.wait, 60)
            except subprocess.TimeoutExpired:
                second.kill()
                second.wait()
                raise AssertionError(
                    f"a second proxy started on port {port}:\n{second_log.read_text()}"
                ) from None
            # The first still serves, alone.
            await healthy_twilio_call(port, "after")
        finally:
            first.send_signal(signal.SIGTERM)
            first_code = await asyncio.to_thread(first.wait, 30)
    assert code != 0
    errors = [line for line in second_log.read_text().splitlines() if "error" in line.lower()]
    assert len(errors) == 1, second_log.read_text()
    assert f"127.0.0.1:{port} is already served by " in errors[0], errors
    if workers > 1:  # the claim on the address names its holder, the first proxy's parent
        assert f"by another voxproxy proxy (pid {first.pid})" in errors[0], errors
    assert "Traceback" not in second_log.read_text()
    assert not (tmp_path / "second.jsonl").exists()
    assert first_code == 0
    assert [r.terminal for r in read_receipts(tmp_path / "first.jsonl")] == ["completed"]


async def healthy_twilio_call(port: int, name: str) -> None:
    sid = call_sid(name)
    wire = TwilioCallerWire("MZ" + sid[2:], sid)
    async with connect(f"ws://127.0.0.1:{port}/echo/{name}", compression=None) as ws:
        await ws.send(wire.start())
        await ws.send(wire.media(ULAW_SILENCE))
        await asyncio.wait_for(ws.recv(), 10)
        await ws.send(wire.stop())


def _unwritable(tmp_path: Path) -> Path:
    """A receipts path this process cannot create: a read-only directory's (or, as root,
    whom permissions do not stop, one in sysfs)."""
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        return locked / "receipts.jsonl"
    return Path("/sys/voxproxy-test-receipts.jsonl")


def test_an_unwritable_receipts_path_fails_once_in_one_line_before_any_worker(
    tmp_path: Path,
) -> None:
    path = _unwritable(tmp_path)
    with pytest.raises(OSError):  # the case is real here
        open(path, "a").close()
    cmd = [sys.executable, "-m", "voxproxy.cli", "proxy", "--workers", "2", "--secret", "s"]
    cmd += ["--listen", "127.0.0.1:0", "--upstream", "ws://127.0.0.1:9", "--receipts", str(path)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOXPROXY_")}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)
    # Before: every worker's traceback, 69-73 lines, and the parent's error.
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"voxproxy: error: Permission denied: '{path}'"]


@pytest.mark.slow
def test_two_workers_say_the_missing_secret_and_the_files_limit_once(tmp_path: Path) -> None:
    log = tmp_path / "proxy.log"
    cmd = proxy_command("--upstream", "ws://127.0.0.1:9", workers=2)
    cmd += ["--receipts", str(tmp_path / "r.jsonl"), "--drain-timeout", "0"]
    proc = logged_child(cmd, log)
    try:
        asyncio.run(_started(log))
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert text.count("no secret configured") == 1, text
    assert len(re.findall(r"open files: up to \d+", text)) == 1, text


@pytest.mark.slow
async def test_a_worker_killed_with_kill_9_is_replaced_and_its_calls_get_receipts_at_once(
    tmp_path: Path,
) -> None:
    """Issue 35 item 9: a worker killed with kill -9 was not replaced, its calls' receipts
    waited for a full restart and the health paths said ok. Killed once, it is replaced
    at once and the replacement writes them as it starts; its replacement killed soon
    after waits a second, so the parent writes them itself, and the front's readiness
    says the worker is down meanwhile."""
    receipts, log = tmp_path / "receipts.jsonl", tmp_path / "proxy.log"
    peers: dict[str, int] = {}  # call name -> the proxy's port toward the agent

    async def record(ws: ServerConnection) -> None:
        assert ws.request is not None
        peers[ws.request.path.rsplit("/", 1)[-1]] = ws.remote_address[1]
        await echo_media(ws)

    calls: dict[str, tuple[Any, TwilioCallerWire, int | None]] = {}  # name -> ws, wire, pid

    async def open_call(port: int, name: str, pids: list[int]) -> int | None:
        sid = call_sid(name)
        wire = TwilioCallerWire("MZ" + sid[2:], sid)
        ws = await connect(f"ws://127.0.0.1:{port}/record/{name}", compression=None)
        await ws.send(wire.start())
        await ws.send(wire.media(ULAW_SILENCE))
        await asyncio.wait_for(ws.recv(), 10)  # echoed: the call is through
        calls[name] = (ws, wire, _socket_owner(peers[name], pids))
        return calls[name][2]

    async def calls_on(port: int, pid: int, pids: list[int], prefix: str) -> list[str]:
        """Calls opened until ``pid`` holds one (the kernel picks the worker)."""
        for i in range(60):
            if await open_call(port, f"{prefix}{i:02d}", pids) == pid:
                break
        mine = [n for n, c in calls.items() if c[2] == pid]
        assert mine, f"no call reached pid {pid}"
        return mine

    def crashed() -> set[str]:
        return {r.call for r in read_receipts(receipts) if r.terminal == "proxy_crashed"}

    def journalled(index: int, names: list[str]) -> bool:
        path = worker_journal(receipts, index)
        text = path.read_text() if path.exists() else ""
        return all(call_hash(call_sid(n)) in text for n in names)

    async with router_agent(record=record) as agent:
        proc = _start_proxy(log, agent.url, receipts)
        readiness: list[tuple[int, str]] = []
        try:
            port, pids = await _started(log)
            metrics = _logged(log, r"metrics on http://127\.0\.0\.1:(\d+)/metrics \(merged")
            assert metrics is not None, log.read_text()
            ready_url = f"http://127.0.0.1:{metrics[1]}/readyz"
            # 1. Worker 1 killed while it holds calls: replaced at once.
            first = await calls_on(port, pids[1], pids, "a")
            await wait_until(lambda: journalled(1, first), 15, "worker 1's calls journalled")
            os.kill(pids[1], signal.SIGKILL)
            again = await wait_until(
                lambda: _logged(log, r"worker 1 started again \(pid (\d+)\)"), 30, "a new worker 1"
            )
            second_pid = int(again[1])
            want = {call_hash(call_sid(n)) for n in first}
            await wait_until(lambda: crashed() == want, 30, "the killed calls' receipts")
            assert second_pid not in pids and os.path.exists(f"/proc/{second_pid}")
            # 2. The replacement killed soon after: it waits; the parent writes the receipts.
            pids = [pids[0], second_pid]
            later = await calls_on(port, second_pid, pids, "b")
            await wait_until(
                lambda: journalled(1, later), 15, "the new worker 1's calls journalled"
            )
            async with aiohttp.ClientSession() as http:

                async def poll() -> None:
                    while True:
                        async with http.get(ready_url) as answer:
                            readiness.append((answer.status, await answer.text()))
                        await asyncio.sleep(0.05)

                poller = asyncio.ensure_future(poll())
                try:
                    await wait_until(lambda: readiness, 10, "a first readiness answer")
                    os.kill(second_pid, signal.SIGKILL)
                    third = await wait_until(
                        lambda: re.findall(
                            r"worker 1 started again \(pid (\d+)\)", log.read_text()
                        )[1:],
                        30,
                        "a third worker 1",
                    )
                    await wait_until(lambda: readiness[-1] == (200, "ok\n"), 15, "ready again")
                finally:
                    poller.cancel()
            want |= {call_hash(call_sid(n)) for n in later}
            assert crashed() == want
            assert f"worker 1 (pid {second_pid}) was killed by signal 9" in log.read_text()
            assert re.search(
                r"worker 1's \d+ call\(s\) in progress: receipts written", log.read_text()
            )
            # The calls on worker 0 went on throughout; a new caller is served.
            third_pid = int(third[0])
            for ws, wire, pid in calls.values():
                if pid == pids[0]:
                    await ws.send(wire.media(ULAW_SILENCE))
                    await asyncio.wait_for(ws.recv(), 10)
                    await ws.send(wire.stop())
                    await ws.close()
                else:
                    ws.transport.abort()
            await open_call(port, "after", [pids[0], third_pid])
            ws, wire, _ = calls["after"]
            await ws.send(wire.stop())
            await ws.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(proc.wait, 60)
    assert code == 0, log.read_text()
    # Every call has exactly one receipt: the killed workers' crashed, the others completed.
    written = list(read_receipts(receipts))
    assert sorted(r.call for r in written) == sorted(call_hash(call_sid(n)) for n in calls)
    for r in written:
        assert r.terminal == ("proxy_crashed" if r.call in want else "completed"), r
    # The front said the truth meanwhile: ready (worker 0 admits), naming worker 1 as down.
    assert all(status == 200 for status, _ in readiness), readiness
    down = [text for _, text in readiness if text != "ok\n"]
    assert down and all(t.startswith("ok: worker 1: ") for t in down), readiness
    assert not any(worker_journal(receipts, i).exists() for i in (0, 1))
