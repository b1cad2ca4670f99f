"""RTP straight from the datagram: a media packet handled where the loop hands it over.

aiortc 1.16 with aioice 0.13 takes each datagram through a chain of objects and a task
before its RTP packet reaches the receiver (the tap of :mod:`.media`):

1. aioice's ``StunProtocol.datagram_received`` (aioice/ice.py) tries every datagram as
   STUN first (``stun.parse_message``: a ``ValueError`` for media) and hands it to
   ``Connection.data_received``, which puts it in the connection's ``asyncio.Queue``;
2. the DTLS transport's task (``RTCDtlsTransport.__run``, aiortc/rtcdtlstransport.py) is
   woken: ``_recv_next`` awaits it through ``RTCIceTransport._recv`` ->
   ``Connection.recv`` -> ``Connection.recvfrom``, counts it (``__rx_bytes``,
   ``__rx_packets``), reads its first byte (RFC 7983: 128-191 is RTP or RTCP) and, once
   the handshake gave it SRTP keys (``_rx_srtp``), tells RTCP from RTP (``is_rtcp``) and
   unprotects it (a ``pylibsrtp.Error`` drops it);
3. ``_handle_rtp_data`` parses it (``RtpPacket.parse``, a ``ValueError`` drops it), routes
   it (``RtpRouter.route_rtp``: the receiver of its SSRC and payload type, or none) and
   awaits the receiver's ``_handle_rtp_packet``.

A relay does that twice for every 20 ms of every call, and most of it is the chain's
own cost (a queue, a task woken, coroutines awaited, a STUN parse that fails, header
extensions decoded that nobody reads). :class:`InlineRtp` does steps 2 and 3 for an
SRTP packet in the protocol's ``datagram_received`` itself (:mod:`.arrival` calls it
with the datagram's stamp), with aiortc's own objects: the transport's SRTP session,
its router, its counters. Nothing of aiortc or aioice is forked; what is different, and
why it is safe:

- **Only what the task would handle the same way.** An SRTP packet (first byte
  128-191, not RTCP) on a DTLS transport that is ``CONNECTED`` with its SRTP keys
  and its task reading (where ``_recv_next`` takes the SRTP branch), on an ICE
  connection with a nominated pair (where ``recvfrom`` would not raise), and only
  while the connection's queue is empty: a datagram that came earlier and is still
  queued is handled first by the task, so packets are handled in the order they came.
  Everything else (STUN, DTLS and the data channels in it, RTCP, anything before the
  keys) takes aiortc's path unchanged.
- **No STUN attempt.** ``stun.parse_message`` checks only lengths, so aioice takes an
  RTP packet whose sequence number happens to equal its datagram's length less 20 for
  a STUN message and loses it (once in 65,536 packets of a given size); RFC 7983 says
  a first byte of 128-191 is RTP or RTCP, and it is handled as such here.
- **The header extensions are skipped, not decoded** (:func:`parse_rtp` keeps every
  other check of ``RtpPacket.parse``: version, CSRC count, extension length, padding).
  Nothing reads them: the tap replaced ``RTCRtpReceiver._handle_rtp_packet``, whose only
  use of them is video's bitrate estimate (abs-send-time), and the relay sends its own.
  A packet with a malformed extension element, which aiortc drops, is relayed.
- **The arrival is the datagram's own stamp**, handed in by :mod:`.arrival`, where the
  task's path reads it back from the connection (``arrival.arrival_of``): the same value.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pylibsrtp
from aiortc import clock
from aiortc.rtcdtlstransport import State
from aiortc.rtp import RtpPacket

_HEADER = struct.Struct("!BBHLL")
_EXTENSION = struct.Struct("!HH")


@dataclass(slots=True)
class RtpView:
    """The fields of one RTP packet the relay reads (``RtpPacket``'s names), its payload
    without header extensions, CSRCs or padding."""

    payload_type: int
    marker: int
    sequence_number: int
    timestamp: int
    ssrc: int
    payload: bytes


def parse_rtp(data: bytes) -> RtpView:
    """An RTP packet's fields, with ``RtpPacket.parse``'s checks (aiortc/rtp.py; a
    ``ValueError`` where it raises one) save that header extensions are skipped."""
    if len(data) < 12:
        raise ValueError("RTP packet length is less than 12 bytes")
    v_p_x_cc, m_pt, sequence_number, timestamp, ssrc = _HEADER.unpack_from(data)
    if v_p_x_cc >> 6 != 2:
        raise ValueError("RTP packet has invalid version")
    pos = 12 + 4 * (v_p_x_cc & 0x0F)
    if len(data) < pos:
        raise ValueError("RTP packet has truncated CSRC")
    if v_p_x_cc & 0x10:
        if len(data) < pos + 4:
            raise ValueError("RTP packet has truncated extension profile / length")
        pos += 4 + 4 * _EXTENSION.unpack_from(data, pos)[1]
        if len(data) < pos:
            raise ValueError("RTP packet has truncated extension value")
    if v_p_x_cc & 0x20:
        padding = data[-1]
        if not padding or padding > len(data) - pos:
            raise ValueError("RTP packet padding length is invalid")
        payload = data[pos:-padding]
    else:
        payload = data[pos:]
    return RtpView(m_pt & 0x7F, m_pt >> 7, sequence_number, timestamp, ssrc, payload)


Deliver = Callable[[Any, int, bool], None]


class InlineRtp:
    """Handles a datagram's SRTP packet for one receiver at once, or declines it (the
    module doc): called with each datagram of the receiver's ICE connection, its
    arrival and whether the kernel stamped it; True when it took the datagram."""

    __slots__ = ("_deliver", "_receiver", "handled")

    def __init__(self, receiver: Any, deliver: Deliver) -> None:
        """``receiver``: our ``RTCRtpReceiver``; ``deliver(packet, t_ns, kernel)``: what its
        tapped ``_handle_rtp_packet`` does with a packet (:func:`.media.tap_rtp`)."""
        self._receiver = receiver
        self._deliver = deliver
        self.handled = 0  # packets taken here (the rest went aiortc's way)

    def __call__(self, data: bytes, t_ns: int, kernel: bool) -> bool:
        if len(data) < 2 or not 127 < data[0] < 192 or 192 <= data[1] <= 208:  # is_rtcp
            return False
        dtls = self._receiver.transport
        srtp = dtls._rx_srtp
        if srtp is None or dtls._state is not State.CONNECTED or dtls._task is None:
            return False
        conn = dtls.transport._connection
        if not conn._nominated or not conn._queue.empty():
            return False
        self.handled += 1
        dtls._RTCDtlsTransport__rx_bytes += len(data)
        dtls._RTCDtlsTransport__rx_packets += 1
        try:
            plain = srtp.unprotect(data)
            packet = parse_rtp(plain)
        except (pylibsrtp.Error, ValueError):
            return True  # dropped, as aiortc drops it
        receiver = dtls._rtp_router.route_rtp(packet)
        if receiver is self._receiver:
            self._deliver(packet, t_ns, kernel)
        elif receiver is not None:  # another receiver on the bundle: as aiortc would
            _hand_on(dtls, receiver, plain)
        return True


def _hand_on(dtls: Any, receiver: Any, plain: bytes) -> None:
    """A packet for a receiver that is not ours, handled by aiortc's own code."""
    try:
        packet = RtpPacket.parse(plain, dtls._rtp_header_extensions_map)
    except ValueError:
        return
    task = asyncio.ensure_future(
        receiver._handle_rtp_packet(packet, arrival_time_ms=clock.current_ms())
    )
    _HANDED_ON.add(task)
    task.add_done_callback(_HANDED_ON.discard)


_HANDED_ON: set[asyncio.Future[None]] = set()  # held until done (the loop keeps weak refs)
