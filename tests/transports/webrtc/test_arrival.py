"""Arrival stamps from the kernel: a datagram read late still says when it arrived."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import numpy as np
import pytest
import support.webrtckit  # noqa: F401  (ICE on 127.0.0.1 only)
from support.waiting import wait_until

from voxproxy.transports.webrtc import AudioPeer, Channel, RtpIn, encode_clip
from voxproxy.transports.webrtc.arrival import Datagram, _stamp_protocol, stamp

pytestmark = pytest.mark.slow

BLOCK_S = 0.2  # the event loop is blocked this long after the datagram arrived
SLEW_NS = 1_000_000  # the wall clock's slew (the kernel's stamp is on it): generous


class _Sink(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.got: list[Any] = []
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.got.append(data)


async def _late_datagram() -> tuple[Any, int, int]:
    """A datagram sent, then the loop blocked for BLOCK_S: (what the protocol got, the
    moment it was sent, the moment the block ended)."""
    loop = asyncio.get_running_loop()
    transport, sink = await loop.create_datagram_endpoint(_Sink, local_addr=("127.0.0.1", 0))
    try:
        _stamp_protocol(sink)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            sent = time.monotonic_ns()
            s.sendto(b"x", transport.get_extra_info("sockname"))
            time.sleep(BLOCK_S)  # the loop cannot read it now
            unblocked = time.monotonic_ns()
        await wait_until(lambda: sink.got, 5.0, "the datagram")
        return sink.got[0], sent, unblocked
    finally:
        transport.close()


def test_a_datagram_read_late_says_when_it_arrived_on_asyncio_and_uvloop() -> None:
    import uvloop

    for run in (asyncio.run, uvloop.run):
        got, sent, unblocked = run(_late_datagram())
        assert isinstance(got, Datagram) and got == b"x"
        assert got.kernel
        # The kernel stamped it on arrival (after the send: within the wall clock's slew
        # between arrival and read, microseconds), not when the loop read it.
        assert sent - SLEW_NS <= got.rx_ns < unblocked - BLOCK_S * 1e9 / 2, (sent, got.rx_ns)


def test_no_socket_is_stamped_when_read() -> None:
    before = time.monotonic_ns()
    t, kernel = stamp(None)
    assert not kernel and before <= t <= time.monotonic_ns()


async def _connected_pair() -> tuple[AudioPeer, AudioPeer, Channel]:
    a, b = AudioPeer(name="a"), AudioPeer(name="b")
    ch = a.open_channel("events")
    sdp = await a.create_offer()
    await a.accept_answer(await b.answer(sdp))
    await wait_until(lambda: a.state == b.state == "connected", 10.0, "both peers connected")
    await wait_until(lambda: ch.dc.readyState == "open", 10.0, "the channel open")
    return a, b, ch


def _datagrams_sent(peer: AudioPeer) -> int:
    """Datagrams the peer's (bundled) DTLS transport has written: RTP and SCTP alike."""
    dtls = peer.pc.getTransceivers()[0].sender.transport
    return int(dtls._RTCDtlsTransport__tx_packets)


async def _block_once_sent(peer: AudioPeer) -> tuple[int, int]:
    """Wait, one loop turn at a time, until ``peer`` wrote a datagram, then block the loop
    at once (the receiver, on this loop, cannot read it before): (sent by, unblocked)."""
    before = _datagrams_sent(peer)
    while _datagrams_sent(peer) == before:
        await asyncio.sleep(0)
    sent = time.monotonic_ns()
    time.sleep(BLOCK_S)
    return sent, time.monotonic_ns()


async def test_rtp_and_channel_messages_read_late_carry_their_kernel_arrival() -> None:
    a, b, ch = await _connected_pair()
    try:
        got: list[RtpIn] = []
        messages: list[tuple[str | bytes, int]] = []
        b.on_rtp = got.append
        await wait_until(lambda: b.channels, 10.0, "the channel at b")
        b.channels[0].on_message = lambda m, t: messages.append((m, t))
        payload = encode_clip("opus", np.zeros(960, dtype=np.int16), 48000)[0]  # silence
        for _ in range(3):  # let the stream settle
            a.send_encoded(payload)
            await asyncio.sleep(0.02)
        await wait_until(lambda: len(got) >= 3, 10.0, "the first packets")
        await asyncio.sleep(0.1)
        got.clear()

        a.send_encoded(payload)
        sent, unblocked = await _block_once_sent(a)
        await wait_until(lambda: got, 5.0, "the packet")
        # Stamped when it reached the host, before the loop was blocked: not when the loop
        # read it, BLOCK_S later.
        assert got[0].t_ns <= sent < unblocked - BLOCK_S * 1e9 / 2, (got[0].t_ns, sent)

        ch.send("hello")
        sent, unblocked = await _block_once_sent(a)
        await wait_until(lambda: messages, 5.0, "the message")
        assert messages[0][0] == "hello"
        assert messages[0][1] <= sent < unblocked - BLOCK_S * 1e9 / 2, (messages[0][1], sent)
    finally:
        await a.close()
        await b.close()
