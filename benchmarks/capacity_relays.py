"""The relays that ``benchmarks/capacity.py`` measures: how each is started, confined to a
share of a core (``--core-share``), and its CPU read (its whole process tree); and what
one run of the load against one of them measured (:class:`Run`)."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import benchkit
import overhead  # benchmarks/overhead.py: the bare relay, CPU from /proc (and tests/ on the path)
from cpushare import CoreShares
from support.child import proxy_command

HERE = Path(__file__).resolve().parent

NGINX_CONF = """
worker_processes 1;
master_process off;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
worker_rlimit_nofile 20000;
events {{ worker_connections 16384; multi_accept on; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{
            proxy_pass http://127.0.0.1:{agent_port};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $host;
            proxy_read_timeout 3600s;
            proxy_send_timeout 3600s;
            proxy_buffering off;
            tcp_nodelay on;
        }}
    }}
}}
"""


def start_relay(
    path: str, port: int, agent_port: int, tmp: Path, max_calls: int, workers: int, cpus: set[int]
) -> subprocess.Popen[bytes]:
    """Start relay ``path`` on ``port`` in front of the agent on ``agent_port``, on ``cpus``
    (voxproxy: with ``workers`` workers); return once it listens."""
    upstream = f"ws://127.0.0.1:{agent_port}"
    if path in ("voxproxy", "voxproxy-2w"):
        cmd = proxy_command(
            *("--upstream", upstream, "--dialect", "twilio"),
            *("--receipts", str(tmp / "receipts.jsonl"), "--secret", "bench"),
            *("--log-level", "warning", "--drain-timeout", "0", "--max-calls", str(max_calls)),
            listen=f"127.0.0.1:{port}",
            workers=workers,
        )
    elif path == "bare":
        cmd = [overhead.PY, str(HERE / "overhead.py"), "--bare-relay", str(port), upstream]
    elif path == "forward-only":  # voxproxy's relay with a do-nothing observer (diagnosis)
        cmd = [overhead.PY, str(HERE / "overhead.py"), "--forward-only", str(port), upstream]
    elif path == "nginx":
        conf = tmp / "nginx.conf"
        conf.write_text(NGINX_CONF.format(tmp=tmp, port=port, agent_port=agent_port))
        cmd = ["nginx", "-p", str(tmp), "-c", str(conf), "-e", str(tmp / "error.log")]
    else:
        raise ValueError(path)
    # Pinned before it runs: the workers it forks inherit the CPUs.
    relay = subprocess.Popen(
        cmd,
        cwd=overhead.ROOT,
        stdout=subprocess.DEVNULL,
        preexec_fn=lambda: os.sched_setaffinity(0, cpus),
    )
    benchkit.wait_port(port, 10.0)
    return relay


def confine(relay: subprocess.Popen[bytes], workers: int, shares: CoreShares) -> None:
    """Give each of the relay's processes that carry calls (its ``workers``, or itself) a
    share of a core of its own."""
    pids = [relay.pid]
    if workers > 1:
        deadline = time.monotonic() + 30
        while len(pids := _children(relay.pid)) < workers:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(pids)} of {workers} workers after 30 s")
            time.sleep(0.05)
    for i, pid in enumerate(pids):
        shares.confine(pid, i)


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and of its descendants alive now (a relay's workers)."""
    return sum(overhead._tree_cpu_seconds(pid).values())


def _children(pid: int) -> list[int]:
    """``pid``'s own children (a relay's workers)."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out.extend(int(c) for c in fh.read().split())
        except OSError:
            continue
    return out


@dataclass
class Run:
    path: str
    calls: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    errors: int
    messages: int
    relay_cpu: float  # fraction of one core over the window
    load_cpu: float
    lag_p99_ms: float
    foreign: float = 0.0  # CPU (in cores) used by other processes during the window
    refused: int = 0  # refused at the handshake (503): admission control
    opened: int = 0
    added_p99_ms: float = float("nan")
    attempts: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    shed: float = 0.0  # voxproxy: share of messages whose analysis it shed (its receipts)

    def ok(self, max_p99_ms: float) -> bool:
        """Within the bound, no failed call, and (voxproxy) measurement kept up: a count
        at which the proxy sheds measurement is not a count it measures."""
        return self.errors == 0 and self.added_p99_ms <= max_p99_ms and self.shed == 0.0

    def disturbed(self, max_foreign: float) -> bool:
        """Other processes on the machine used more than ``max_foreign`` of a core."""
        return self.foreign > max_foreign


def busy_s() -> float:
    """CPU time (user, nice, system) of the whole machine so far, in seconds."""
    with open("/proc/stat") as fh:
        fields = fh.readline().split()
    return (int(fields[1]) + int(fields[2]) + int(fields[3])) / os.sysconf("SC_CLK_TCK")


def own_s() -> float:
    t = os.times()
    return t.user + t.system
