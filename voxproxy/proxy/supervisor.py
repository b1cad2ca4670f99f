"""The parent of ``voxproxy proxy --workers N`` and its children (the workers, the front):
start them, replace whichever exits unasked, drain them on SIGTERM or SIGINT.

What the whole is and why: :mod:`voxproxy.proxy.workers`. Here, how:

- The parent runs no event loop and no thread: :class:`Supervisor` waits in
  ``select`` on the children's sentinels (readable once a child exited), their first
  messages (a worker's loopback ports once it listens, or why it could not start)
  and a pipe the signal handlers write to (``signal.set_wakeup_fd``), with a timeout
  until the next restart that is due.
- A child is forked with SIGTERM and SIGINT blocked; its first steps
  (:func:`_as_child`) put back the default handlers, drop the parent's wakeup pipe
  and close the parent's descriptors (the address claim, the pipes), then let the
  signals through: a signal meant for the child never reaches the parent's handlers.
- A child that exits unasked is started again after :class:`RestartPolicy`'s wait;
  a worker's calls' receipts are written from its journal by its replacement as it
  starts, or by the parent at once when the replacement waits
  (:func:`~voxproxy.proxy.journals.recover_journal`). The front hears of every change
  (:class:`~voxproxy.proxy.front.WorkerView`) for its health answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import select
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from voxproxy.core.errors import ConfigError, VoxproxyError
from voxproxy.proxy.front import DOWN, STARTING, UP, WorkerView, front_main, start_failure
from voxproxy.proxy.journals import recover_journal, worker_journal
from voxproxy.proxy.listenclaim import AddressClaim
from voxproxy.proxy.server import ProxyServer, ServeConfig, log_started, run_loop
from voxproxy.receipts.policy import Policy

log = logging.getLogger("voxproxy")

READY_TIMEOUT_S = 60.0  # a child's start, from fork to listening
STOP_SLACK_S = 15.0  # after --drain-timeout: the workers' close timeouts, the last receipts
LOOPBACK = "127.0.0.1"
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class RestartPolicy:
    """How long to wait before starting a process again that exited unasked.

    The first exit, or one after a run of ``stable_s`` or more: no wait. Each further
    exit after a shorter run: ``first_s``, then twice as long each time, up to
    ``max_s``. A process that crashes as it starts is tried a few times in its first
    minute, then every ``max_s``: it never spins."""

    def __init__(self, first_s: float = 1.0, max_s: float = 30.0, stable_s: float = 60.0):
        self.first_s = first_s
        self.max_s = max_s
        self.stable_s = stable_s
        self.quick_exits = 0  # exits in a row after a run shorter than stable_s

    def delay_s(self, lived_s: float) -> float:
        """The wait before the next start, for a process that exited after ``lived_s``."""
        if lived_s >= self.stable_s:
            self.quick_exits = 0
        delay = 0.0 if self.quick_exits == 0 else self.first_s * 2 ** (self.quick_exits - 1)
        self.quick_exits += 1
        return min(delay, self.max_s)


def _worker_config(config: ServeConfig, policy: Policy, index: int, port: int) -> ServeConfig:
    telemetry = config.telemetry
    if telemetry.metrics_listen is not None:
        telemetry = replace(telemetry, metrics_listen=(LOOPBACK, 0))
    events = config.events
    if events is not None:
        events = replace(events, listen=(LOOPBACK, 0))
    return replace(
        config,
        workers=1,
        listen=(config.listen[0], port),
        reuse_port=True,
        policy=policy,
        telemetry=telemetry,
        events=events,
        journal=worker_journal(config.receipts, index) if config.receipts is not None else None,
    )


class _WorkerTag(logging.Filter):
    """Begins a worker's log lines with its number."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.prefix = f"worker {index}: "

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and not record.msg.startswith(self.prefix):
            record.msg = self.prefix + record.msg
        return True


@contextlib.contextmanager
def _signals_blocked() -> Iterator[None]:
    """SIGTERM and SIGINT held back (in this process, and in a child forked meanwhile
    until it unblocks them in :func:`_as_child`): the parent's handlers, which a forked
    child starts with, never run in the child."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _as_child(parents: list[Any]) -> None:
    """A forked child's first steps: the default signal handlers, no wakeup descriptor
    (the parent's), the parent's own descriptors closed (``parents``: objects with
    ``close()``, or descriptors), then the signals let through."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for thing in parents:
        with contextlib.suppress(OSError):
            if isinstance(thing, int):
                os.close(thing)
            else:
                thing.close()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


def _worker_main(
    config: ServeConfig, index: int, ready: Connection, alive_r: int, parents: list[Any]
) -> None:
    """A forked worker: serve until told to stop, or until the parent is gone."""
    _as_child(parents)
    tag = _WorkerTag(index)
    for handler in logging.getLogger().handlers:
        handler.addFilter(tag)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def parent_gone() -> None:
            loop.remove_reader(alive_r)
            log.warning("the parent process is gone; draining")
            stop.set()

        loop.add_reader(alive_r, parent_gone)

        def started(server: ProxyServer) -> None:
            metrics = getattr(server.telemetry, "metrics_port", None)
            events = server.events_api.port if server.events_api is not None else None
            ready.send({"pid": os.getpid(), "metrics": metrics, "events": events})

        await ProxyServer(config).run(stop, on_started=started)

    try:
        run_loop(main())
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        with contextlib.suppress(OSError):
            ready.send(start_failure(exc))
        raise SystemExit(1) from None  # the parent says it, once; no traceback per worker


def _front_child(
    config: ServeConfig,
    views: dict[int, WorkerView],
    updates: Connection,
    ready: Connection,
    alive_r: int,
    parents: list[Any],
) -> None:
    _as_child(parents)
    front_main(config, views, updates, ready, alive_r)


@dataclass
class Child:
    """A worker (``index`` >= 0) or the front (``index`` -1), as the parent tracks it."""

    index: int
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    process: BaseProcess | None = None
    ready: Connection | None = None  # the child's first message: ports, or an error
    started_at: float = 0.0  # monotonic
    up: bool = False
    pid: int = 0
    ports: dict[str, int | None] = field(default_factory=dict)
    restart_at: float | None = None  # monotonic; set while down, waiting to start again

    @property
    def name(self) -> str:
        return "the front" if self.index < 0 else f"worker {self.index}"

    def view(self) -> WorkerView:
        state = UP if self.up else STARTING if self.process is not None else DOWN
        return WorkerView(
            self.index,
            self.pid,
            self.ports.get("metrics"),
            self.ports.get("events"),
            state,
            self.restart_at,
        )


class Supervisor:
    """The parent: starts the workers and the front, replaces whichever exits unasked,
    and on SIGTERM or SIGINT drains them. No event loop: ``select`` on the children's
    sentinels, their first messages and the signals' wakeup pipe."""

    def __init__(
        self, config: ServeConfig, policy: Policy, port: int, claim: AddressClaim, reserved: Any
    ) -> None:
        self.config = config
        self.claim = claim
        self.policy = policy
        self.port = port
        self.ctx = multiprocessing.get_context("fork")
        self.workers = [Child(i) for i in range(config.workers)]
        wants_front = config.telemetry.metrics_listen is not None or config.events is not None
        self.front: Child | None = Child(-1) if wants_front else None
        self._updates: Connection | None = None  # to the front: WorkerView changes
        self._alive_r, self._alive_w = os.pipe()  # EOF on _alive_r: the parent is gone
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.stopping = False
        # What a child must not keep: it would hold the address or the pipes open.
        self._parents: list[Any] = [claim, reserved, self._alive_w, self._wake_r, self._wake_w]

    @property
    def children(self) -> list[Child]:
        return [*self.workers, *([self.front] if self.front is not None else [])]

    # -- start ------------------------------------------------------------------------

    def start(self) -> None:
        """Start every worker, then the front; wait until all listen (a failure to start
        fails the proxy's start)."""
        for w in self.workers:
            self._spawn(w)
        for w in self.workers:
            self._await_first(w)
        if self.front is not None:
            self._spawn(self.front)
            self._await_first(self.front)

    def _spawn(self, child: Child) -> None:
        receive, send = self.ctx.Pipe(duplex=False)
        parents = [*self._parents, receive, *(c.ready for c in self.children if c.ready)]
        if self._updates is not None:
            parents.append(self._updates)
        if child.index >= 0:
            cfg = _worker_config(self.config, self.policy, child.index, self.port)
            args: tuple[Any, ...] = (cfg, child.index, send, self._alive_r, parents)
            target: Callable[..., None] = _worker_main
        else:
            updates, self._updates = self.ctx.Pipe(duplex=False)
            parents.append(self._updates)
            views = {w.index: w.view() for w in self.workers}
            args = (self.config, views, updates, send, self._alive_r, parents)
            target = _front_child
        process = self.ctx.Process(
            target=target,
            args=args,
            name="voxproxy-front" if child.index < 0 else f"voxproxy-worker-{child.index}",
        )
        with _signals_blocked():
            process.start()
        send.close()
        if child.index < 0:
            updates.close()
        child.process, child.ready, child.started_at = process, receive, time.monotonic()
        child.up, child.restart_at, child.pid = False, None, process.pid or 0
        self._tell_front(child)

    def _await_first(self, child: Child) -> None:
        """Block until ``child``'s first message (the proxy's start: a failure raises)."""
        assert child.ready is not None
        if not child.ready.poll(READY_TIMEOUT_S):
            raise VoxproxyError(f"{child.name} did not start within {READY_TIMEOUT_S:.0f} s")
        error = self._take_first(child)
        if isinstance(error, OSError):
            raise error  # (a port in use, a path not writable: the command says it in a line)
        if error is not None:
            raise ConfigError(f"{child.name} could not start: {error}")

    def _take_first(self, child: Child) -> str | OSError | None:
        """Read ``child``'s first message: it is up (None), or why it could not start (the
        operating system's error as the child met it, when that was one)."""
        assert child.ready is not None
        try:
            msg: dict[str, Any] = child.ready.recv()
        except (EOFError, OSError):
            return "it exited while starting"
        if isinstance(msg.get("errno"), int):
            return OSError(msg["errno"], str(msg.get("strerror") or msg.get("error")))
        if "error" in msg:
            return str(msg["error"])
        child.up = True
        child.pid = int(msg.get("pid", child.pid))
        child.ports = {k: msg.get(k) for k in ("metrics", "events")}
        self._tell_front(child)
        return None

    def _tell_front(self, child: Child) -> None:
        if child.index < 0 or self._updates is None:
            return
        with contextlib.suppress(OSError):  # the front is gone: a new one is told all
            self._updates.send(child.view())

    # -- serve ------------------------------------------------------------------------

    def run(self) -> None:
        """Supervise until SIGTERM or SIGINT, then drain."""
        signal.set_wakeup_fd(self._wake_w)  # first: a signal from now on wakes the select
        for sig in SIGNALS:
            signal.signal(sig, self._on_signal)
        pids = ", ".join(str(w.pid) for w in self.workers)
        log_started(
            self.config, self.policy, self.port, f" ({len(self.workers)} workers, pids {pids})"
        )
        while not self.stopping:
            self._turn()
        self._drain()

    def _on_signal(self, signum: int, frame: object) -> None:
        del signum, frame
        self.stopping = True

    def _turn(self) -> None:
        """Wait for something to happen (an exit, a first message, a signal, a restart
        due), then see to it."""
        now = time.monotonic()
        due = [c.restart_at for c in self.children if c.restart_at is not None]
        timeout = max(0.0, min(due) - now) if due else None
        watched: list[Any] = [self._wake_r]
        for c in self.children:
            if c.process is not None:
                watched.append(c.process.sentinel)
                if not c.up and c.ready is not None:
                    watched.append(c.ready)
        with contextlib.suppress(InterruptedError):
            select.select(watched, [], [], timeout)
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 512):
                pass
        if self.stopping:
            return
        now = time.monotonic()
        for c in self.children:
            self._see_to(c, now)

    def _see_to(self, child: Child, now: float) -> None:
        process = child.process
        if process is not None and not child.up and child.ready is not None:
            if child.ready.poll():
                error = self._take_first(child)
                if error is not None:
                    log.error("%s (pid %d) could not start: %s", child.name, child.pid, error)
                    process.kill()
                elif child.policy.quick_exits:
                    log.info("%s started again (pid %d)", child.name, child.pid)
            elif now - child.started_at > READY_TIMEOUT_S:
                log.error(
                    "%s (pid %d) did not start in %.0f s", child.name, child.pid, READY_TIMEOUT_S
                )
                process.kill()
        if process is not None and not process.is_alive():
            self._exited(child, now)
        if child.process is None and child.restart_at is not None and now >= child.restart_at:
            self._spawn(child)

    def _exited(self, child: Child, now: float) -> None:
        """``child`` exited unasked: its calls' receipts, and its replacement."""
        assert child.process is not None
        child.process.join()
        code = child.process.exitcode
        if child.ready is not None:
            child.ready.close()
        child.process, child.ready, child.up = None, None, False
        lived = now - child.started_at
        delay = child.policy.delay_s(lived)
        how = (
            f"was killed by signal {-code}"
            if code is not None and code < 0
            else f"exited (code {code})"
        )
        when = (
            "now"
            if delay == 0
            else f"in {delay:.0f} s ({child.policy.quick_exits} quick exits in a row)"
        )
        log.error(
            "%s (pid %d) %s after %.0f s; starting it again %s",
            child.name,
            child.pid,
            how,
            lived,
            when,
        )
        child.restart_at = now + delay
        if child.index < 0 and self._updates is not None:
            self._updates.close()  # the next front is given the workers' state as it starts
            self._updates = None
        elif delay > 0:
            self._recover(child)  # its replacement waits: the receipts do not
        self._tell_front(child)
        if delay == 0:
            self._spawn(child)

    def _recover(self, child: Child) -> None:
        try:
            n = recover_journal(self.config, self.policy, child.index)
        except Exception:
            log.exception("could not write the receipts of %s's calls", child.name)
            return
        if n:
            log.warning(
                "%s's %d call(s) in progress: receipts written (proxy_crashed)", child.name, n
            )

    # -- stop -------------------------------------------------------------------------

    def _drain(self) -> None:
        """Let every worker drain its calls (SIGTERM), wait for them, then stop the front."""
        self.claim.close()  # a successor may take the address while the calls drain
        running = [w for w in self.workers if w.process is not None]
        log.info(
            "shutting down: %d worker(s) drain their calls for up to %.0f s",
            len(running),
            self.config.drain_timeout_s,
        )
        self._stop(running, self.config.drain_timeout_s + STOP_SLACK_S)
        for w in running:
            assert w.process is not None
            if w.process.exitcode != 0 and self.config.receipts is not None:
                self._recover(w)
        codes = {w.index: w.process.exitcode for w in running if w.process is not None}
        if any(code != 0 for code in codes.values()):
            log.warning("worker exit codes: %s", ", ".join(f"{i}: {c}" for i, c in codes.items()))
        if self.front is not None and self.front.process is not None:
            self._stop([self.front], 5.0)
        os.close(self._alive_w)

    def _stop(self, children: list[Child], wait_s: float) -> None:
        """SIGTERM each of ``children``; SIGKILL what still runs after ``wait_s``."""
        for c in children:
            assert c.process is not None
            if c.process.is_alive() and c.process.pid is not None:
                os.kill(c.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + wait_s
        for c in children:
            assert c.process is not None
            c.process.join(max(0.0, deadline - time.monotonic()))
            if c.process.is_alive():
                c.process.kill()
                c.process.join()

    def terminate(self) -> None:
        """Stop whatever child still runs (a failed start): SIGTERM, then SIGKILL."""
        running = [c for c in self.children if c.process is not None]
        self._stop(running, 5.0)
