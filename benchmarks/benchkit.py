"""Pieces several benchmarks use: a relay observer that does nothing, a wait for a child's
port, an instruction count under valgrind's callgrind, and the table their figures print in.

Not a benchmark itself (no ``main``); the scripts beside it import it as ``benchkit``
(their own folder is on the path when they run).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any

_COLLECTED = re.compile(r"Collected\s*:\s*([0-9]+)")


class NullObserver:
    """A relay observer that measures nothing: what forwarding costs alone."""

    last_media_s = 0.0

    def upstream_headers(self, request: object) -> list[tuple[str, str]]:
        return []

    def on_upstream_open(self, t_ns: int, status: int) -> None:
        pass

    def on_message(self, direction: object, payload: object, t_ns: int) -> None:
        pass

    def on_end(self, t_ns: int, info: object) -> None:
        pass


def wait_port(port: int, timeout: float) -> None:
    """Return once something accepts connections on loopback ``port``; raise after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


def callgrind(
    argv: list[str], label: str = "", env: Mapping[str, str] | None = None
) -> tuple[int, str]:
    """The instructions callgrind counts in a child ``python argv...``, and its stdout.

    Without address-space randomization where setarch can turn it off: what hashes by
    address (sets of objects) then iterates in the same order in every process; and with
    a fixed ``PYTHONHASHSEED`` for the same reason. ``env`` adds to the environment;
    ``label`` names the run in the error a failed one exits with.
    """
    norandom = ["setarch", platform.machine(), "-R"] if shutil.which("setarch") else []
    cmd = [
        *norandom,
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        *argv,
    ]
    child_env = {**os.environ, "PYTHONHASHSEED": "0", **(env or {})}
    done = subprocess.run(cmd, capture_output=True, text=True, env=child_env, check=False)
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        where = f" on {label}" if label else ""
        raise SystemExit(f"callgrind failed{where}:\n{done.stderr[-2000:]}")
    return int(found.group(1)), done.stdout


def figures_table(title: str, columns: Iterable[str], **options: Any) -> Any:
    """A rich ``Table`` titled ``title`` whose ``columns`` are all right-justified, as
    figures read best; ``options`` go to the ``Table`` (a caption, the title's justification)."""
    from rich.table import Table

    table = Table(title=title, **options)
    for column in columns:
        table.add_column(column, justify="right")
    return table
