"""One TCP connection of a call: the :class:`Leg` that hands its reads to its relay.

A leg reads its socket kernel-stamped where it can (``transports.stamped``), takes its
share of each turn of the event loop and no more, and pauses its reading for a reason
(backpressure, fairness, rate) until released for every one. :mod:`.legs` holds the
call around two legs; :mod:`.relay` what passes between them.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import sys
import time
import traceback
from typing import Protocol, cast

from voxproxy.core.events import Direction
from voxproxy.transports.stamped import StampedReader, attach
from voxproxy.transports.websocket.arrivals import ArrivalLog
from voxproxy.transports.websocket.config import WRITE_HIGH_WATER, RelayConfig
from voxproxy.transports.websocket.frames import FrameCutter

log = logging.getLogger("voxproxy.transport")

# A read bigger than this is handed to the relay in slices of it, and within a budget
# of time per turn of the event loop (Leg): a real-time call's reads are smaller.
READ_SLICE = 4096
TURN_BUDGET_NS = 2_000_000


def log_failure(message: str) -> None:
    """Log the exception being handled with its traceback but without its text.

    A bug in measurement may quote what it choked on (audio, a transcript, a header)
    in its message; the log keeps the type and where it was raised, never that.
    """
    exc = sys.exc_info()[1]
    if exc is None:
        log.error("%s", message)
        return
    where = "".join(traceback.format_tb(exc.__traceback__))
    log.error("%s: %s (message withheld)\n%s", message, type(exc).__name__, where.rstrip())


class LegMode(enum.Enum):
    """How the relay reads a leg's bytes (relay.py, "Reading a leg")."""

    HEAD = "head"  # the handshake's HTTP head, up to its blank line
    FRAMES = "frames"  # whole frames: data frames spliced, the rest to the protocol
    PROTOCOL = "protocol"  # everything through websockets' protocol, as it comes


class LegEvents(Protocol):
    """What a leg tells the call it belongs to (the :class:`~.relay.Relay`)."""

    loop: asyncio.AbstractEventLoop  # (a leg takes the rest of a big read up on it)
    config: RelayConfig
    arrivals: ArrivalLog

    def leg_made(self, leg: Leg) -> None: ...

    def data(self, leg: Leg, data: bytes) -> None: ...

    def eof(self, leg: Leg) -> None: ...

    def lost(self, leg: Leg) -> None: ...

    def backpressure(self, leg: Leg, paused: bool) -> None: ...


# Why a leg's reading is paused (bits of ``Leg.paused``).
BACKPRESSURE = 1  # the other leg's writes are full (Relay.backpressure)
FAIRNESS = 2  # the leg had its share of this turn of the loop (Leg.data_received)
RATE = 4  # the leg's peer sent max_messages_per_s this second (CallLegs._over_rate)


class Leg(asyncio.Protocol):
    """One TCP connection of a call; forwards everything to its relay.

    A leg takes its share of a turn of the event loop, no more, so that a peer writing
    faster than the proxy can read never holds the other calls up. A read of up to
    :data:`READ_SLICE` bytes (most reads of a real-time call) goes to the relay as it
    comes. A bigger one (a peer ahead of the proxy, or a big message) goes to the relay
    a slice at a time until :data:`TURN_BUDGET_NS` has been spent; then reading is
    paused and the rest waits for the loop's next turn (every other connection's reads
    and timers run in between), and so on until the read is done; reading resumes on
    the turn after that. Without the pause, uvloop (libuv reads a busy socket up to 32
    times in a row) handed one flooding connection megabytes per turn of the loop, and
    asyncio a quarter of a megabyte.

    Each read is stamped with its arrival at the host (:attr:`rx_ns`): the kernel's
    receive time where :func:`~voxproxy.transports.stamped.attach` reads the socket,
    else the moment the loop read it. What a message of the read may be off by is
    :attr:`rx_bound_ns` unless it ends the read (:attr:`rx_exact` and :attr:`rx_end`:
    ``relay.Relay._frames``).
    """

    __slots__ = (
        "cutter",
        "direction",
        "held",
        "mode",
        "paused",
        "reader",
        "relay",
        "rx_bound_ns",
        "rx_end",
        "rx_exact",
        "rx_ns",
        "rx_read_ns",
        "tail",
        "transport",
        "turn_due",
    )

    def __init__(self, relay: LegEvents | None, direction: Direction) -> None:
        self.relay = relay
        self.direction = direction  # the direction of the messages this leg *receives*
        self.transport: asyncio.Transport | None = None
        # How the relay reads this leg (relay.py, "Reading a leg"): its handshake head
        # first, then whole frames, or everything through websockets' protocol.
        self.mode = LegMode.HEAD
        self.tail = b""  # the head's last bytes so far (its end may span two reads)
        self.cutter: FrameCutter | None = None  # cuts the leg's frames in LegMode.FRAMES
        self.held = b""  # the rest of a big read, for the loop's next turn (data_received)
        self.paused = 0  # why reading is paused: BACKPRESSURE | FAIRNESS | RATE, or 0
        self.turn_due = False  # _next_turn is on the loop's next turn
        self.reader: StampedReader | None = None  # reads the socket, kernel-stamped
        self.rx_ns = 0  # the read in hand: when it reached the host (monotonic ns)
        self.rx_read_ns = 0  # ... when the loop read it
        self.rx_bound_ns = 0  # ... how late its stamp may be for a message not ending it
        self.rx_exact = False  # ... its stamp is its last byte's (kernel-stamped, drained)
        self.rx_end = True  # the bytes handed to the relay now end the read

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but quack alike.
        self.transport = transport = cast(asyncio.Transport, transport)
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        if self.relay is not None:
            if self.relay.config.kernel_stamps:
                self.reader = attach(transport, self)
            self.relay.leg_made(self)

    def data_received(self, data: bytes) -> None:
        relay = self.relay
        if relay is None:
            return
        reader = self.reader
        if reader is not None and reader.handing and reader.kernel:
            self.rx_ns = t = reader.rx_ns
            self.rx_read_ns = reader.read_ns
            self.rx_exact = reader.drained
            self.rx_bound_ns = t - reader.lo_ns
            relay.arrivals.kernel[self.direction] += 1
        else:  # (stamped now: as late as the loop ran)
            self.rx_ns = self.rx_read_ns = t = time.monotonic_ns()
            self.rx_exact = False
            self.rx_bound_ns = 0
            relay.arrivals.note_read_time(t)
            relay.arrivals.read_time[self.direction] += 1
        if self.held:  # (not while paused, but should a read come: after what waits)
            self.held += data
            self.rx_exact = False
        elif len(data) <= READ_SLICE:
            self.rx_end = True
            relay.data(self, data)
        else:
            self._take(data)

    def _take(self, data: bytes) -> None:
        """A big read (or what is left of it), a slice at a time, within the turn's
        budget; then reading pauses until the loop's next turn."""
        relay = self.relay
        assert relay is not None
        start = time.perf_counter_ns()
        n = len(data)
        pos = 0
        while pos < n:
            end = pos + READ_SLICE
            self.rx_end = end >= n  # (the slice ends the read)
            relay.data(self, data[pos:end])
            pos = end
            if self.paused & RATE or self.relay is None:
                break  # (over the rate: the rest waits for the next second)
            if time.perf_counter_ns() - start >= TURN_BUDGET_NS:
                break
        self.held = data[pos:] if pos < n else b""
        self.hold(FAIRNESS)
        self._turn_later()

    def _turn_later(self) -> None:
        if not self.turn_due and self.relay is not None:
            self.turn_due = True
            self.relay.loop.call_soon(self._next_turn)

    def _next_turn(self) -> None:
        self.turn_due = False
        if self.relay is None:
            self.held = b""
            return
        if self.paused & RATE:
            return  # (release(RATE) takes the rest up)
        if self.held:
            self._take(self.held)
        else:
            self.release(FAIRNESS)

    def reading(self) -> bool:
        """Whether the leg's socket is being read now (by its reader, or its transport)."""
        if self.reader is not None:
            return self.reader.reading
        return self.transport is not None and self.transport.is_reading()

    def backpressured(self, paused: bool) -> None:
        """The other leg's writes are full (``paused``), or drained again."""
        if paused:
            self.hold(BACKPRESSURE)
        else:
            self.release(BACKPRESSURE)

    def hold(self, why: int) -> None:
        """Pause reading (``why``: BACKPRESSURE, FAIRNESS or RATE) until released for
        every reason. (The rest of a read in hand waits only for FAIRNESS and RATE.)"""
        if not self.paused:
            self._reading(False)
        self.paused |= why

    def release(self, why: int) -> None:
        if not self.paused & why:
            return
        self.paused &= ~why
        if why == RATE and self.paused & FAIRNESS:
            self._turn_later()  # the rest of the read in hand
        elif not self.paused:
            self._reading(True)

    def _reading(self, on: bool) -> None:
        """Resume (``on``) or pause the socket's reads: through the kernel-stamped reader
        where the leg has one, else its transport (not once it is closing)."""
        target: StampedReader | asyncio.Transport | None = self.reader
        if target is None:
            target = self.transport
            if target is None or target.is_closing():
                return
        if on:
            target.resume_reading()
        else:
            target.pause_reading()

    def eof_received(self) -> bool | None:
        if self.relay is not None:
            self.relay.eof(self)
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.held = b""  # (gone with the connection)
        if self.reader is not None:
            self.reader.close()  # (its copy of the socket: the peer sees it closed now)
            self.reader = None  # (it refers back to this leg)
        if self.relay is not None:
            self.relay.lost(self)

    def pause_writing(self) -> None:
        if self.relay is not None:
            self.relay.backpressure(self, True)

    def resume_writing(self) -> None:
        if self.relay is not None:
            self.relay.backpressure(self, False)
