"""RTP straight to the socket: the packets aiortc's sender would write, and its reports."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import numpy as np
import pytest
from aiortc import clock
from aiortc.rtp import RtpPacket

from voxproxy.transports.webrtc.rtpout import ntp_now


def test_the_ntp_time_is_aiortc_s() -> None:
    before = clock.current_ntp_time()
    ours = ntp_now()
    after = clock.current_ntp_time()
    assert before <= ours <= after
    # The same epoch and fraction: back to a datetime by aiortc's own conversion.
    now = datetime.datetime.now(datetime.UTC)
    assert abs((clock.datetime_from_ntp(ntp_now()) - now).total_seconds()) < 0.5


class _Recorder:
    """An SRTP session that keeps what it was given to protect (RTP only)."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.plain: list[bytes] = []

    def protect(self, data: bytes) -> bytes:
        self.plain.append(data)
        return bytes(self.session.protect(data))

    def protect_rtcp(self, data: bytes) -> bytes:
        return bytes(self.session.protect_rtcp(data))


async def _sent(direct: bool, payloads: list[bytes]) -> tuple[list[bytes], list[bytes], Any]:
    """``payloads`` from a peer that sends directly (or through aiortc's sender) to one
    that receives through aiortc's own path: (the RTP packets as written before SRTP,
    the payloads received, (the sender, the receiving peer))."""
    import support.webrtckit  # noqa: F401  (ICE on 127.0.0.1 only)
    from support.waiting import wait_until
    from support.webrtckit import connected_pair

    from voxproxy.transports.webrtc import AudioPeer

    a, b = await connected_pair(AudioPeer(name="a", direct_send=direct))
    for arrivals in b.arrivals:
        arrivals.inline = None  # aiortc's RtpPacket.parse, router and SSRC checks
    sender = a.pc.getTransceivers()[0].sender
    dtls = sender.transport
    recorder = dtls._tx_srtp = _Recorder(dtls._tx_srtp)
    got: list[bytes] = []
    b.on_rtp = lambda p: got.append(p.payload)
    for p in payloads:
        a.send_encoded(p)
        await asyncio.sleep(0.005)
    await wait_until(lambda: len(got) == len(payloads), 10.0, "every payload")
    return recorder.plain, got, (a, b)


@pytest.mark.slow
async def test_a_direct_leg_writes_aiortc_s_packets_and_its_sender_reports_count_them() -> None:
    """The same payloads sent by aiortc's sender and by the direct path: the same packets
    (header, marker, payload type, header extensions: the mid; sequence numbers and
    timestamps moving alike from their random origins), which aiortc's receiving path
    takes; and the sender's RTCP reports count them, as the far end reads them."""
    from voxproxy.transports.webrtc import encode_clip

    t = np.arange(48000)
    pcm = (5000 * np.sin(2 * np.pi * 440 * t / 48000)).astype(np.int16)
    payloads = encode_clip("opus", pcm, 48000)[:30]
    runs = {}
    for direct in (False, True):
        plain, got, (a, b) = await _sent(direct, payloads)
        try:
            assert got == payloads
            sender = a.pc.getTransceivers()[0].sender
            ext_map = sender._RTCRtpSender__rtp_header_extensions_map
            packets = [RtpPacket.parse(x, ext_map) for x in plain]
            for x, p in zip(plain, packets, strict=True):
                assert p.serialize(ext_map) == x  # nothing aiortc would write differently
                assert p.ssrc == sender._ssrc
            assert [p.payload for p in packets] == payloads
            runs[direct] = [
                (
                    x[:2],
                    x[12 : len(x) - len(p.payload)],  # the header extensions, as bytes
                    (p.sequence_number - packets[0].sequence_number) % 65536,
                    (p.timestamp - packets[0].timestamp) % (1 << 32),
                    p.payload_type,
                    p.marker,
                    p.extensions.mid,
                )
                for x, p in zip(plain, packets, strict=True)
            ]
            assert a.track.direct is None or a.track.direct.sent == (len(payloads) if direct else 0)
            # The sender's report: aiortc's RTCP task reads the counters the sends kept.
            receiver = b.pc.getTransceivers()[0].receiver

            async def reported(receiver: Any = receiver) -> Any:
                report = await receiver.getStats()
                remote = [s for s in report.values() if s.type == "remote-outbound-rtp"]
                return remote and remote[0].packetsSent == len(payloads) and remote[0]

            from support.waiting import wait_until

            remote = await wait_until(reported, 10.0, "a sender report of every packet")
            assert remote.bytesSent == sum(len(p) for p in payloads)
            now = datetime.datetime.now(datetime.UTC)
            assert abs((remote.remoteTimestamp - now).total_seconds()) < 5.0
        finally:
            await a.close()
            await b.close()
    assert runs[True] == runs[False]
