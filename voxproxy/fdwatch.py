"""Running out of file descriptors, said out loud.

Each call holds two sockets (WebRTC more). When the process reaches its limit of
open files, uvloop's accept loop (libuv) quietly accepts and drops new
connections, and the standard loop logs one ERROR per failed ``accept``: either
way nothing says plainly what is wrong. :func:`watch_fds` checks the process's
open descriptors against its limit once a second and logs, at most every ten
seconds, when they are nearly all in use; a connect to the agent that fails with
``EMFILE``/``ENFILE`` raises the same alarm.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import time

log = logging.getLogger("voxproxy.fds")

FD_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})
NEARLY_ALL = 0.95  # of the soft limit


class FdAlarm:
    """Logs running out of file descriptors, at most once per ``every_s`` seconds."""

    __slots__ = ("_next", "count", "every_s")

    def __init__(self, every_s: float = 10.0) -> None:
        self.every_s = every_s
        self._next = 0.0
        self.count = 0

    def hit(self, what: str) -> None:
        self.count += 1
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.every_s
            log.error(
                "out of file descriptors (%s; %d time(s) so far): new callers cannot be "
                "accepted; raise the limit (ulimit -n) or lower --max-calls",
                what,
                self.count,
            )


FD_ALARM = FdAlarm()


def fd_limit() -> int | None:
    try:
        import resource
    except ImportError:  # not on a POSIX system
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def raise_fd_limit() -> int | None:
    """Raise the soft limit of open files to the hard limit; returns the new soft limit."""
    try:
        import resource
    except ImportError:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return fd_limit()


def open_fds() -> int | None:
    """How many descriptors the process holds (None where /proc is not available)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except FileNotFoundError:
        return None


async def watch_fds(interval_s: float = 1.0) -> None:
    """Check the open descriptors against the limit every ``interval_s``; runs until cancelled."""
    limit = fd_limit()
    while True:
        await asyncio.sleep(interval_s)
        try:
            n = open_fds()
        except OSError as exc:  # listing them takes a descriptor too
            if exc.errno in FD_ERRNOS:
                FD_ALARM.hit("the limit is reached")
            continue
        if n is None:
            return
        if limit is not None and n >= limit * NEARLY_ALL:
            FD_ALARM.hit(f"{n} of {limit} in use")
