"""What a call's arrival stamps are worth (arrivals.py): exact stamps leave nothing
unknown, a queued message its bound, a read without a kernel stamp the loop's lag; and
the forwarding delays' histogram answers its quantiles from above."""

from __future__ import annotations

from collections.abc import Callable

from voxproxy.core.timebase import NS_PER_MS
from voxproxy.transports.websocket.arrivals import ArrivalLog, ForwardDelays

S = 1_000_000_000
LAG = 80 * NS_PER_MS  # the loop's longest block near the edge, as its monitor saw it


def flat(lag_ns: int) -> Callable[[int, int], int]:
    """A loop that blocked ``lag_ns`` over any interval."""
    return lambda start_ns, end_ns: lag_ns


def test_kernel_stamps_leave_nothing_unknown_whatever_the_loop_did() -> None:
    log = ArrivalLog()
    assert log.error_between(S, 2 * S, flat(LAG)) == 0


def test_a_queued_message_leaves_its_bound_near_it_and_only_there() -> None:
    """... and never more than the loop's lag near it (it waited in the socket only while
    the loop did not come round to it)."""
    log = ArrivalLog()
    log.note_bounded(5 * S, 30 * NS_PER_MS, 5 * S)
    log.note_bounded(5 * S + 10 * NS_PER_MS, 12 * NS_PER_MS, 5 * S + 10 * NS_PER_MS)
    log.note_bounded(9 * S, 100_000, 9 * S)  # below the floor: not kept
    assert (
        log.error_between(5 * S - 100 * NS_PER_MS, 5 * S + 350 * NS_PER_MS, flat(LAG))
        == 30 * NS_PER_MS
    )
    assert log.error_between(5 * S, 5 * S + 1, flat(20 * NS_PER_MS)) == 20 * NS_PER_MS
    assert log.error_between(7 * S, 8 * S, flat(LAG)) == 0
    assert log.error_between(9 * S - 1, 9 * S + 1, flat(LAG)) == 0


def test_the_block_that_kept_a_read_waiting_counts_however_late_it_was_seen() -> None:
    """A burst's first message stamped with the time of the read's last bytes, and read
    at 5.030 s: a block of the loop over 5.025-5.045 s overlaps its wait, though not the
    interval asked (an agent's onset: only the stamps at or before it place it, so the
    interval ends 1 ms after it). The message's bound counts up to that block."""
    blocks = [(5 * S + 45 * NS_PER_MS, 20 * NS_PER_MS)]  # (seen at, length)

    def lag(start_ns: int, end_ns: int) -> int:
        return max((n for t, n in blocks if t >= start_ns and t - n <= end_ns), default=0)

    stamp = 5 * S + 20 * NS_PER_MS
    asked = (stamp - 100 * NS_PER_MS, stamp + NS_PER_MS)
    log = ArrivalLog()
    log.note_bounded(stamp, 2 * S, 5 * S + 30 * NS_PER_MS)  # (the previous read: 2 s back)
    assert lag(*asked) == 0  # the block lies after the interval
    assert log.error_between(*asked, lag) == 20 * NS_PER_MS
    # A message read before the loop blocked waited for nothing.
    early = ArrivalLog()
    early.note_bounded(stamp, 2 * S, stamp + NS_PER_MS)
    assert early.error_between(*asked, lag) == 0


def test_a_read_without_a_kernel_stamp_carries_the_loops_lag() -> None:
    log = ArrivalLog()
    for k in range(50):  # a TLS leg: every read at the loop's time, 20 ms apart
        log.note_read_time(3 * S + k * 20 * NS_PER_MS)
    assert log.read_times
    assert log.error_between(3 * S + 500 * NS_PER_MS, 3 * S + 600 * NS_PER_MS, flat(LAG)) == LAG
    assert log.error_between(10 * S, 11 * S, flat(LAG)) == 0


def test_forward_delays_quantiles_are_their_buckets_upper_edges() -> None:
    fd = ForwardDelays()
    assert fd.quantile_ms(0.5) is None
    for _ in range(90):
        fd.add(150_000)  # 0.15 ms: the 0.2 ms bucket
    for _ in range(10):
        fd.add(12 * NS_PER_MS)  # the 15 ms bucket
    assert fd.n == 100 and fd.max_ns == 12 * NS_PER_MS
    assert fd.quantile_ms(0.5) == 0.2
    assert fd.quantile_ms(0.95) == 12.0  # (the bucket's edge is above the largest seen)
    fd.add(-5)  # a clock read a hair early counts as no delay
    assert fd.counts[0] == 1
