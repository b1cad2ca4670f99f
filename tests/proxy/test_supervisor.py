"""voxproxy.proxy.supervisor: the parent of ``voxproxy proxy --workers N``.

Its decisions, on handed-in times and fake children (no fork, no signal): how long a
process that keeps exiting waits before it is started again, what a worker is configured
with, how a child's first message is read, what happens when a child exits unasked (its
calls' receipts, its replacement, the front told), and a worker's log lines tagged with
its number. The real processes: tests/proxy/test_workers.py.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import voxproxy.proxy.supervisor as sup
from voxproxy.proxy.front import DOWN, STARTING, UP, WorkerView
from voxproxy.proxy.journals import worker_journal
from voxproxy.proxy.server import EventsConfig, ServeConfig
from voxproxy.proxy.supervisor import Child, RestartPolicy, Supervisor
from voxproxy.proxy.websocket import ProxyConfig
from voxproxy.receipts.policy import load_policy
from voxproxy.telemetry import TelemetryConfig
from voxproxy.transports.websocket import RelayConfig

TOKEN = "supervisor-test-token-0123456789"
NO_CLAIM: Any = None  # the address claim and reserved socket: only closed in a child


def _set(obj: object, **fields: Any) -> None:
    """Hand a child or the supervisor its fakes (a process, a pipe) without forking."""
    for name, value in fields.items():
        setattr(obj, name, value)


def _config(receipts: Path | None, *, front: bool = True, workers: int = 2) -> ServeConfig:
    return ServeConfig(
        ProxyConfig(RelayConfig("ws://127.0.0.1:1"), secret=b"s"),
        listen=("0.0.0.0", 8765),
        receipts=receipts,
        workers=workers,
        telemetry=TelemetryConfig(metrics_listen=("0.0.0.0", 9464) if front else None),
        events=EventsConfig(TOKEN, ("0.0.0.0", 9000)) if front else None,
    )


# -- restarts -------------------------------------------------------------------------------


def test_a_process_that_keeps_exiting_is_started_again_ever_later_never_in_a_spin() -> None:
    policy = RestartPolicy(first_s=1.0, max_s=30.0, stable_s=60.0)
    # Killed once after a long run: at once. Then crashing as it starts: 1, 2, 4 ... 30 s.
    delays = [policy.delay_s(3600.0)] + [policy.delay_s(0.1) for _ in range(8)]
    assert delays == [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    # A run of a minute or more puts it back to "at once".
    assert policy.delay_s(60.0) == 0.0
    assert policy.delay_s(5.0) == 1.0
    # The very first exit is at once, however short the run (a kill -9 of a new worker).
    assert RestartPolicy().delay_s(0.5) == 0.0


# -- a worker's configuration ---------------------------------------------------------------


def test_a_worker_serves_the_shared_port_alone_with_its_listeners_on_loopback(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path / "r.jsonl")
    policy = load_policy(None)
    worker = sup._worker_config(config, policy, 1, 40001)
    assert worker.workers == 1 and worker.reuse_port
    assert worker.listen == ("0.0.0.0", 40001)
    assert worker.telemetry.metrics_listen == ("127.0.0.1", 0)  # the front serves 9464
    assert worker.events is not None and worker.events.listen == ("127.0.0.1", 0)
    assert worker.events.token == TOKEN
    assert worker.policy is policy
    assert worker.journal == worker_journal(tmp_path / "r.jsonl", 1)
    assert sup._worker_config(config, policy, 0, 40001).journal == worker_journal(
        tmp_path / "r.jsonl", 0
    )


def test_a_worker_without_receipts_file_or_front_listeners_gets_none() -> None:
    worker = sup._worker_config(_config(None, front=False), load_policy(None), 0, 1)
    assert worker.journal is None
    assert worker.telemetry.metrics_listen is None and worker.events is None


def test_a_workers_log_lines_begin_with_its_number_once() -> None:
    tag = sup._WorkerTag(3)
    record = logging.LogRecord("voxproxy", logging.INFO, __file__, 1, "call %s", ("c",), None)
    assert tag.filter(record) and tag.filter(record)  # a second handler sees it again
    assert record.getMessage() == "worker 3: call c"


# -- children -------------------------------------------------------------------------------


def test_a_child_is_named_and_seen_by_the_front_as_up_starting_or_down() -> None:
    assert Child(-1).name == "the front" and Child(2).name == "worker 2"
    child = Child(1, pid=7, ports={"metrics": 5, "events": 6}, restart_at=12.0)
    assert child.view() == WorkerView(1, 7, 5, 6, DOWN, 12.0)
    _set(child, process=object())
    assert child.view().state == STARTING
    child.up = True
    assert child.view().state == UP


class FakeReady:
    """A child's first-message pipe: one message, or EOF."""

    def __init__(self, message: dict[str, Any] | None) -> None:
        self.message = message
        self.closed = False

    def poll(self, timeout: float = 0.0) -> bool:
        del timeout
        return True

    def recv(self) -> dict[str, Any]:
        if self.message is None:
            raise EOFError
        return self.message

    def close(self) -> None:
        self.closed = True


class FakeUpdates:
    def __init__(self) -> None:
        self.sent: list[WorkerView] = []

    def send(self, view: WorkerView) -> None:
        self.sent.append(view)

    def close(self) -> None:
        pass


@dataclass
class FakeProcess:
    exitcode: int | None
    alive: bool = False
    joined: int = 0

    def join(self, timeout: float | None = None) -> None:
        del timeout
        self.joined += 1

    def is_alive(self) -> bool:
        return self.alive

    def kill(self) -> None:
        self.alive = False


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[Supervisor]:
    s = Supervisor(_config(tmp_path / "r.jsonl"), load_policy(None), 40001, NO_CLAIM, NO_CLAIM)
    yield s
    for fd in (s._alive_r, s._alive_w, s._wake_r, s._wake_w):
        os.close(fd)


def test_the_supervisor_starts_a_front_only_when_it_has_something_to_serve(
    tmp_path: Path,
) -> None:
    s = Supervisor(_config(None, front=False, workers=3), load_policy(None), 1, NO_CLAIM, NO_CLAIM)
    try:
        assert [c.index for c in s.children] == [0, 1, 2] and s.front is None
    finally:
        for fd in (s._alive_r, s._alive_w, s._wake_r, s._wake_w):
            os.close(fd)


def test_a_childs_first_message_says_it_is_up_or_why_it_could_not_start(
    supervisor: Supervisor,
) -> None:
    updates = FakeUpdates()
    _set(supervisor, _updates=updates)
    child = supervisor.workers[1]
    _set(child, ready=FakeReady({"pid": 4242, "metrics": 5001, "events": 5002}))
    assert supervisor._take_first(child) is None
    assert (child.up, child.pid, child.ports) == (True, 4242, {"metrics": 5001, "events": 5002})
    assert updates.sent[-1] == WorkerView(1, 4242, 5001, 5002, UP, None)

    child = supervisor.workers[0]
    in_use = {"error": "OSError: in use", "errno": errno.EADDRINUSE, "strerror": "Address in use"}
    _set(child, ready=FakeReady(in_use))
    error = supervisor._take_first(child)
    assert isinstance(error, OSError) and error.errno == errno.EADDRINUSE
    assert error.strerror == "Address in use" and not child.up
    _set(child, ready=FakeReady({"error": "ValueError: bad"}))
    assert supervisor._take_first(child) == "ValueError: bad"
    _set(child, ready=FakeReady(None))
    assert supervisor._take_first(child) == "it exited while starting"
    assert len(updates.sent) == 1  # only the child that came up was told


def test_the_front_is_told_of_workers_never_of_itself(supervisor: Supervisor) -> None:
    updates = FakeUpdates()
    _set(supervisor, _updates=updates)
    assert supervisor.front is not None
    supervisor._tell_front(supervisor.front)
    supervisor._tell_front(supervisor.workers[0])
    assert [v.index for v in updates.sent] == [0]


class Recorder:
    """Stands in for the supervisor's fork and the journal recovery."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, s: Supervisor) -> None:
        self.spawned: list[int] = []
        self.recovered: list[int] = []
        monkeypatch.setattr(s, "_spawn", lambda c: self.spawned.append(c.index))
        monkeypatch.setattr(
            sup, "recover_journal", lambda cfg, pol, i: self.recovered.append(i) or 2
        )


def test_a_worker_that_exits_at_once_is_replaced_at_once_its_journal_left_to_its_successor(
    supervisor: Supervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Recorder(monkeypatch, supervisor)
    updates = FakeUpdates()
    _set(supervisor, _updates=updates)
    child = supervisor.workers[1]
    ready = FakeReady(None)
    _set(child, process=FakeProcess(-9), ready=ready, up=True, started_at=0.0)
    supervisor._exited(child, now=3600.0)  # after an hour: a first exit
    assert (child.process, child.ready, child.up) == (None, None, False)
    assert ready.closed
    assert child.restart_at == 3600.0
    assert rec.spawned == [1] and rec.recovered == []  # the new worker reads the journal
    assert updates.sent[-1].state == DOWN


def test_a_worker_that_keeps_exiting_waits_and_its_calls_get_receipts_meanwhile(
    supervisor: Supervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Recorder(monkeypatch, supervisor)
    child = supervisor.workers[0]
    child.policy.quick_exits = 1  # it has exited once already
    _set(child, process=FakeProcess(1), started_at=100.0)
    supervisor._exited(child, now=100.5)
    assert child.restart_at == 101.5  # first_s after a quick exit
    assert rec.spawned == [] and rec.recovered == [0]  # receipts now, not when it restarts
    supervisor._see_to(child, now=101.4)
    assert rec.spawned == []  # not yet due
    supervisor._see_to(child, now=101.5)
    assert rec.spawned == [0]


def test_a_front_that_exits_is_replaced_and_the_pipe_to_it_dropped(
    supervisor: Supervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Recorder(monkeypatch, supervisor)
    _set(supervisor, _updates=FakeUpdates())
    front = supervisor.front
    assert front is not None
    _set(front, process=FakeProcess(1))
    supervisor._exited(front, now=10.0)
    assert supervisor._updates is None  # the next front learns every worker as it starts
    assert rec.spawned == [-1] and rec.recovered == []


def test_a_child_that_says_it_could_not_start_is_killed(
    supervisor: Supervisor, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    Recorder(monkeypatch, supervisor)
    child = supervisor.workers[0]
    process = FakeProcess(None, alive=True)
    _set(child, process=process, ready=FakeReady({"error": "ConfigError: no"}))
    with caplog.at_level(logging.ERROR, "voxproxy"):
        supervisor._see_to(child, now=child.started_at + 1.0)
    assert not process.alive
    assert "worker 0 (pid 0) could not start: ConfigError: no" in caplog.text


def test_a_child_silent_past_the_ready_timeout_is_killed(
    supervisor: Supervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    Recorder(monkeypatch, supervisor)
    child = supervisor.workers[0]
    process = FakeProcess(None, alive=True)

    class Silent(FakeReady):
        def poll(self, timeout: float = 0.0) -> bool:
            return False

    _set(child, process=process, ready=Silent(None))
    supervisor._see_to(child, now=child.started_at + sup.READY_TIMEOUT_S / 2)
    assert process.alive  # still within its start
    supervisor._see_to(child, now=child.started_at + sup.READY_TIMEOUT_S + 1)
    assert not process.alive
