"""The mock agent over WebRTC: the same conversation, answered over a peer connection.

It takes offers by WHIP or Pipecat signaling (:class:`~voxproxy.transports.webrtc.SignalingServer`)
and answers each with its own peer connection. The conversation logic is the
websocket mock agent's (:class:`~voxproxy.mockagent.call.Call`): its VAD hears
the caller's decoded audio stamped on RTP arrival, closes the turn, answers
with a fixture clip after the configured delay, and stops talking on a barge-in
after its reaction time. Only the wire differs:

* audio goes out as 20 ms Opus packets paced in real time (a paced transport has
  no ``burst`` mode), and, like Pipecat's output track, **silence is sent while
  idle** (``idle="silence"``; ``"nothing"`` sends no packets between answers);
* there is nothing to flush on a paced transport: on a barge-in the audio just
  stops (receipts say ``ceased``);
* data channels the caller opens are answered by echoing each message back
  prefixed with ``echo:`` (so a relay's channel forwarding can be checked).

Clips are sent at 48 kHz (the fixtures' 16 kHz tripled exactly), so each Opus
frame holds exactly one 20 ms slice of the clip. Every payload sent is logged
(:attr:`WebRtcCallLog.chunks`) with the clip position it carries, so a caller
that logs the arrival of each payload it receives knows exactly when each clip
sample reached it (:func:`voxproxy.loadgen.webrtc.webrtc_turn_truths`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Literal, cast

import numpy as np
from websockets.asyncio.server import ServerConnection

from voxproxy.clips import load_clips
from voxproxy.core.audio.resample import resample_linear
from voxproxy.core.errors import UsageError
from voxproxy.core.events import CALLER_TO_AGENT, Audio
from voxproxy.core.timebase import NS_PER_MS, NS_PER_S
from voxproxy.mockagent.base import AgentBase
from voxproxy.mockagent.call import Call
from voxproxy.mockagent.config import AgentClip, MockAgentConfig
from voxproxy.simcall.webrtc import CLIP_RATE_HZ, SentChunk, WebRtcCallLog, payload_key
from voxproxy.transports.webrtc import (
    AudioPeer,
    Channel,
    HttpError,
    MeasuredStream,
    Offer,
    RtpIn,
    Session,
    SignalingServer,
    add_trickled,
)

logger = logging.getLogger("voxproxy.mockagent.webrtc")

FRAME_NS = 20 * NS_PER_MS
Idle = Literal["silence", "nothing"]


class WebRtcCall(Call):
    """One peer connection to the mock agent."""

    def __init__(self, agent: WebRtcMockAgent, peer: AudioPeer, log: WebRtcCallLog) -> None:
        # Call's websocket-facing methods are all overridden below.
        super().__init__(agent, cast(ServerConnection, None), log)
        self.wlog = log
        self.peer = peer
        self.clips = agent.clips48
        self.idle: Idle = agent.idle
        self._heard = MeasuredStream()
        self.ended = asyncio.Event()
        self.id = f"mock{log.index:04d}"
        self._silence: bytes | None = None
        peer.on_rtp = self._rtp
        peer.on_state = self._state
        peer.on_channel = self._channel

    # -- Session (signaling) --------------------------------------------------------------

    async def hang_up(self) -> None:
        self.ended.set()

    async def add_candidates(self, candidates: list[dict[str, Any]]) -> None:
        await add_trickled(self.peer.pc, candidates)

    # -- life -----------------------------------------------------------------------------

    def _state(self, state: str) -> None:
        if state == "connected":
            self.wlog.connected_ns = time.monotonic_ns()
            self.wake.set()
        elif state in ("failed", "closed"):
            self.ended.set()

    async def run(self) -> None:
        self.log.accepted_ns = time.monotonic_ns()
        tasks = [
            asyncio.create_task(self._guard(self._speaker(), "speaker")),
            asyncio.create_task(self._guard(self._vad_timer(), "vad timer")),
        ]
        if self.idle == "silence":
            tasks.append(asyncio.create_task(self._guard(self._idle_pump(), "idle pump")))
        try:
            await self.ended.wait()
        finally:
            self.halted = True
            self.closed = True
            every = [*tasks, *self.background]
            for task in every:
                task.cancel()
            await asyncio.gather(*every, return_exceptions=True)
            await self.peer.close()
            self._finish_log()

    def _finish_log(self) -> None:
        self.log.ended_ns = time.monotonic_ns()

    def _ready(self) -> bool:
        return self.peer.state == "connected"

    # -- receiving ------------------------------------------------------------------------

    def _rtp(self, p: RtpIn) -> None:
        self.wlog.caller_packets += 1
        pcm = self._heard(p)
        if not pcm.size:
            return
        try:
            self._push_audio(Audio(CALLER_TO_AGENT, pcm, self._heard.rate_hz, p.t_ns), p.t_ns)
            self._after_vad(p.t_ns)
        except Exception as exc:  # odd input must never end the call
            self._error("caller audio", exc)

    def _channel(self, ch: Channel) -> None:
        def echo(message: str | bytes, t_ns: int) -> None:
            del t_ns
            self.wlog.channel_messages.append((ch.label, message))
            ch.send(("echo:" + message) if isinstance(message, str) else b"echo:" + message)

        ch.on_message = echo

    # -- sending --------------------------------------------------------------------------

    async def _send(self, message: str | bytes) -> bool:
        del message
        return not (self.halted or self.closed)

    async def _send_audio(self, clip: AgentClip, start: int, stop: int) -> bool:
        if self.halted or self.closed:
            return False
        pcm = clip.pcm[start:stop]
        frame = CLIP_RATE_HZ // 50
        if pcm.size % frame:
            # Whole 20 ms frames only (a clip's last piece is shorter): the encoder would
            # hold a partial frame back, and every later packet would lag by it.
            pad = frame - pcm.size % frame
            pcm = np.concatenate((pcm, np.zeros(pad, dtype=np.int16)))
        payloads = self.peer.send_pcm(pcm, clip.sample_rate_hz)
        now = time.monotonic_ns()
        r = self.playing
        index = r.index if r is not None else 0
        for p in payloads:
            self.wlog.chunks.append(SentChunk(index, start, stop - start, payload_key(p), now))
        return True

    async def _send_flush(self) -> bool:
        return False  # nothing to flush on a paced transport: the audio simply stops

    async def _idle_pump(self) -> None:
        """Silence every 20 ms while no answer is playing (as Pipecat's output track does)."""
        zeros = np.zeros(CLIP_RATE_HZ // 50, dtype=np.int16)
        next_ns: int | None = None
        while True:
            if not self._ready():
                await asyncio.sleep(0.02)
                next_ns = None
                continue
            now = time.monotonic_ns()
            if next_ns is None:
                next_ns = now
            if self.playing is None and not self.halted:
                self.peer.send_pcm(zeros, CLIP_RATE_HZ)
            next_ns += FRAME_NS
            delay = (next_ns - time.monotonic_ns()) / NS_PER_S
            if delay < -0.1:
                next_ns = time.monotonic_ns()
                delay = 0
            await asyncio.sleep(max(0.0, delay))


def _clips48(agent_clips: dict[str, AgentClip]) -> dict[str, AgentClip]:
    clips = load_clips()
    out: dict[str, AgentClip] = {}
    for name in agent_clips:
        c = clips[name]
        pcm = resample_linear(c.pcm, c.sample_rate_hz, CLIP_RATE_HZ)
        onset = round(c.onset_ms * CLIP_RATE_HZ / 1000) if c.segments_ms else 0
        out[name] = AgentClip(name, pcm, CLIP_RATE_HZ, min(onset, pcm.size))
    return out


class WebRtcMockAgent(AgentBase):
    """The mock agent, answering WebRTC offers (WHIP at ``/whip``, Pipecat at ``/api/offer``).

    Use as ``async with WebRtcMockAgent(config) as agent:`` and offer to
    :meth:`url`. ``config.dialect`` is ignored (there is no wire dialect); its
    delay, jitter, barge-in reaction, responses, greeting, seed and
    ``refuse_status`` apply. ``codecs`` restricts what the agent accepts (e.g.
    ``("pcmu",)`` makes a relay transcode).
    """

    def __init__(
        self,
        config: MockAgentConfig | None = None,
        *,
        idle: Idle = "silence",
        codecs: tuple[str, ...] | None = None,
        answer_delay_ms: float = 0.0,
    ) -> None:
        super().__init__(config)
        self.clips48 = _clips48(self.clips)
        self.idle: Idle = idle
        self.codecs = codecs
        self.answer_delay_ms = answer_delay_ms  # fault: wait this long before answering an offer
        self.calls: list[WebRtcCallLog] = []
        self.active: dict[str, WebRtcCall] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._next_index = 0
        self.signaling = SignalingServer(self._open_session)

    # -- serving --------------------------------------------------------------------------

    async def _open_session(self, offer: Offer) -> tuple[str, Session]:
        log = WebRtcCallLog(
            index=self._next_index,
            path="",
            headers=dict(offer.headers),
            subprotocol=None,
            signaling=offer.signaling,
        )
        self._next_index += 1
        self.calls.append(log)
        if self.answer_delay_ms:
            await asyncio.sleep(self.answer_delay_ms / 1000)
        status = self.config.refuse_status
        if status is not None:
            log.status = status
            log.faults.append("refuse")
            raise HttpError(status, "refused by the mock agent (fault)")
        peer = AudioPeer(codecs=self.codecs, name="mock-agent")
        call = WebRtcCall(self, peer, log)
        try:
            answer = await peer.answer(offer.sdp)
        except Exception as exc:
            await peer.close()
            log.status = 400
            raise HttpError(400, str(exc)) from None
        log.status = 201 if offer.signaling == "whip" else 200
        self.active[call.id] = call
        task = asyncio.get_running_loop().create_task(self._run(call))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return answer, call

    async def _run(self, call: WebRtcCall) -> None:
        try:
            await call.run()
        finally:
            self.active.pop(call.id, None)
            self.signaling.forget(call.id)

    def url(self, signaling: str = "whip") -> str:
        if self.signaling.port is None:
            raise UsageError("the mock agent is not listening; call start() first")
        return self.signaling.url("pipecat" if signaling == "pipecat" else "whip")

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        return await self.signaling.start(host, port)

    async def stop(self) -> None:
        await self.signaling.stop()
        for call in list(self.active.values()):
            call.ended.set()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._close_http()
