"""benchmarks/cpushare.py's CoreShares: a share of a core per process, written to a
cgroup tree (a fake one here: the files the kernel's v1 and v2 CPU controllers read)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.benchmarks import load_benchmark

from voxproxy.core.errors import UsageError

cpushare = load_benchmark("cpushare")
CoreShares, period_and_quota = cpushare.CoreShares, cpushare.period_and_quota

SLEEP_IN_TWO_THREADS = (
    "import threading, time\n"
    "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def sleeper() -> Iterator[int]:
    """A process with two threads."""
    child = subprocess.Popen([sys.executable, "-c", SLEEP_IN_TWO_THREADS], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        yield child.pid
    finally:
        child.kill()
        child.communicate()


def _v1(root: Path) -> Path:
    cpu = root / "cpu"
    cpu.mkdir()
    (cpu / "cpu.cfs_quota_us").write_text("-1\n")
    return cpu


def _v2(root: Path, subtree: str = "") -> None:
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text(subtree)


def test_the_period_is_as_short_as_the_least_quota_allows() -> None:
    assert period_and_quota(0.45) == (2223, 1000)
    assert period_and_quota(0.5) == (2000, 1000)
    assert period_and_quota(0.75) == (2000, 1500)
    assert period_and_quota(1.0) == (2000, 2000)
    assert period_and_quota(0.1) == (10000, 1000)
    for bad in (0.0, -0.2, 1.5):
        with pytest.raises(UsageError, match="core share"):
            period_and_quota(bad)


def test_v1_each_process_gets_its_own_group_cpu_and_priority(tmp_path: Path, sleeper: int) -> None:
    cpu = _v1(tmp_path)
    cpus = sorted(os.sched_getaffinity(0))
    with CoreShares(0.45, "bench", root=tmp_path) as shares:
        group = shares.confine(sleeper, 1)
        assert group == cpu / "bench" / "p0"
        assert (group / "cpu.cfs_period_us").read_text() == "2223"
        assert (group / "cpu.cfs_quota_us").read_text() == "1000"
        assert (group / "cgroup.procs").read_text() == str(sleeper)
        threads = [int(t) for t in os.listdir(f"/proc/{sleeper}/task")]
        assert len(threads) == 2
        for tid in threads:
            assert os.sched_getaffinity(tid) == {cpus[1 % len(cpus)]}
            assert os.getpriority(os.PRIO_PROCESS, tid) == -20  # (root, as the benchmark)
        assert shares.share == pytest.approx(1000 / 2223)
        (group / "cpu.stat").write_text("nr_periods 10\nnr_throttled 4\nthrottled_time 7000000\n")
        assert shares.throttled_us() == 7000
        # The fake groups hold files, so they are left; the kernel's hold none once empty.
        for name in ("cpu.cfs_period_us", "cpu.cfs_quota_us", "cgroup.procs", "cpu.stat"):
            (group / name).unlink()
    assert not (cpu / "bench").exists()


def test_v2_enables_the_controller_and_writes_cpu_max(tmp_path: Path, sleeper: int) -> None:
    _v2(tmp_path)
    with CoreShares(0.5, "bench", root=tmp_path) as shares:
        assert (tmp_path / "cgroup.subtree_control").read_text() == "+cpu"
        assert (tmp_path / "bench" / "cgroup.subtree_control").read_text() == "+cpu"
        group = shares.confine(sleeper, 0)
        assert (group / "cpu.max").read_text() == "1000 2000"
        assert (group / "cgroup.procs").read_text() == str(sleeper)
        (group / "cpu.stat").write_text("usage_usec 5\nthrottled_usec 1234\n")
        assert shares.throttled_us() == 1234


def test_v2_with_the_controller_already_on_leaves_the_root_alone(tmp_path: Path) -> None:
    _v2(tmp_path, subtree="cpu memory\n")
    with CoreShares(0.5, "bench", root=tmp_path):
        assert (tmp_path / "cgroup.subtree_control").read_text() == "cpu memory\n"


def test_no_cpu_controller_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("memory pids\n")
    with pytest.raises(UsageError, match="no cgroup CPU controller"):
        CoreShares(0.5, "bench", root=tmp_path).open()


def test_confine_before_open_is_refused(tmp_path: Path, sleeper: int) -> None:
    _v1(tmp_path)
    with pytest.raises(RuntimeError, match="open"):
        CoreShares(0.5, "bench", root=tmp_path).confine(sleeper, 0)
