"""One peer connection with a single audio transceiver (``voxproxy/transports/webrtc/
peer.py``): the checks an offer must pass, codec preferences in the answer, what is sent
before and after negotiation with its RTP timestamps (a fake clock for the pauses),
data channels in the offer, and closing. ICE on loopback only (support.webrtckit)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
import pytest
from support.webrtckit import connected_pair

import voxproxy.transports.webrtc.peer as peer_module
from voxproxy.transports.webrtc.codecs import frame_ticks
from voxproxy.transports.webrtc.peer import AudioPeer, BadSdp, check_offer


async def _offer(**kwargs: object) -> str:
    offerer = AudioPeer(name="offerer", **kwargs)  # type: ignore[arg-type]
    try:
        return await offerer.create_offer()
    finally:
        await offerer.close()


async def test_a_complete_offer_passes_and_each_missing_part_is_named() -> None:
    offer = await _offer()
    assert [m.kind for m in check_offer(offer).media] == ["audio"]
    cases = {
        "": "empty SDP offer",
        "v=0\r\nthis is no sdp": "malformed SDP offer",
        offer.split("m=audio")[0]: "no media section",
        offer.replace("m=audio", "m=video"): "no audio m-line (media: video)",
        re.sub(r"a=ice-ufrag:\S+\r\n", "", offer): "no ICE credentials",
        re.sub(r"a=fingerprint:[^\r]+\r\n", "", offer): "no DTLS fingerprint",
    }
    for sdp, says in cases.items():
        with pytest.raises(BadSdp, match=re.escape(says)):
            check_offer(sdp)


async def test_the_offer_s_audio_direction_is_read_from_the_offerer_s_side() -> None:
    offerer = AudioPeer(name="offerer")
    try:
        offer = await offerer.create_offer(direction="recvonly")
    finally:
        await offerer.close()
    assert AudioPeer.offer_direction(offer) == "recvonly"
    assert AudioPeer.offer_direction(offer.replace("m=audio", "m=video")) == "inactive"


async def test_the_answer_sends_with_the_first_codec_this_peer_prefers() -> None:
    offer = await _offer()  # every codec aiortc has
    answerer = AudioPeer(name="answerer", codecs=["PCMU"])
    try:
        assert answerer.send_codec is None and answerer.encoder() is None
        answer = await answerer.answer(offer)
        assert answerer.send_codec is not None and answerer.send_codec.name == "pcmu"
        assert answerer.send_codec is answerer.send_codec  # cached until renegotiated
        assert re.search(r"m=audio \d+ \S+ 0\r\n", answer), answer  # PCMU alone
    finally:
        await answerer.close()


async def test_an_offer_with_no_codec_in_common_is_refused() -> None:
    opus_only = await _offer(codecs=["opus"])
    answerer = AudioPeer(name="answerer", codecs=["pcma"])
    try:
        with pytest.raises(BadSdp, match=r"no audio codec in common") as refused:
            await answerer.answer(opus_only)
        # Both sides named, the offer's codecs with their clock rates.
        assert "offered: opus/48000" in str(refused.value), refused.value
        assert "this peer takes: PCMA" in str(refused.value), refused.value
    finally:
        await answerer.close()


async def test_nothing_is_sent_before_negotiation() -> None:
    peer = AudioPeer(name="early")
    try:
        assert peer.send_encoded(b"\x00" * 160) is False
        assert peer.send_pcm(np.zeros(320, dtype=np.int16), 16000) == []
    finally:
        await peer.close()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The peer's monotonic clock, in ns, set by the test (time.monotonic_ns there)."""
    now = [1_000_000_000]
    monkeypatch.setattr(peer_module.time, "monotonic_ns", lambda: now[0])
    yield now


async def test_rtp_timestamps_run_on_while_sending_and_skip_a_pause(clock: list[int]) -> None:
    offer = await _offer()
    peer = AudioPeer(name="sender", codecs=["pcmu"])
    try:
        await peer.answer(offer)
        codec = peer.send_codec
        assert codec is not None
        ticks = frame_ticks(codec)  # 160 at 8 kHz
        sent: list[int] = []
        peer.track.push = lambda payload, pts, *rest: sent.append(pts)  # type: ignore[method-assign]
        for _ in range(3):  # sent ahead of real time: contiguous all the same
            assert peer.send_encoded(b"\xff" * 160)
        assert sent == [0, ticks, 2 * ticks]
        clock[0] += 1_000_000_000  # a second's pause
        peer.send_encoded(b"\xff" * 160)
        peer.send_encoded(b"\xff" * 160)
        assert sent[3:] == [codec.clock_rate, codec.clock_rate + ticks]  # the gap is heard
        payloads = peer.send_pcm(np.zeros(8000 // 50 * 2, dtype=np.int16), 8000)
        assert len(payloads) == 2 and sent[5:] == [
            codec.clock_rate + 2 * ticks,
            codec.clock_rate + 3 * ticks,
        ]
    finally:
        await peer.close()


async def test_an_offer_with_data_has_its_application_section_after_the_audio() -> None:
    with_data = await _offer()
    assert "m=application" not in with_data
    peer = AudioPeer(name="offerer")
    try:
        peer.open_channel("chat")
        assert peer.transceiver is not None  # audio first, then the channel
        offer = await peer.create_offer(channels=["oai-events"])
        assert peer.offered_data and [c.label for c in peer.channels] == ["chat", "oai-events"]
        assert offer.index("m=audio") < offer.index("m=application")
    finally:
        await peer.close()
    bare = AudioPeer(name="offerer")
    try:
        offer = await bare.create_offer(data=True)
        assert bare.offered_data and bare.channels == [] and "m=application" in offer
    finally:
        await bare.close()


async def test_closing_drops_the_callbacks_and_the_connection() -> None:
    peer = AudioPeer(name="closing")
    peer.on_rtp = lambda packet: None
    peer.on_channel = lambda channel: None
    await peer.close()
    assert peer.closed and peer.on_rtp is None and peer.on_channel is None
    await peer.close()  # twice is fine


@pytest.mark.slow
async def test_two_peers_connect_over_loopback_and_say_so() -> None:
    states: list[str] = []
    a = AudioPeer(name="a", codecs=["pcmu"])
    a.on_state = states.append
    a, b = await connected_pair(a)
    try:
        assert a.connected_ns is not None and b.connected_ns is not None
        assert "connected" in states and a.state == "connected" and not a.closed
    finally:
        await a.close()
        await b.close()
    assert states[-1] == "closed" and a.closed
