"""RTP straight from the datagram: the packets aiortc's path would deliver, the same way."""

from __future__ import annotations

import asyncio
import random
import struct
from typing import Any

import numpy as np
import pytest
from aiortc.rtcdtlstransport import State
from aiortc.rtcrtpparameters import RTCRtpHeaderExtensionParameters, RTCRtpParameters
from aiortc.rtp import HeaderExtensions, HeaderExtensionsMap, RtpPacket

from voxproxy.transports.webrtc.rtpin import InlineRtp, parse_rtp


def _ext_map() -> HeaderExtensionsMap:
    m = HeaderExtensionsMap()
    m.configure(
        RTCRtpParameters(
            headerExtensions=[
                RTCRtpHeaderExtensionParameters(id=1, uri="urn:ietf:params:rtp-hdrext:sdes:mid"),
                RTCRtpHeaderExtensionParameters(
                    id=2, uri="urn:ietf:params:rtp-hdrext:ssrc-audio-level"
                ),
            ]
        )
    )
    return m


def _packets(rng: random.Random) -> list[bytes]:
    """Well-formed packets of every shape, then each cut short and with bits flipped."""
    m = _ext_map()
    out = []
    for k in range(300):
        p = RtpPacket(
            payload_type=rng.randrange(128),
            marker=rng.randrange(2),
            sequence_number=rng.randrange(1 << 16),
            timestamp=rng.randrange(1 << 32),
            ssrc=rng.randrange(1 << 32),
            payload=rng.randbytes(rng.randrange(0, 200)),
        )
        p.csrc = [rng.randrange(1 << 32) for _ in range(rng.choice((0, 0, 1, 3)))]
        if k % 3:
            p.extensions = HeaderExtensions(mid=str(k % 10), audio_level=(True, k % 127))
        p.padding_size = rng.choice((0, 0, 1, 4))
        out.append(p.serialize(m))
    shapes = list(out)
    for data in shapes:
        out.append(data[: rng.randrange(len(data))])
        b = bytearray(data)
        b[0] ^= 1 << rng.choice((4, 5, 6, 7))  # extension, padding, version bits
        out.append(bytes(b))
    return out


def _aiortc(data: bytes) -> tuple[Any, ...] | None:
    try:
        p = RtpPacket.parse(data, _ext_map())
    except ValueError:
        return None
    return (p.payload_type, p.marker, p.sequence_number, p.timestamp, p.ssrc, p.payload)


def _ours(data: bytes) -> tuple[Any, ...] | None:
    try:
        p = parse_rtp(data)
    except ValueError:
        return None
    return (p.payload_type, p.marker, p.sequence_number, p.timestamp, p.ssrc, p.payload)


def test_packets_parse_as_aiortc_parses_them() -> None:
    """Every field the relay reads, and which packets are refused, as RtpPacket.parse."""
    packets = _packets(random.Random(7))
    refused = 0
    for data in packets:
        assert _ours(data) == _aiortc(data), data.hex()
        refused += _aiortc(data) is None
    assert 100 < refused < len(packets) - 300  # the cut and flipped ones mostly refused


def test_a_malformed_extension_element_is_relayed_not_dropped() -> None:
    """The one difference (rtpin's doc): extension elements are not decoded, so a packet
    whose element is cut short, which aiortc drops, keeps its payload."""
    one_byte = bytes([0x1F, 0x61])  # id 1, claims 16 bytes, has 1
    data = (
        struct.pack("!BBHLL", 0x90, 111, 1, 960, 5)
        + struct.pack("!HH", 0xBEDE, 1)
        + one_byte
        + b"\0\0"
        + b"payload"
    )
    assert _aiortc(data) is None
    assert _ours(data) == (111, 0, 1, 960, 5, b"payload")


# -- declining: what goes aiortc's way -------------------------------------------------------


class _Srtp:
    def __init__(self) -> None:
        self.unprotected: list[bytes] = []

    def unprotect(self, data: bytes) -> bytes:
        self.unprotected.append(data)
        return data  # "decrypted": the test's datagrams are plain RTP


class _Router:
    def __init__(self, receiver: Any) -> None:
        self.receiver = receiver

    def route_rtp(self, packet: Any) -> Any:
        return self.receiver if packet.ssrc == 5 else None


class _Receiver:
    """An RTCRtpReceiver's transport as InlineRtp reads it."""

    def __init__(self) -> None:
        conn = type("Conn", (), {})()
        conn._nominated = {1: object()}
        conn._queue = asyncio.Queue()
        ice = type("Ice", (), {})()
        ice._connection = conn
        dtls: Any = type("Dtls", (), {})()
        dtls._rx_srtp = _Srtp()
        dtls._state = State.CONNECTED
        dtls._task = object()
        dtls.transport = ice
        dtls._rtp_router = _Router(self)
        dtls._RTCDtlsTransport__rx_bytes = 0
        dtls._RTCDtlsTransport__rx_packets = 0
        self.transport = dtls
        self.conn = conn


def _rtp(ssrc: int = 5, pt: int = 111) -> bytes:
    return struct.pack("!BBHLL", 0x80, pt, 1, 960, ssrc) + b"opus"


async def test_only_what_aiortc_s_task_would_handle_alike_is_taken() -> None:
    receiver = _Receiver()
    got: list[tuple[Any, int, bool]] = []
    inline = InlineRtp(receiver, lambda p, t, k: got.append((p, t, k)))
    dtls, conn = receiver.transport, receiver.conn

    assert inline(_rtp(), 7, True)
    assert [(p.payload, p.timestamp, t, k) for p, t, k in got] == [(b"opus", 960, 7, True)]
    assert (dtls._RTCDtlsTransport__rx_packets, dtls._RTCDtlsTransport__rx_bytes) == (1, 16)

    rtcp = struct.pack("!BBH", 0x80, 200, 6) + bytes(24)  # a sender report
    stun = bytes(20)
    dtls_record = bytes([22]) + bytes(12)
    for other in (rtcp, stun, dtls_record, b"", b"\x80"):
        assert not inline(other, 8, True)
    conn._queue.put_nowait((b"earlier", 1))  # a datagram still waiting for the task
    assert not inline(_rtp(), 8, True)
    conn._queue.get_nowait()
    for attr, value in (("_rx_srtp", None), ("_state", State.CLOSED), ("_task", None)):
        before = getattr(dtls, attr)
        setattr(dtls, attr, value)
        assert not inline(_rtp(), 8, True), attr
        setattr(dtls, attr, before)
    conn._nominated = {}
    assert not inline(_rtp(), 8, True)
    conn._nominated = {1: object()}
    assert len(got) == 1 and len(dtls._rx_srtp.unprotected) == 1

    # Taken but dropped, as aiortc drops them: not RTP after all, another stream.
    assert inline(struct.pack("!BBHLL", 0x80, 111, 1, 960, 5)[:11] + b"\x80", 9, True)
    assert inline(_rtp(ssrc=6), 9, True)
    assert len(got) == 1 and dtls._RTCDtlsTransport__rx_packets == 3


# -- live: the same packets either way ---------------------------------------------------------


@pytest.mark.slow
async def test_a_stream_handled_inline_is_delivered_as_by_aiortc_s_task() -> None:
    """The same clip sent twice to a peer: through aiortc's queue and task (inline turned
    off), then inline. The receiver gets the same packets either way: payloads,
    timestamps, markers, codec, kernel stamps; and aiortc's receiver statistics (its RTCP
    reports) count them alike."""
    import support.webrtckit  # noqa: F401  (ICE on 127.0.0.1 only)
    from support.webrtckit import connected_pair

    from voxproxy.transports.webrtc import RtpIn, encode_clip

    t = np.arange(48000 * 2)
    pcm = (6000 * np.sin(2 * np.pi * 300 * t / 48000) * (t // 9600 % 2)).astype(np.int16)
    payloads = encode_clip("opus", pcm, 48000)

    async def received(inline: bool) -> tuple[list[tuple[Any, ...]], int, int]:
        a, b = await connected_pair()
        try:
            if not inline:
                for arrivals in b.arrivals:
                    arrivals.inline = None
            got: list[RtpIn] = []
            b.on_rtp = got.append
            for p in payloads:
                a.send_encoded(p)
                await asyncio.sleep(0.005)
            from support.waiting import wait_until

            await wait_until(lambda: len(got) == len(payloads), 10.0, "every packet")
            stats = b.pc.getTransceivers()[0].receiver._RTCRtpReceiver__remote_streams
            (s,) = stats.values()
            first = got[0].sequence
            seen = [
                (g.payload, g.timestamp, g.sequence - first, g.marker, g.codec, g.kernel)
                for g in got
            ]
            assert b.inline is not None
            return seen, s.packets_received, b.inline.handled
        finally:
            await a.close()
            await b.close()

    by_task, counted_task, handled_task = await received(inline=False)
    inline, counted_inline, handled_inline = await received(inline=True)
    assert by_task == inline
    assert counted_task == counted_inline == len(payloads)
    assert (handled_task, handled_inline) == (0, len(payloads))
