"""RTP straight to the socket: a pre-encoded payload sent in the step that has it.

aiortc 1.16 sends media from a task per sender: ``RTCRtpSender._run_rtp``
(aiortc/rtcrtpsender.py) awaits the track's next frame (``_next_encoded_frame``: for an
``av.Packet``, the encoder's ``pack``, which returns the payload as it is and its
``pts`` in the codec's clock), builds an ``RtpPacket`` (the sender's SSRC, its payload
type ``codecs[0]``, sequence numbers from a random start, timestamps from a random
origin, the marker on the last payload of a frame, header extensions: the ``mid``, and
abs-send-time where it was negotiated), serializes it, and awaits
``RTCDtlsTransport._send_rtp`` (SRTP ``protect``, then ``RTCIceTransport._send`` ->
aioice ``Connection.send`` -> ``sendto`` -> the nominated pair's
``StunProtocol.send_data`` -> ``transport.sendto``), then notes what its RTCP sender
reports say (``__ntp_timestamp``, ``__rtp_timestamp``, ``__octet_count``,
``__packet_count``). For a relay that is a queue, a task woken and a chain of
coroutines for every 20 ms of every call.

:class:`DirectRtp` writes the same packet in the relay's own step, on our own peer's
sender, with aiortc's objects: the sender's SSRC, ``mid``, header extension map (its
extensions are encoded once by aiortc's ``HeaderExtensionsMap.set``) and RTCP
counters, the transport's SRTP session and counters, the nominated pair's socket.
The sender's task is left waiting on a track that is never fed. What is different,
and why it is safe:

- **Its own sequence numbers and timestamp origin** (random, as aiortc's:
  ``random_sequence_number``, ``random32``): the task's are local to it, and it sends
  nothing while the direct path is used (the track is fed only when it is not).
- **No RTP history.** aiortc keeps each packet for retransmission on a NACK; its audio
  codecs are offered without NACK feedback (aiortc/codecs/__init__.py: no
  ``rtcpFeedback``), so no far end asks, and a NACK that came anyway would find nothing
  to resend, as a lost audio packet is not resent anyway.
- **The NTP time of the last packet** (for the sender report) from ``time.time_ns()``
  as ``aiortc.clock.datetime_to_ntp`` makes it of ``datetime.now(timezone.utc)``:
  seconds since 1900 and microseconds as a 32-bit fraction.
- **Only where aiortc's path is the plain one**: the sender started and enabled, the
  DTLS transport ``CONNECTED`` with its SRTP keys, the pair nominated over a plain UDP
  socket (aioice's ``StunProtocol``; a TURN relay's protocol wraps its data), header
  extensions that do not change from packet to packet (abs-send-time negotiated:
  aiortc's audio capabilities do not offer it). Otherwise :meth:`DirectRtp.send`
  declines and the packet goes through the track as before.
"""

from __future__ import annotations

import struct
import time
from typing import Any

from aioice.ice import StunProtocol
from aiortc.rtcdtlstransport import State
from aiortc.rtcrtpsender import random_sequence_number
from aiortc.rtp import HeaderExtensions
from aiortc.utils import random32

_HEADER = struct.Struct("!BBHLL")
_EXTENSION = struct.Struct("!HH")
NTP_EPOCH_S = 2_208_988_800  # 1900-01-01 to 1970-01-01 (RFC 5905)


def ntp_now() -> int:
    """The wall clock as a 64-bit NTP timestamp at microsecond resolution (as
    ``aiortc.clock.current_ntp_time``)."""
    us = time.time_ns() // 1000
    s, frac_us = divmod(us, 1_000_000)
    return ((s + NTP_EPOCH_S) << 32) | ((frac_us << 32) // 1_000_000)


def header_extension(sender: Any) -> bytes | None:
    """The header extension block the sender puts on every packet (b"" for none), or
    None where it changes from packet to packet (abs-send-time)."""
    ext_map = sender._RTCRtpSender__rtp_header_extensions_map
    mid = sender._RTCRtpSender__mid
    profile, value = ext_map.set(HeaderExtensions(mid=mid))
    if ext_map.set(HeaderExtensions(mid=mid, abs_send_time=1)) != (profile, value):
        return None
    if not value:
        return b""
    block: bytes = _EXTENSION.pack(profile, len(value) >> 2) + value
    return block


class DirectRtp:
    """Sends pre-encoded payloads as packets of ``sender``'s stream (the module doc)."""

    __slots__ = ("_ext", "_origin", "_sender", "_seq", "declined", "sent")

    def __init__(self, sender: Any) -> None:
        self._sender = sender
        self._seq = random_sequence_number()
        self._origin = random32()
        self._ext: bytes | None = None  # read once the sender has started
        self.sent = 0
        self.declined = False  # the header extensions change from packet to packet

    def send(self, payload: bytes, timestamp: int, payload_type: int) -> bool:
        """Send ``payload`` now, with ``timestamp`` (in the codec's clock, from our
        stream's start); False (nothing sent) where aiortc's path must take it."""
        sender = self._sender
        if not sender._RTCRtpSender__started or not sender._enabled or self.declined:
            return False
        dtls = sender.transport
        srtp = dtls._tx_srtp
        if srtp is None or dtls._state is not State.CONNECTED:
            return False
        pair = dtls.transport._connection._nominated.get(1)
        if pair is None or type(pair.protocol) is not StunProtocol:
            return False
        ext = self._ext
        if ext is None:
            ext = self._ext = header_extension(sender)
            if ext is None:
                self.declined = True
                return False
        ts = (self._origin + timestamp) & 0xFFFFFFFF
        seq = self._seq
        first = 0x90 if ext else 0x80  # version 2, the extension bit
        rtp = _HEADER.pack(first, 0x80 | payload_type, seq, ts, sender._ssrc) + ext + payload
        data = srtp.protect(rtp)
        pair.protocol.transport.sendto(data, pair.remote_addr)
        dtls._RTCDtlsTransport__tx_bytes += len(data)
        dtls._RTCDtlsTransport__tx_packets += 1
        sender._RTCRtpSender__ntp_timestamp = ntp_now()
        sender._RTCRtpSender__rtp_timestamp = ts
        sender._RTCRtpSender__octet_count += len(payload)
        sender._RTCRtpSender__packet_count += 1
        self._seq = (seq + 1) & 0xFFFF
        self.sent += 1
        return True
