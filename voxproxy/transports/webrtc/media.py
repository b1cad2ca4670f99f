"""Media plumbing: the outbound track that sends pre-encoded packets, the RTP tap on
aiortc's receiver (arrival-stamped, no jitter buffer), and data channels with a backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from aiortc import (
    MediaStreamTrack,
    RTCDataChannel,
    RTCRtpTransceiver,
)
from aiortc.rtp import RtpPacket
from av.packet import Packet

from voxproxy.transports.webrtc.arrival import arrival_of
from voxproxy.transports.webrtc.codecs import CodecInfo, RtpIn

OUT_QUEUE_PACKETS = 8  # packets a sending leg may hold (160 ms at 20 ms): a relay does not buffer


CHANNEL_BACKLOG = 256  # data channel messages held until the other side's channel opens


LATENCY_BIN_NS = 50_000  # the relay's forwarding latency histogram: 50 µs bins ...


LATENCY_BINS = 2000  # ... up to 100 ms (the last bin holds everything above)


class OutboundTrack(MediaStreamTrack):
    """The audio a peer sends: pre-encoded packets, returned as they are pushed.

    aiortc's ``RTCRtpSender`` awaits :meth:`recv` in a loop and packs each
    ``av.Packet`` without re-encoding (its ``pts`` in ``time_base`` becomes the
    RTP timestamp). Nothing is paced here: whoever pushes does the pacing (the
    remote sender, for a relay). The queue is short and drops its oldest
    packet when full, so a stalled leg never builds up delay.

    A relay passes each packet's arrival time (``t_in_ns``); the time from
    there until aiortc's sender takes the packet (after which it only packs,
    encrypts and writes it) goes into :attr:`latency_hist`.
    """

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self._queue: asyncio.Queue[tuple[Packet[Any], int] | None] = asyncio.Queue(
            OUT_QUEUE_PACKETS
        )
        self.dropped = 0
        self.sent = 0
        self.latency_hist = [0] * LATENCY_BINS

    def push(
        self, payload: bytes, pts: int, time_base: fractions.Fraction, t_in_ns: int = 0
    ) -> None:
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
        if t_in_ns:
            b = (time.monotonic_ns() - t_in_ns) // LATENCY_BIN_NS
            self.latency_hist[min(b, LATENCY_BINS - 1)] += 1
        self.sent += 1
        return packet

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


def tap_rtp(transceiver: RTCRtpTransceiver, sink: Callable[[RtpIn], None]) -> None:
    """Receive this transceiver's RTP packets directly, on arrival (see the module doc)."""
    receiver = transceiver.receiver
    codecs: dict[int, CodecInfo] = {}
    unwrap = _Unwrap()

    async def handle_rtp_packet(packet: RtpPacket, arrival_time_ms: int = 0) -> None:
        del arrival_time_ms  # aiortc's is read now, in whole ms on the wall clock
        # When its datagram reached the host (the kernel's stamp, where there is one).
        t_ns, kernel = arrival_of(receiver.transport)
        codec = codecs.get(packet.payload_type)
        if codec is None:
            for c in transceiver._codecs:
                if c.payloadType == packet.payload_type:
                    codec = codecs[packet.payload_type] = CodecInfo.of(c)
            if codec is None or codec.name in ("rtx", "red", "telephone-event", "cn"):
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

    receiver._handle_rtp_packet = handle_rtp_packet  # type: ignore[method-assign]


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
