"""One TCP connection of a call (``voxproxy/transports/websocket/leg.py``), driven with a
fake relay and transport on the test's loop: small reads pass as they come, a big read
goes a slice at a time within a turn's budget (a fake clock spends it), reading pauses
until released for every reason, and a failure is logged without its message."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

import voxproxy.transports.websocket.leg as leg_module
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT
from voxproxy.transports.websocket.arrivals import ArrivalLog
from voxproxy.transports.websocket.config import RelayConfig
from voxproxy.transports.websocket.leg import (
    BACKPRESSURE,
    FAIRNESS,
    RATE,
    READ_SLICE,
    Leg,
    log_failure,
)


class FakeTransport:
    def __init__(self) -> None:
        self.reads: list[bool] = []  # each pause (False) and resume (True), in order
        self.limits: dict[str, Any] = {}
        self.closing = False

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.limits = {"high": high, "low": low}

    def pause_reading(self) -> None:
        self.reads.append(False)

    def resume_reading(self) -> None:
        self.reads.append(True)

    def is_reading(self) -> bool:
        return not self.reads or self.reads[-1]

    def is_closing(self) -> bool:
        return self.closing


class FakeRelay:
    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.config = RelayConfig("ws://127.0.0.1:9", kernel_stamps=False)
        self.arrivals = ArrivalLog()
        self.got: list[tuple[bytes, bool]] = []  # (bytes, rx_end)
        self.told: list[str] = []
        self.rate_after: int | None = None  # hold RATE after this many slices

    def leg_made(self, leg: Leg) -> None:
        self.told.append("made")

    def data(self, leg: Leg, data: bytes) -> None:
        self.got.append((data, leg.rx_end))
        if self.rate_after is not None and len(self.got) == self.rate_after:
            leg.hold(RATE)

    def eof(self, leg: Leg) -> None:
        self.told.append("eof")

    def lost(self, leg: Leg) -> None:
        self.told.append("lost")

    def backpressure(self, leg: Leg, paused: bool) -> None:
        self.told.append(f"backpressure {paused}")


async def _leg() -> tuple[Leg, FakeRelay, FakeTransport]:
    relay = FakeRelay()
    leg = Leg(relay, CALLER_TO_AGENT)  # type: ignore[arg-type]
    transport = FakeTransport()
    leg.connection_made(transport)  # type: ignore[arg-type]
    return leg, relay, transport


@pytest.fixture
def budget_every_two_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    """perf_counter_ns runs 1 ms a reading: a turn's 2 ms budget is spent after two slices."""
    ticks = iter(range(0, 10**12, 1_000_000))
    monkeypatch.setattr(leg_module.time, "perf_counter_ns", lambda: next(ticks))


async def _turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_a_small_read_goes_to_the_relay_as_it_comes_stamped_when_read() -> None:
    leg, relay, transport = await _leg()
    assert relay.told == ["made"] and transport.limits["high"] == leg_module.WRITE_HIGH_WATER
    leg.data_received(b"x" * READ_SLICE)
    assert relay.got == [(b"x" * READ_SLICE, True)]
    assert leg.rx_ns > 0 and not leg.rx_exact and leg.rx_bound_ns == 0
    assert relay.arrivals.read_time == [1, 0] and relay.arrivals.kernel == [0, 0]
    assert transport.reads == []  # never paused


@pytest.mark.usefixtures("budget_every_two_slices")
async def test_a_big_read_goes_a_share_a_turn_with_reading_paused_until_it_is_done() -> None:
    leg, relay, transport = await _leg()
    big = bytes(range(256)) * (5 * READ_SLICE // 256) + b"tail"  # 6 slices
    leg.data_received(big)
    assert [len(d) for d, _ in relay.got] == [READ_SLICE, READ_SLICE]  # this turn's share
    assert transport.reads == [False] and leg.paused == FAIRNESS
    await _turns(1)
    assert len(relay.got) == 4
    await _turns(1)
    assert b"".join(d for d, _ in relay.got) == big
    assert [end for _, end in relay.got] == [False] * 5 + [True]  # only the last ends it
    assert transport.reads == [False]  # still paused: reading resumes on the next turn
    await _turns(1)
    assert transport.reads == [False, True] and leg.paused == 0 and leg.held == b""


@pytest.mark.usefixtures("budget_every_two_slices")
async def test_over_the_rate_the_rest_of_a_read_waits_for_the_release() -> None:
    leg, relay, transport = await _leg()
    relay.rate_after = 1
    big = b"r" * (3 * READ_SLICE)
    leg.data_received(big)
    await _turns(3)
    assert len(relay.got) == 1 and leg.paused == RATE | FAIRNESS
    relay.rate_after = None
    leg.release(RATE)
    await _turns(3)
    assert b"".join(d for d, _ in relay.got) == big and leg.paused == 0
    assert transport.reads == [False, True]


async def test_reading_resumes_only_once_released_for_every_reason() -> None:
    leg, _, transport = await _leg()
    leg.backpressured(True)
    leg.hold(RATE)
    assert transport.reads == [False] and leg.paused == BACKPRESSURE | RATE
    leg.release(FAIRNESS)  # not held: nothing changes
    leg.backpressured(False)
    assert transport.reads == [False] and leg.paused == RATE
    leg.release(RATE)
    assert transport.reads == [False, True] and leg.paused == 0
    transport.closing = True
    leg.hold(BACKPRESSURE)
    assert transport.reads == [False, True]  # a closing transport is left alone


async def test_the_relay_hears_of_eof_loss_and_write_backpressure() -> None:
    leg, relay, _ = await _leg()
    leg.held = b"rest"
    leg.pause_writing()
    leg.resume_writing()
    assert leg.eof_received() is None
    leg.connection_lost(None)
    assert relay.told == ["made", "backpressure True", "backpressure False", "eof", "lost"]
    assert leg.held == b""


async def test_a_leg_without_a_relay_drops_what_it_reads() -> None:
    leg = Leg(None, AGENT_TO_CALLER)
    transport = FakeTransport()
    leg.connection_made(transport)  # type: ignore[arg-type]
    leg.data_received(b"x" * (3 * READ_SLICE))
    assert leg.held == b"" and transport.reads == []


def test_a_failure_is_logged_with_its_type_and_place_but_not_its_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, "voxproxy.transport")
    card = "4111 " * 4  # (not on the raising line: the traceback quotes that line)
    try:
        raise ValueError(f"the caller said {card}")
    except ValueError:
        log_failure("measuring failed")
    (record,) = caplog.records
    text = record.getMessage()
    assert text.startswith("measuring failed: ValueError (message withheld)")
    assert "test_leg.py" in text and "4111" not in text
    caplog.clear()
    log_failure("no exception in hand")
    assert [r.getMessage() for r in caplog.records] == ["no exception in hand"]
