"""A slice of one core per process, for benchmarks that need more cores than the machine has.

``benchmarks/capacity.py`` compares one proxy worker with two. Measured honestly, two
workers need two cores to themselves and the load generator a third; a 2-core machine
has no third. :class:`CoreShares` gives each worker a *share* of a core instead, the
same share in every configuration, so that one worker and two can be compared on what
they carry per share, with the rest of the machine left to the load:

* each process is confined by the kernel's CPU bandwidth control (a cgroup of its own:
  cgroup v1's ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``, or v2's ``cpu.max``): it
  may run ``share`` of every period, then waits for the next one;
* the period is short (2 ms, or whatever the kernel's 1 ms least quota needs), so a
  throttled process waits at most ``(1 - share)`` of a period, about 1 ms;
* it is pinned to a CPU of its own (round robin over the allowed CPUs);
* it runs at the highest priority of its class (nice -20): when it is due, it does
  not wait behind the load generator on its CPU.

This needs root, and a cgroup file system with the CPU controller (any Linux with
cgroups mounted). :meth:`CoreShares.open` says why not when it cannot.
"""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path

from voxproxy.core.errors import UsageError

CGROUP_ROOT = Path("/sys/fs/cgroup")
MIN_QUOTA_US = 1000  # the kernel's least quota (cfs_quota_us, cpu.max)
MIN_PERIOD_US = 2000
HIGHEST_PRIORITY = -20  # nice


def period_and_quota(share: float) -> tuple[int, int]:
    """The bandwidth period and quota (µs) that give ``share`` of a core: the period as
    short as the kernel's least quota allows, and at least ``MIN_PERIOD_US``."""
    if not 0.0 < share <= 1.0:
        raise UsageError(f"a core share is in (0, 1], not {share}")
    period = max(MIN_PERIOD_US, math.ceil(MIN_QUOTA_US / share))
    return period, max(MIN_QUOTA_US, round(share * period))


class CoreShares:
    """Cgroups that each give one process ``share`` of a core (see the module's text).

    Use as a context manager: on exit the groups are removed once their processes have
    ended (a group that still holds one is left, named, for the kernel to keep)."""

    def __init__(self, share: float, name: str, root: Path = CGROUP_ROOT) -> None:
        self.period_us, self.quota_us = period_and_quota(share)
        self.share = self.quota_us / self.period_us
        self.name = name
        self.root = root
        self._base: Path | None = None
        self._v2 = False
        self._groups: list[Path] = []
        self._cpus = sorted(os.sched_getaffinity(0))

    def open(self) -> CoreShares:
        """Find the CPU controller and make this benchmark's cgroup; UsageError when the
        machine does not allow it (not root, no CPU controller)."""
        v1 = self.root / "cpu"
        if (v1 / "cpu.cfs_quota_us").exists():
            base = v1 / self.name
        elif "cpu" in _words(self.root / "cgroup.controllers"):
            self._v2 = True
            base = self.root / self.name
            if "cpu" not in _words(self.root / "cgroup.subtree_control"):
                self._write(self.root / "cgroup.subtree_control", "+cpu")
        else:
            raise UsageError(
                f"no cgroup CPU controller under {self.root} (cgroup v1 cpu/, or v2 "
                "cgroup.controllers with cpu): cannot give a process a share of a core"
            )
        try:
            base.mkdir(exist_ok=True)
            if self._v2:
                self._write(base / "cgroup.subtree_control", "+cpu")
        except OSError as exc:
            raise UsageError(f"cannot make cgroup {base} (root needed): {exc}") from exc
        self._base = base
        return self

    def __enter__(self) -> CoreShares:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def confine(self, pid: int, index: int) -> Path:
        """Give process ``pid`` a share of a core: its own cgroup, CPU ``index`` (round
        robin over the allowed CPUs), nice -20, for each of its threads (those started
        later inherit them). Returns its cgroup."""
        if self._base is None:
            raise RuntimeError("CoreShares.open() first")
        group = self._base / f"p{len(self._groups)}"
        group.mkdir(exist_ok=True)
        self._groups.append(group)
        if self._v2:
            self._write(group / "cpu.max", f"{self.quota_us} {self.period_us}")
        else:
            # The quota first may be refused while over the current period, and the other
            # way round: a quota of -1 (none) lets the period be set freely.
            self._write(group / "cpu.cfs_quota_us", "-1")
            self._write(group / "cpu.cfs_period_us", str(self.period_us))
            self._write(group / "cpu.cfs_quota_us", str(self.quota_us))
        self._write(group / "cgroup.procs", str(pid))  # (all its threads)
        cpu = self._cpus[index % len(self._cpus)]
        for tid in _threads(pid):  # affinity and priority are per thread on Linux
            with contextlib.suppress(ProcessLookupError):  # a thread that just ended
                os.sched_setaffinity(tid, {cpu})
                os.setpriority(os.PRIO_PROCESS, tid, HIGHEST_PRIORITY)
        return group

    def throttled_us(self) -> int:
        """How long the confined processes were held back by their quota, in total (µs):
        a run in which they never were did not need the share's limit."""
        total = 0
        for group in self._groups:
            stats = _stats(group / "cpu.stat")
            if self._v2:
                total += stats.get("throttled_usec", 0)
            else:
                total += stats.get("throttled_time", 0) // 1000
        return total

    def close(self) -> None:
        for group in reversed(self._groups):
            with contextlib.suppress(OSError):  # a process still in it: left to the kernel
                group.rmdir()
        self._groups.clear()
        if self._base is not None:
            with contextlib.suppress(OSError):
                self._base.rmdir()
            self._base = None

    @staticmethod
    def _write(path: Path, text: str) -> None:
        with open(path, "w") as fh:
            fh.write(text)


def _threads(pid: int) -> list[int]:
    """The process's threads (itself when /proc cannot say)."""
    try:
        return sorted(int(tid) for tid in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return [pid]


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def _stats(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                out[key] = int(value)
    return out
