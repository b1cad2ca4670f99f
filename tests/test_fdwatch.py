"""voxproxy.fdwatch: running out of file descriptors is logged at most once per interval
(on a fake clock), the watch alarms near the limit and on EMFILE, and the readings of the
limit and of the descriptors held."""

from __future__ import annotations

import errno
import logging
import os

import pytest

import voxproxy.fdwatch as fdwatch
from voxproxy.fdwatch import FdAlarm, fd_limit, open_fds, raise_fd_limit, watch_fds


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(fdwatch.time, "monotonic", fake)
    return fake


def test_the_alarm_counts_every_hit_and_logs_once_per_interval(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    alarm = FdAlarm(every_s=10.0)
    with caplog.at_level(logging.ERROR, "voxproxy.fds"):
        alarm.hit("a")
        clock.now += 9.9
        alarm.hit("b")
        clock.now += 0.1
        alarm.hit("c")
    assert alarm.count == 3
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "(a; 1 time(s) so far)" in messages[0] and "(c; 3 time(s) so far)" in messages[1]
    assert "ulimit -n" in messages[0]


def test_open_fds_sees_a_descriptor_opened_and_closed() -> None:
    before = open_fds()
    assert before is not None and before > 0  # Linux: /proc/self/fd
    r, w = os.pipe()
    try:
        assert open_fds() == before + 2
    finally:
        os.close(r)
        os.close(w)
    assert open_fds() == before


def test_the_limit_is_a_number_or_none_and_raising_it_never_lowers_it() -> None:
    limit = fd_limit()
    assert limit is None or limit > 0
    raised = raise_fd_limit()
    assert limit is None or (raised is not None and raised >= limit)


async def test_the_watch_alarms_near_the_limit_and_on_emfile_and_ends_without_proc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Recorder(FdAlarm):
        __slots__ = ("hits",)

        def __init__(self) -> None:
            super().__init__()
            self.hits: list[str] = []

        def hit(self, what: str) -> None:
            self.hits.append(what)

    alarm = Recorder()
    readings = iter([10, 95, OSError(errno.EMFILE, "too many"), OSError(errno.EIO, "io"), None])

    def fake_open_fds() -> int | None:
        v = next(readings)
        if isinstance(v, OSError):
            raise v
        return v

    monkeypatch.setattr(fdwatch, "fd_limit", lambda: 100)
    monkeypatch.setattr(fdwatch, "open_fds", fake_open_fds)
    monkeypatch.setattr(fdwatch, "FD_ALARM", alarm)
    await watch_fds(interval_s=0.0)  # ends when the descriptors cannot be counted
    assert alarm.hits == ["95 of 100 in use", "the limit is reached"]
