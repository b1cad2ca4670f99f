"""Running a proxy (:func:`serve`): in this process, or with ``voxproxy proxy --workers
N`` in N processes that serve one port as one proxy.

The parent (:func:`run_workers`) never runs an event loop or a thread, so that it can
fork a worker at any time with nothing half-done in the copy. It checks the
configuration and loads the policy (a mistake fails once, here); claims the address,
reserves the port and checks that no other process serves it
(:mod:`voxproxy.proxy.listenclaim`: a second proxy on the port fails to start, in one
line, rather than take a share of the callers); cuts a torn last line off the
receipts file and folds the crash journals of workers that will not run again into
worker 0's; forks N workers, then, when ``/metrics`` or the event API is asked for,
the front (:mod:`voxproxy.proxy.front`); then supervises them (:mod:`voxproxy.proxy.supervisor`).

Each worker is a :class:`voxproxy.proxy.server.ProxyServer` listening on the port with
``SO_REUSEPORT``: the kernel spreads new connections across the workers'
listeners (by a hash of the connection's addresses). A call lives and dies in the
worker that accepted it. What the workers share:

- **receipts**: one file, to which each worker appends whole lines under an
  exclusive ``flock`` (:mod:`voxproxy.receipts.writer`); one SQLite store (WAL,
  writers wait for each other up to sqlite3's 5 s timeout). Worker ``i`` journals
  its calls in progress in ``FILE.open-calls`` (``i = 0``, the single process's
  name) or ``FILE.open-calls.i``.
- **metrics**, **event API**, **health**: each worker serves them on loopback ports of
  its own; the front serves ``--metrics-listen`` (merged over the workers),
  ``--events-listen`` (forwarded to the worker that holds the call) and, on both,
  the health paths over all workers (:mod:`voxproxy.health`). OTLP export, when on,
  goes from each worker.
- **signals**: SIGTERM or SIGINT to the parent go to every worker, which drains
  as a single proxy does (``--drain-timeout``); the parent waits for them, then
  stops the front and exits. A worker or front whose parent is gone (``kill -9``)
  drains and exits too: it watches a pipe that only the parent holds open for writing.

**A worker that exits unasked** (``kill -9``, the OOM killer, a crash) is replaced
(:mod:`voxproxy.proxy.supervisor`). The kernel sends new callers to the workers still
listening meanwhile; the calls the dead worker carried are gone, and their receipts
(terminal ``proxy_crashed``) are written from its journal at once: by its
replacement, started at once, before it listens (as a restarted proxy writes them,
counted in its metrics); or, when the replacement has to wait, by the parent itself
(:func:`~voxproxy.proxy.journals.recover_journal`). It waits when the worker exited
soon after it started (1 s, then twice as long each time, up to 30 s, until one runs a
minute), so a worker that keeps crashing does not spin. A front that exits unasked is
replaced the same way. The health paths say meanwhile which worker is down and when it starts
again.

With N = 1, :func:`serve` runs the proxy (:class:`voxproxy.proxy.server.ProxyServer`) in its
own process: none of this is involved. The crash journals are
:mod:`voxproxy.proxy.journals`.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import replace
from pathlib import Path

from voxproxy.core.errors import ConfigError
from voxproxy.proxy.journals import fold_journals
from voxproxy.proxy.listenclaim import AddressClaim, check_unserved, reserve_port
from voxproxy.proxy.server import ProxyServer, ServeConfig, run_loop
from voxproxy.receipts.policy import Policy, load_policy

log = logging.getLogger("voxproxy")


def default_workers() -> int:
    """One worker per CPU this process may run on: the CPUs it is allowed
    (``sched_getaffinity``), no more than its cgroup's CPU quota allows (a container's
    CPU limit: ``cpu.max``, rounded up)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        cpus = min(cpus, quota)
    return max(1, cpus)


def cgroup_cpu_quota(path: str = "/sys/fs/cgroup/cpu.max") -> int | None:
    """CPUs the cgroup (v2) quota allows, rounded up; None when unlimited or unknown."""
    try:
        quota, period = Path(path).read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return max(1, -(-int(quota) // int(period)))
    except (ValueError, ZeroDivisionError):
        return None


def _prepare_outputs(config: ServeConfig) -> ServeConfig:
    """What every worker would otherwise find out, or say, for itself, done once here
    before any starts: the receipts file and the store opened for writing, the capture
    directory made (a path that cannot be written fails here, in one line), the
    open-files limit raised and said,
    and, without --secret, one key for every worker's call ids, made and warned of."""
    from voxproxy.clock import new_secret
    from voxproxy.fdwatch import raise_fd_limit
    from voxproxy.proxy.lifecycle import NO_SECRET

    if config.receipts is not None:
        Path(config.receipts).parent.mkdir(parents=True, exist_ok=True)
        with open(config.receipts, "a", encoding="utf-8"):
            pass
    if config.store is not None:
        from voxproxy.receipts.store import connect

        connect(config.store).close()
    if config.capture is not None:
        from voxproxy.captures.writer import prepare_directory

        prepare_directory(config.capture.directory)
    limit = raise_fd_limit()
    if limit is not None:
        log.info("open files: up to %d a worker", limit)
    proxy = config.proxy
    if getattr(proxy, "secret", b"") is None:
        log.warning("%s", NO_SECRET)
        config = replace(config, proxy=replace(proxy, secret=new_secret()))
    return config


def serve(config: ServeConfig) -> None:
    """Run a proxy until SIGINT or SIGTERM (on uvloop when installed): in this process,
    or with ``config.workers`` > 1 in that many worker processes (:mod:`voxproxy.proxy.workers`)."""
    if config.workers > 1:
        run_workers(config)
        return
    run_loop(ProxyServer(config).run())


def run_workers(config: ServeConfig) -> None:
    """Run ``config.workers`` worker processes on one port until SIGINT or SIGTERM."""
    if config.transport != "websocket":
        raise ConfigError("--workers > 1 needs --transport websocket")
    policy = config.policy if isinstance(config.policy, Policy) else load_policy(config.policy)
    host = config.listen[0]
    claim, reserved = _take_address(host, config.listen[1])  # before any file is touched
    port = int(reserved.getsockname()[1])
    try:
        config = _prepare_outputs(config)
        if config.receipts is not None:
            from voxproxy.receipts.writer import cut_torn_tail

            Path(config.receipts).parent.mkdir(parents=True, exist_ok=True)
            cut_torn_tail(Path(config.receipts))
            fold_journals(config.receipts, config.workers)
        from voxproxy.proxy.supervisor import Supervisor

        supervisor = Supervisor(config, policy, port, claim, reserved)
        try:
            supervisor.start()
        except BaseException:
            supervisor.terminate()
            raise
        supervisor.run()
    finally:
        reserved.close()
        claim.close()


def _take_address(host: str, port: int) -> tuple[AddressClaim, socket.socket]:
    """Claim ``host:port`` for this proxy, reserve it, and check that nothing else listens
    there (:mod:`voxproxy.proxy.listenclaim`); for port 0, the port picked is claimed."""
    claim = AddressClaim(host, port) if port != 0 else None
    try:
        reserved = reserve_port(host, port)
    except BaseException:
        if claim is not None:
            claim.close()
        raise
    try:
        if claim is None:
            claim = AddressClaim(host, int(reserved.getsockname()[1]))
        check_unserved(host, int(reserved.getsockname()[1]))
    except BaseException:
        reserved.close()
        if claim is not None:
            claim.close()
        raise
    return claim, reserved
