"""The mock agent over WebRTC (``voxproxy/mockagent/webrtc.py``): its clips at 48 kHz,
what a call sends and logs (whole 20 ms frames, one logged chunk per payload) and echoes
on a data channel, driven with a fake peer; and offers over loopback signaling: answered
201 (WHIP) or 200 (Pipecat) and logged, refused as the config says, a bad offer a 400."""

from __future__ import annotations

from typing import Any, cast

import aiohttp
import numpy as np
import pytest
from support.webrtckit import open_counts  # (also: ICE on loopback only)

from voxproxy.clips import load_clips
from voxproxy.core.errors import UsageError
from voxproxy.mockagent.config import MockAgentConfig
from voxproxy.mockagent.webrtc import WebRtcCall, WebRtcMockAgent, _clips48
from voxproxy.simcall.webrtc import CLIP_RATE_HZ, WebRtcCallLog, payload_key
from voxproxy.transports.webrtc import AudioPeer
from voxproxy.transports.webrtc.signaling_client import SignalingError, post_offer

CONFIG = MockAgentConfig(responses=("agent_reprompt", "agent_hours"))


def test_clips_are_the_fixtures_tripled_to_48_khz_with_their_onsets() -> None:
    agent = WebRtcMockAgent(CONFIG)
    fixtures = load_clips()
    assert set(agent.clips48) == set(agent.clips)
    for name, c in agent.clips48.items():
        source = fixtures[name]
        assert c.sample_rate_hz == CLIP_RATE_HZ == 3 * source.sample_rate_hz
        assert c.pcm.size == 3 * source.pcm.size
        assert c.onset_sample == round(source.onset_ms * CLIP_RATE_HZ / 1000)
    assert _clips48({}) == {}


class FakePeer:
    """An AudioPeer as far as a call uses it: it encodes each 960 samples as one payload."""

    def __init__(self) -> None:
        self.state = "new"
        self.sent: list[int] = []  # sizes of the PCM handed to send_pcm
        self.on_rtp: Any = None
        self.on_state: Any = None
        self.on_channel: Any = None

    def send_pcm(self, pcm: np.ndarray, rate: int) -> list[bytes]:
        assert rate == CLIP_RATE_HZ
        self.sent.append(pcm.size)
        return [pcm[k : k + 960].tobytes() for k in range(0, pcm.size, 960)]


def _call() -> tuple[WebRtcCall, FakePeer, WebRtcCallLog]:
    peer = FakePeer()
    log = WebRtcCallLog(index=2, path="", headers={}, subprotocol=None)
    call = WebRtcCall(WebRtcMockAgent(CONFIG), cast(AudioPeer, peer), log)
    return call, peer, log


async def test_audio_goes_out_in_whole_frames_and_each_payload_is_logged() -> None:
    call, peer, log = _call()
    clip = call.clips["agent_hours"]
    assert await call._send_audio(clip, 960, 960 + 1500)  # 1 5/8 frames: padded to 2
    assert peer.sent == [1920]
    expected = [clip.pcm[960:1920].tobytes(), clip.pcm[1920:2460].tobytes() + bytes(2 * 420)]
    assert [c.key for c in log.chunks] == [payload_key(p) for p in expected]
    assert {(c.response, c.clip_pos, c.n) for c in log.chunks} == {(0, 960, 1500)}
    assert await call._send_flush() is False  # nothing to flush on a paced transport
    call.halted = True
    assert not await call._send_audio(clip, 0, 960) and peer.sent == [1920]


class FakeChannel:
    def __init__(self, label: str) -> None:
        self.label = label
        self.on_message: Any = None
        self.sent: list[str | bytes] = []

    def send(self, message: str | bytes) -> None:
        self.sent.append(message)


async def test_data_channel_messages_are_echoed_and_logged() -> None:
    _, peer, log = _call()
    channel = FakeChannel("chat")
    peer.on_channel(channel)  # as the peer reports a channel the caller opened
    channel.on_message("hi", 1)
    channel.on_message(b"\x00", 2)
    assert channel.sent == ["echo:hi", b"echo:\x00"]
    assert log.channel_messages == [("chat", "hi"), ("chat", b"\x00")]


async def test_the_connection_state_starts_and_ends_the_call() -> None:
    call, peer, log = _call()
    peer.on_state("connected")
    assert log.connected_ns is not None and call.wake.is_set() and not call.ended.is_set()
    peer.on_state("failed")
    assert call.ended.is_set()


async def _offer() -> str:
    caller = AudioPeer(name="caller")
    try:
        return await caller.create_offer()
    finally:
        await caller.close()


async def test_offers_are_answered_per_signaling_and_logged() -> None:
    with pytest.raises(UsageError, match="not listening"):
        WebRtcMockAgent(CONFIG).url()
    before = open_counts()[0]
    async with WebRtcMockAgent(CONFIG) as agent, aiohttp.ClientSession() as http:
        whip = await post_offer(http, agent.url(), "whip", await _offer())
        pipecat = await post_offer(http, agent.url("pipecat"), "pipecat", await _offer())
        assert (whip.status, pipecat.status) == (201, 200)
        assert whip.sdp.startswith("v=0") and pipecat.pc_id is not None
        assert [(c.index, c.signaling, c.status) for c in agent.calls] == [
            (0, "whip", 201),
            (1, "pipecat", 200),
        ]
        assert len(agent.active) == 2
    assert agent.active == {} and open_counts()[0] == before  # stop ends every call


@pytest.mark.parametrize(("refuse", "sdp", "status"), [(503, None, 503), (None, "v=0\r\n", 400)])
async def test_a_refusal_or_a_bad_offer_is_an_http_error_and_logged(
    refuse: int | None, sdp: str | None, status: int
) -> None:
    config = MockAgentConfig(refuse_status=refuse)
    async with WebRtcMockAgent(config) as agent, aiohttp.ClientSession() as http:
        with pytest.raises(SignalingError) as refused:
            await post_offer(http, agent.url(), "whip", sdp or await _offer())
        assert refused.value.status == status
        (log,) = agent.calls
        assert log.status == status and agent.active == {}
        assert log.faults == (["refuse"] if refuse else [])
