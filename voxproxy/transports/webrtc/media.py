"""Media plumbing: the outbound track that sends pre-encoded packets, the RTP tap on
aiortc's receiver (arrival-stamped, no jitter buffer), and data channels with a backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from aiortc import (
    MediaStreamTrack,
    RTCDataChannel,
    RTCRtpTransceiver,
)
from aiortc.rtcrtpreceiver import StreamStatistics
from aiortc.rtp import RtcpRrPacket, RtcpSrPacket, RtpPacket
from av.packet import Packet

from voxproxy.transports.webrtc.arrival import arrival_of
from voxproxy.transports.webrtc.codecs import CodecInfo, RtpIn
from voxproxy.transports.webrtc.rtpout import DirectRtp
from voxproxy.transports.websocket.arrivals import ForwardDelays

OUT_QUEUE_PACKETS = 8  # packets a sending leg may hold (160 ms at 20 ms): a relay does not buffer


CHANNEL_BACKLOG = 256  # data channel messages held until the other side's channel opens


LATENCY_BIN_NS = 50_000  # the relay's forwarding latency histogram: 50 µs bins ...


LATENCY_BINS = 2000  # ... up to 100 ms (the last bin holds everything above)


# A packet this much later than its due time (or the stream's timeline) is late: below it,
# the loop's timers (whole milliseconds) and a receiver's jitter buffer (20 ms steps) alike.
LATE_NS = 5_000_000


# A relayed packet's lateness is held to the earliest packet of this window (by departure
# less RTP timestamp): the reference Chromium's NetEq takes for its relative delays.
BEHIND_WINDOW_NS = 2_000_000_000


# A paced packet may leave this much before its due time (not worth another timer).
EARLY_NS = 500_000


# The most a relay may hold a packet to pace it: a sending leg's queue holds 160 ms.
MAX_PACE_MS = 100.0


class OutboundTrack(MediaStreamTrack):
    """The audio a peer sends: pre-encoded packets, returned as they are pushed.

    aiortc's ``RTCRtpSender`` awaits :meth:`recv` in a loop and packs each
    ``av.Packet`` without re-encoding (its ``pts`` in ``time_base`` becomes the
    RTP timestamp), then encrypts and writes it in the same step. The queue is
    short and drops its oldest packet when full, so a stalled leg never builds up
    delay.

    A relay passes each packet's arrival time (``t_in_ns``, the kernel's). With
    ``pace_ns`` the track paces: a packet leaves at its arrival plus ``pace_ns``,
    so packets that came 20 ms apart leave 20 ms apart even when the event loop
    held them and then handed them over together (a long callback shorter than
    ``pace_ns``), at the cost of ``pace_ns`` on every packet. A packet that
    leaves more than :data:`LATE_NS` after its due time (its arrival, plus
    ``pace_ns``) is counted in :attr:`late` and :attr:`late_max_ns`: the relay's
    own lateness.

    The far end's jitter buffer grows with the lateness it sees against the
    stream's timestamps, whoever caused it (the relay, or the sender: a sender
    that catches up in a burst puts its packets ahead of their time, and the
    next ones then look late). So each relayed packet's departure is also held
    to its RTP timestamp: how much later it leaves than the earliest packet of
    the last :data:`BEHIND_WINDOW_NS` would have it (NetEq's own reference, in
    Chromium), told to :attr:`on_late` past :data:`LATE_NS`; the proxy states it
    in the figures' uncertainty. Packets without an arrival (a peer's own audio:
    the mock agent, the load generator) are paced by whoever pushes them and
    leave at once.

    The time from arrival until the packet's departure (aiortc's sender takes it)
    goes into :attr:`latency_hist`.

    With :attr:`direct` set (a relay's leg, not paced), a packet pushed with its
    payload type is written to the socket at once by :class:`.rtpout.DirectRtp`
    instead, its departure that moment; where that declines from the first packet
    on, the track serves aiortc's sender as above (one stream is never sent by
    both, so its sequence numbers and timestamps stay one series).
    """

    kind = "audio"

    def __init__(
        self,
        pace_ns: int = 0,
        *,
        clock: Callable[[], int] = time.monotonic_ns,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """``clock`` and ``sleep`` are the loop's (tests pass a fake clock)."""
        super().__init__()
        self._queue: asyncio.Queue[tuple[Packet[Any], int] | None] = asyncio.Queue(
            OUT_QUEUE_PACKETS
        )
        self.pace_ns = pace_ns
        self._clock = clock
        self._sleep = sleep
        self.dropped = 0
        self.sent = 0
        self.late = 0  # packets that left more than LATE_NS after their due time
        self.late_max_ns = 0
        self.latency_hist = [0] * LATENCY_BINS
        # The relay's own forwarding delay (arrival at the host to the packet's departure:
        # written by the direct path, or taken by aiortc's sender, pacing included): the
        # receipt's forwarding, as the websocket relay's.
        self.forwarded = ForwardDelays()
        # Told (departure, how late against the stream's timeline) past LATE_NS (above).
        self.on_late: Callable[[int, int], None] | None = None
        # (departure, departure less RTP timestamp) of the last BEHIND_WINDOW_NS, the
        # smallest first (a monotonic deque: the window's minimum at its head).
        self._earliest: deque[tuple[int, int]] = deque()
        # (RTP timestamp in ns, arrival, departure) of every relayed packet, when a list is set
        # here (benchmarks/webrtc.py: the inter-departure jitter against the inter-arrival).
        self.departures: list[tuple[int, int, int]] | None = None
        # The departure of every packet, in order, when a list is set here (the load
        # generator's caller: its truth at the proxy's vantage, loadgen/webrtc.py).
        self.sent_log: list[int] | None = None
        # Sends a packet itself, at once (a relay's leg): see the class doc.
        self.direct: DirectRtp | None = None
        self._queued = False  # a packet went through the queue: aiortc's sender's stream

    def push(
        self,
        payload: bytes,
        pts: int,
        time_base: fractions.Fraction,
        t_in_ns: int = 0,
        payload_type: int | None = None,
    ) -> None:
        """Send ``payload``, its RTP timestamp ``pts`` in ``time_base`` (the sending
        codec's clock), that arrived at ``t_in_ns`` (0: a peer's own audio)."""
        direct = self.direct
        if direct is not None and payload_type is not None and not self._queued:
            if direct.send(payload, pts, payload_type):
                ts_ns = pts * 1_000_000_000 * time_base.numerator // time_base.denominator
                self._departed(ts_ns, t_in_ns, self._clock())
                return
            if direct.sent:  # the stream is ours: not handed to aiortc's sender now
                self.dropped += 1
                return
        self._queued = True
        packet = Packet(payload)
        packet.pts = pts
        packet.time_base = time_base
        q = self._queue
        if q.full():
            with contextlib.suppress(asyncio.QueueEmpty):
                q.get_nowait()
                self.dropped += 1
        q.put_nowait((packet, t_in_ns))

    async def recv(self) -> Packet[Any]:
        item = await self._queue.get()
        if item is None:
            raise asyncio.CancelledError
        packet, t_in_ns = item
        t_out_ns = self._clock()
        if t_in_ns:
            due = t_in_ns + self.pace_ns
            # Again after waking: uvloop's timers count from the loop's time cached at the
            # start of its turn, so one may fire early by as long as that turn ran.
            while due - t_out_ns > EARLY_NS:
                await self._sleep((due - t_out_ns) / 1e9)
                t_out_ns = self._clock()
        tb, pts = packet.time_base, packet.pts
        ts_ns = None
        if tb is not None and pts is not None:
            ts_ns = int(pts) * 1_000_000_000 * tb.numerator // tb.denominator
        self._departed(ts_ns, t_in_ns, t_out_ns)
        return packet

    def _departed(self, ts_ns: int | None, t_in_ns: int, t_out_ns: int) -> None:
        """Account for a packet of RTP timestamp ``ts_ns`` (in ns) that arrived at
        ``t_in_ns`` (0: a peer's own) and left at ``t_out_ns``."""
        if t_in_ns:
            late = t_out_ns - t_in_ns - self.pace_ns
            if late > LATE_NS:
                self.late += 1
                self.late_max_ns = max(self.late_max_ns, late)
            behind = 0 if ts_ns is None else self._behind(t_out_ns, ts_ns)
            if behind > LATE_NS and self.on_late is not None:
                self.on_late(t_out_ns, behind)
            self.forwarded.add(t_out_ns - t_in_ns)
            b = (t_out_ns - t_in_ns) // LATENCY_BIN_NS
            self.latency_hist[min(b, LATENCY_BINS - 1)] += 1
            if self.departures is not None:
                self.departures.append((ts_ns or 0, t_in_ns, t_out_ns))
        self.sent += 1
        if self.sent_log is not None:
            self.sent_log.append(self._clock())

    def _behind(self, t_out_ns: int, ts_ns: int) -> int:
        """How much later a packet of RTP timestamp ``ts_ns`` (in ns) leaving at
        ``t_out_ns`` leaves than the earliest of the last BEHIND_WINDOW_NS would have
        it, by their RTP timestamps (ns)."""
        rel = t_out_ns - ts_ns
        q = self._earliest
        while q and q[-1][1] >= rel:
            q.pop()
        q.append((t_out_ns, rel))
        while q[0][0] < t_out_ns - BEHIND_WINDOW_NS:
            q.popleft()
        return rel - q[0][1]

    def stop(self) -> None:
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(None)
        super().stop()


class _Unwrap:
    """RTP timestamps made monotonic (32-bit wraparound) and relative to the first."""

    __slots__ = ("_last", "_origin")

    def __init__(self) -> None:
        self._origin: int | None = None
        self._last = 0

    def __call__(self, ts: int) -> int:
        if self._origin is None:
            self._origin = ts
        elif ts < self._last and self._last - ts > 1 << 31:
            self._origin -= 1 << 32
        elif ts > self._last and ts - self._last > 1 << 31:
            self._origin += 1 << 32  # a late packet from before a wrap
        self._last = ts
        return ts - self._origin


def tap_rtp(
    transceiver: RTCRtpTransceiver, sink: Callable[[RtpIn], None]
) -> Callable[[Any, int, bool], None]:
    """Receive this transceiver's RTP packets directly, on arrival (see the module doc).

    Returns what is done with each packet, ``deliver(packet, t_ns, kernel)``, for a
    caller that has the packet and its arrival already (:class:`.rtpin.InlineRtp`).
    """
    receiver = transceiver.receiver
    codecs: dict[int, CodecInfo] = {}
    unwrap = _Unwrap()
    # aiortc's receiver sends its RTCP receiver reports (jitter, loss) from the statistics
    # its own _handle_rtp_packet keeps: kept here as it would, or the far end gets none.
    streams: dict[int, StreamStatistics] = receiver._RTCRtpReceiver__remote_streams  # type: ignore[attr-defined]

    def deliver(packet: Any, t_ns: int, kernel: bool) -> None:
        """``packet``: an ``RtpPacket`` or :class:`.rtpin.RtpView`; ``t_ns``: when its
        datagram reached the host (the kernel's stamp, where there is one)."""
        codec = codecs.get(packet.payload_type)
        if codec is None:
            for c in transceiver._codecs:
                if c.payloadType == packet.payload_type:
                    codec = codecs[packet.payload_type] = CodecInfo.of(c)
        if codec is None:
            return
        stats = streams.get(packet.ssrc)
        if stats is None:
            stats = streams[packet.ssrc] = StreamStatistics(codec.clock_rate)
        stats.add(packet)
        if codec.name in ("rtx", "red", "telephone-event", "cn"):
            return
        sink(
            RtpIn(
                packet.payload,
                unwrap(packet.timestamp),
                packet.sequence_number,
                bool(packet.marker),
                t_ns,
                codec,
                kernel,
            )
        )

    async def handle_rtp_packet(packet: RtpPacket, arrival_time_ms: int = 0) -> None:
        del arrival_time_ms  # aiortc's is read now, in whole ms on the wall clock
        deliver(packet, *arrival_of(receiver.transport))

    receiver._handle_rtp_packet = handle_rtp_packet  # type: ignore[method-assign]
    return deliver


def watch_reports(
    transceiver: RTCRtpTransceiver, sink: Callable[[int, float, float | None], None]
) -> None:
    """Tell ``sink`` what the far end reports of the stream we send it, as each RTCP
    receiver report block arrives: (arrival, interarrival jitter in ms, round trip in ms
    or None). RFC 3550 6.4.1's jitter is in RTP timestamp units of our stream; aiortc
    keeps it raw in its stats. The sender's ``_handle_rtcp_packet`` (which aiortc's DTLS
    transport calls for each RTCP packet routed to it) is wrapped on the instance."""
    sender = transceiver.sender
    handle = sender._handle_rtcp_packet

    async def handle_rtcp_packet(packet: Any) -> None:
        await handle(packet)  # first: aiortc updates its round-trip estimate
        if isinstance(packet, (RtcpRrPacket, RtcpSrPacket)):
            for report in packet.reports:
                codecs = transceiver._codecs
                if report.ssrc != sender._ssrc or not codecs:
                    continue
                t_ns = arrival_of(sender.transport)[0]
                rtt = sender._RTCRtpSender__rtt  # type: ignore[attr-defined]
                jitter_ms = 1000.0 * report.jitter / codecs[0].clockRate
                sink(t_ns, jitter_ms, None if rtt is None else 1000.0 * rtt)

    sender._handle_rtcp_packet = handle_rtcp_packet  # type: ignore[method-assign]


class Channel:
    """One data channel, with a backlog for messages sent before it opens."""

    def __init__(self, dc: RTCDataChannel) -> None:
        self.dc = dc
        self.label: str = dc.label
        self.on_message: Callable[[str | bytes, int], None] | None = None
        self.on_open: Callable[[], None] | None = None
        self.on_close: Callable[[], None] | None = None
        self._backlog: deque[str | bytes] = deque()
        self.dropped = 0
        dc.on("message", self._message)
        dc.on("open", self._open)
        dc.on("close", self._close)

    def send(self, message: str | bytes) -> None:
        if self.dc.readyState == "open":
            self.dc.send(message)
        elif self.dc.readyState == "connecting":
            if len(self._backlog) >= CHANNEL_BACKLOG:
                self._backlog.popleft()
                self.dropped += 1
            self._backlog.append(message)
        else:
            self.dropped += 1

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.dc.close()

    def _message(self, message: str | bytes) -> None:
        # The arrival of the datagram that completed the message (aiortc delivers it while
        # handling that datagram).
        sctp = self.dc.transport
        t_ns = arrival_of(sctp.transport)[0] if sctp is not None else time.monotonic_ns()
        if self.on_message is not None:
            self.on_message(message, t_ns)

    def _open(self) -> None:
        while self._backlog and self.dc.readyState == "open":
            self.dc.send(self._backlog.popleft())
        if self.on_open is not None:
            self.on_open()

    def _close(self) -> None:
        if self.on_close is not None:
            self.on_close()
