"""``voxproxy`` commands run as child processes, for the tests and the benchmarks.

The command line of a subcommand (``cli_command``, ``proxy_command``), an environment
without the settings of the shell that runs them (``clean_env``), the port a child
says it bound after it was asked for port 0 (``read_port`` from a pipe, ``port_in_log``
from a log file), a child whose stderr goes to a log (``logged_child``), and a stop that
asks first (``stop``; ``terminated`` for its exit code). The tests and the benchmarks
start proxies and mock agents this way; the ones in this process use the Python API.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, AnyStr

#: What ``voxproxy proxy`` and ``voxproxy mock-agent`` say once they listen.
LISTENING = r"listening on ws://127\.0\.0\.1:(\d+)"
#: ``LISTENING`` or the WebRTC proxy's words.
LISTENING_ANY = r"(?:listening on ws|offers on http)://127\.0\.0\.1:(\d+)"


def cli_command(*args: str) -> list[str]:
    """``voxproxy ARGS`` run by this interpreter."""
    return [sys.executable, "-m", "voxproxy.cli", *args]


def proxy_command(*args: str, listen: str = "127.0.0.1:0", workers: int = 1) -> list[str]:
    """``voxproxy proxy`` with one worker (unless told) on ``listen``, then ``args``."""
    return cli_command("proxy", "--workers", str(workers), "--listen", listen, *args)


def clean_env(*prefixes: str) -> dict[str, str]:
    """This process's environment without ``VOXPROXY_`` settings (nor those that start
    with one of ``prefixes``), so that the shell running the tests cannot change them."""
    drop = ("VOXPROXY_", *prefixes)
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def read_match(stream: IO[AnyStr] | None, pattern: str) -> re.Match[str]:
    """Read a child's output line by line until one matches ``pattern``; fail with what
    it said if it ends first."""
    assert stream is not None, "the child's output is not a pipe"
    regex = re.compile(pattern)
    seen: list[str] = []
    while True:
        raw = stream.readline()
        line = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        if not line:
            raise AssertionError(f"the child ended before {pattern!r}: {''.join(seen)[-2000:]}")
        seen.append(line)
        found = regex.search(line)
        if found:
            return found


def read_port(stream: IO[AnyStr] | None, pattern: str = LISTENING) -> int:
    """The port a child names in the first line of its output that matches ``pattern``
    (its first group)."""
    return int(read_match(stream, pattern).group(1))


@contextmanager
def mock_agent_process(*args: str, pattern: str = LISTENING) -> Iterator[re.Match[str]]:
    """``voxproxy mock-agent --listen 127.0.0.1:0 ARGS`` for the block: its line that
    matches ``pattern`` (by default the one that names its port), killed at the end."""
    agent = subprocess.Popen(
        cli_command("mock-agent", "--listen", "127.0.0.1:0", *args),
        stdout=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    try:
        yield read_match(agent.stdout, pattern)
    finally:
        kill(agent)


def port_in_log(
    proc: subprocess.Popen[bytes], log: Path, pattern: str = LISTENING_ANY, timeout_s: float = 20
) -> int:
    """Poll the log file a child writes until ``pattern`` names the port it bound; kill
    it and raise with the log if it does not within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = re.search(pattern, log.read_text())
        if found:
            return int(found.group(1))
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(log.read_text())


def stop(proc: subprocess.Popen[AnyStr], timeout_s: float = 10) -> None:
    """SIGTERM a child that still runs, then SIGKILL it if it has not exited in
    ``timeout_s``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def logged_child(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    """``cmd`` started with its stderr written to ``log`` and a clean environment."""
    with open(log, "w") as err:
        return subprocess.Popen(cmd, stderr=err, env=clean_env())


def terminated(proc: subprocess.Popen[AnyStr], timeout_s: float = 30) -> int:
    """SIGTERM a child and its exit code once it exits; if it has not in ``timeout_s``,
    SIGKILL it and raise (``subprocess.TimeoutExpired``)."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


def kill(proc: subprocess.Popen[AnyStr]) -> None:
    """SIGKILL a child that still runs and reap it (its pipes read to the end)."""
    if proc.poll() is None:
        proc.kill()
    proc.communicate()
