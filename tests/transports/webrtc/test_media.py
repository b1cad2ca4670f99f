"""The outbound track: packets leave as they came, each at its arrival plus a constant."""

from __future__ import annotations

import fractions

from voxproxy.transports.webrtc import LATENCY_BIN_NS, OutboundTrack

MS = 1_000_000
TB = fractions.Fraction(1, 48000)


class FakeClock:
    """Monotonic ns that move only when the track sleeps."""

    def __init__(self, t: int) -> None:
        self.t = t
        self.slept: list[int] = []

    def __call__(self) -> int:
        return self.t

    async def sleep(self, s: float) -> None:
        self.slept.append(round(s * 1e9))
        self.t += round(s * 1e9)


async def _departures(track: OutboundTrack, clock: FakeClock, n: int) -> list[int]:
    out = []
    for _ in range(n):
        await track.recv()
        out.append(clock())
    return out


async def test_packets_flushed_together_leave_as_they_came() -> None:
    """Three packets that arrived 20 ms apart reach the track together (the loop was
    blocked 45 ms): each leaves at its arrival plus the pacing constant, 20 ms apart,
    not back to back."""
    clock = FakeClock(1_000 * MS)
    track = OutboundTrack(pace_ns=60 * MS, clock=clock, sleep=clock.sleep)
    arrivals = [clock() - 45 * MS, clock() - 25 * MS, clock() - 5 * MS]
    for k, t in enumerate(arrivals):
        track.push(bytes([k]), k * 960, TB, t)
    assert await _departures(track, clock, 3) == [t + 60 * MS for t in arrivals]


async def test_a_packet_later_than_the_constant_leaves_at_once() -> None:
    """A stall longer than the constant cannot be undone: such a packet leaves at once,
    and the next, still in time, at its own arrival plus the constant."""
    clock = FakeClock(1_000 * MS)
    track = OutboundTrack(pace_ns=10 * MS, clock=clock, sleep=clock.sleep)
    track.push(b"a", 0, TB, clock() - 30 * MS)  # 30 ms late already
    track.push(b"b", 960, TB, clock() - 5 * MS)
    assert await _departures(track, clock, 2) == [1_000 * MS, 1_005 * MS]
    assert (track.late, track.late_max_ns) == (1, 20 * MS)  # what the constant could not absorb


async def test_without_arrival_or_constant_nothing_waits() -> None:
    clock = FakeClock(1_000 * MS)
    paced = OutboundTrack(pace_ns=10 * MS, clock=clock, sleep=clock.sleep)
    paced.push(b"a", 0, TB)  # the mock agent's and the load generator's own audio
    unpaced = OutboundTrack(clock=clock, sleep=clock.sleep)
    unpaced.push(b"b", 0, TB, clock() - 1 * MS)
    await paced.recv()
    await unpaced.recv()
    assert clock.slept == [] and clock() == 1_000 * MS


async def test_a_timer_that_fires_early_is_waited_out() -> None:
    """uvloop's timers count from the loop's cached time: one may fire early by as long
    as the loop's turn ran. The packet still leaves at its due time."""
    clock = FakeClock(1_000 * MS)

    async def early_sleep(s: float) -> None:
        clock.slept.append(round(s * 1e9))
        clock.t += round(s * 1e9) // 3  # fires after a third of the delay asked

    track = OutboundTrack(pace_ns=9 * MS, clock=clock, sleep=early_sleep)
    track.push(b"a", 0, TB, clock())
    await track.recv()
    assert clock() >= 1_009 * MS - 500_000 and len(clock.slept) > 1


async def test_a_packet_held_by_the_loop_is_late_against_the_stream() -> None:
    """Without pacing a packet leaves when the loop gets to it: one held 25 ms behind the
    packet before it is counted late (the relay's own) and told (the stream's)."""
    clock = FakeClock(1_000 * MS)
    track = OutboundTrack(clock=clock, sleep=clock.sleep)
    told: list[tuple[int, int]] = []
    track.on_late = lambda t, late: told.append((t, late))
    track.push(b"a", 0, TB, clock())
    await track.recv()
    clock.t += 45 * MS  # the loop was held: b (20 ms later) and c (40 ms) waited
    track.push(b"b", 960, TB, 1_020 * MS)
    track.push(b"c", 1920, TB, 1_040 * MS)
    await _departures(track, clock, 2)
    assert told == [(1_045 * MS, 25 * MS)]  # c, 5 ms behind, is within LATE_NS
    assert track.late == 1


async def test_a_sender_s_burst_ahead_of_time_makes_the_packets_after_it_late() -> None:
    """A sender that catches up in a burst sends packets ahead of their timestamps: the
    far end's buffer then sees the next on-time packets late by as much, though the relay
    forwarded every one at once."""
    clock = FakeClock(1_000 * MS)
    track = OutboundTrack(clock=clock, sleep=clock.sleep)
    told: list[tuple[int, int]] = []
    track.on_late = lambda t, late: told.append((t, late))
    for k in range(5):  # timestamps 0-80 ms, all sent at once
        track.push(bytes([k]), k * 960, TB, clock())
    await _departures(track, clock, 5)
    assert told == [] and track.late == 0
    clock.t += 100 * MS
    track.push(b"n", 5 * 960, TB, clock())  # on time for its timestamp (100 ms)
    await track.recv()
    assert told == [(1_100 * MS, 80 * MS)] and track.late == 0


class FakeDirect:
    """Stands in for rtpout.DirectRtp: sends while ``ready``, records what it sent."""

    def __init__(self, ready: bool) -> None:
        self.ready = ready
        self.sent = 0
        self.got: list[tuple[bytes, int, int]] = []

    def send(self, payload: bytes, timestamp: int, payload_type: int) -> bool:
        if not self.ready:
            return False
        self.got.append((payload, timestamp, payload_type))
        self.sent += 1
        return True


async def test_a_direct_leg_sends_at_once_and_times_the_departure() -> None:
    """A relay's leg writes each packet in the step that has it: nothing is queued for
    aiortc's sender, and the packet's forwarding delay is arrival to that moment."""
    clock = FakeClock(1_000 * MS)
    track = OutboundTrack(clock=clock, sleep=clock.sleep)
    track.direct = direct = FakeDirect(ready=True)  # type: ignore[assignment]
    track.departures = []
    track.push(b"a", 960, TB, clock() - 3 * MS, payload_type=111)
    assert direct.got == [(b"a", 960, 111)] and track._queue.empty()
    assert track.sent == 1 and track.forwarded.n == 1
    assert track.departures == [(20 * MS, 997 * MS, 1_000 * MS)]  # (timestamp, in, out)
    assert track.latency_hist[3 * MS // LATENCY_BIN_NS] == 1


async def test_one_stream_is_never_sent_by_both_paths() -> None:
    """aiortc's sender numbers its packets from its own random origin: a stream it began
    stays its own (the direct path is not taken once a packet was queued), and a stream
    the direct path began drops what it cannot send rather than queue it."""
    clock = FakeClock(1_000 * MS)
    queued = OutboundTrack(clock=clock, sleep=clock.sleep)
    queued.direct = late = FakeDirect(ready=False)  # type: ignore[assignment]
    queued.push(b"a", 0, TB, clock(), payload_type=111)  # not ready: aiortc's sender's
    late.ready = True
    queued.push(b"b", 960, TB, clock(), payload_type=111)
    assert late.got == [] and queued._queue.qsize() == 2

    direct = OutboundTrack(clock=clock, sleep=clock.sleep)
    direct.direct = first = FakeDirect(ready=True)  # type: ignore[assignment]
    direct.push(b"a", 0, TB, clock(), payload_type=111)
    first.ready = False  # its DTLS transport closed, say
    direct.push(b"b", 960, TB, clock(), payload_type=111)
    assert [g[0] for g in first.got] == [b"a"] and direct._queue.empty()
    assert (direct.sent, direct.dropped) == (1, 1)
