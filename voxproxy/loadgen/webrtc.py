"""A real-time scripted caller over WebRTC, and the ground truth of such a call.

:class:`WebRtcCaller` is the load generator's :class:`~voxproxy.loadgen.caller.ScriptedCaller`
with a peer connection instead of a websocket: it offers (WHIP or Pipecat
signaling), then captures its script at 48 kHz and sends one 20 ms Opus packet
at the *end* of each frame's interval, like a live microphone (so frame ``k``
covers ``[t0 + k*20 ms, t0 + (k+1)*20 ms]`` and the proxy's figures and its own
agree, MEASUREMENT.md section 1). It sends silence between utterances, as a
browser does. The agent's audio is decoded and stamped on RTP arrival and, on a
paced transport, heard on arrival: its own detector follows the agent's speech
for the script (wait for the answer, barge in while it talks).

Ground truth: the caller knows when its own speech truly started and ended
(clip edges and capture instants). For the agent's speech it records the arrival
of every payload it receives (keyed by content); the WebRTC mock agent logs
which clip samples each payload it sent carries
(:class:`~voxproxy.mockagent.webrtc.SentChunk`). A relay that forwards payloads
unchanged keeps the keys, so :func:`webrtc_turn_truths` knows exactly when each
agent speech sample reached the caller. Both sides encode with libopus, whose
6.5 ms look-ahead delays every decoded edge alike: it cancels in
time-to-first-sound and in stop latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from bisect import bisect_left
from dataclasses import dataclass, field

import aiohttp

from voxproxy.clips import clip as load_clip
from voxproxy.core.analysis.vad import SpeechDetector, VadConfig
from voxproxy.core.events import AGENT_TO_CALLER, Audio, Pcm
from voxproxy.core.timebase import NS_PER_MS, NS_PER_S
from voxproxy.loadgen.caller import (
    TICK_NS,
    CallerConfig,
    CallRecord,
    NoiseBed,
    ScriptedCaller,
    Step,
)
from voxproxy.loadgen.record import NoiseTruth, SpeechTruth
from voxproxy.loadgen.truth import TurnTruth, truths_of_turns
from voxproxy.simcall.webrtc import CLIP_RATE_HZ, WebRtcCallLog, payload_key
from voxproxy.transports.webrtc import (
    AudioPeer,
    Channel,
    MeasuredStream,
    RtpIn,
    Signaling,
    SignalingError,
    hang_up,
    post_offer,
)

_GAP_NS = 100 * NS_PER_MS  # agent audio arriving this late after the last is a new stretch


@dataclass(slots=True)
class WebRtcRecord(CallRecord):
    """A :class:`CallRecord` plus what only a WebRTC call has."""

    # payload key -> arrival times (silent payloads repeat, so a key may arrive many times)
    arrivals: dict[bytes, list[int]] = field(default_factory=dict)
    packets_received: int = 0
    http_status: int | None = None
    http_reason: str | None = None
    connected_ns: int | None = None
    channel_messages: list[tuple[str, str | bytes]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class WebRtcCallerConfig:
    url: str  # the signaling URL (a WHIP endpoint, or Pipecat's .../api/offer)
    signaling: Signaling = "whip"
    channels: tuple[str, ...] = ()  # data channels to open (e.g. "oai-events")
    channel_greeting: str | None = None  # sent on each channel once it opens
    headers: dict[str, str] = field(default_factory=dict)
    connect_timeout_s: float = 10.0
    tail_ms: float = 800.0
    noise_dbfs: float | None = None
    noise_bed: NoiseBed | None = None
    seed: int = 0
    keep_arrivals: bool = True


class WebRtcCaller(ScriptedCaller):
    """One WebRTC call following a script. Use :meth:`run_webrtc`."""

    def __init__(self, config: WebRtcCallerConfig, script: list[Step]) -> None:
        super().__init__(
            CallerConfig(
                url=config.url,
                dialect="raw",
                sample_rate_hz=CLIP_RATE_HZ,
                tail_ms=config.tail_ms,
                noise_dbfs=config.noise_dbfs,
                noise_bed=config.noise_bed,
                keep_messages=False,
                seed=config.seed,
            ),
            script,
        )
        self.wconfig = config
        self.record: WebRtcRecord = WebRtcRecord()
        self.peer: AudioPeer | None = None
        self._heard = MeasuredStream()
        self._silence: bytes | None = None
        self._agent_end_ns: int | None = None
        # The stream position at the end of each frame handed to aiortc's sender, in order.
        self._pushed: list[int] = []

    # -- audio out ------------------------------------------------------------------------

    def _encode(self, frame: Pcm) -> bytes | str:
        peer = self.peer
        assert peer is not None
        if not frame.any():
            if self._silence is None:
                enc = peer.encoder()
                assert enc is not None
                self._silence = b"".join(enc.encode(frame, self.rate)[:1])
            if self._silence:
                return self._silence
        enc = peer.encoder()
        assert enc is not None
        payloads = enc.encode(frame, self.rate)
        return payloads[0] if payloads else b""

    async def _send(self, payload: bytes | str) -> None:
        self._write_now(payload)

    def _write_now(self, payload: bytes | str) -> bool:
        assert self.peer is not None and isinstance(payload, bytes)
        if payload and self.peer.send_encoded(payload):
            # (the frame's end in the stream: the sender counts it before it sends)
            self._pushed.append(self._sent_samples)
        return True

    # -- audio in -------------------------------------------------------------------------

    def _rtp(self, p: RtpIn) -> None:
        rec = self.record
        rec.packets_received += 1
        if self.wconfig.keep_arrivals:
            rec.arrivals.setdefault(payload_key(p.payload), []).append(p.t_ns)
        pcm = self._heard(p)
        if pcm.size:
            self._agent_audio(Audio(AGENT_TO_CALLER, pcm, self._heard.rate_hz, p.t_ns), p.t_ns)
            self._tick(p.t_ns)

    def _agent_audio(self, ev: Audio, t: int) -> None:
        """Agent audio is heard on arrival (a paced transport: no playout queue)."""
        vad = self._agent_vad
        if vad is None:
            vad = self._agent_vad = SpeechDetector(ev.sample_rate_hz, VadConfig(), batch_ms=40.0)
            self.record.agent_rate_hz = ev.sample_rate_hz
        end = self._agent_end_ns
        vad.push(ev.pcm, t, continuous=end is not None and t - end <= _GAP_NS)
        self._agent_end_ns = t + ev.pcm.size * NS_PER_S // ev.sample_rate_hz

    def _tick(self, now: int, force: bool = False) -> None:
        vad = self._agent_vad
        if vad is None or (not force and now - self._last_tick_ns < TICK_NS):
            return
        self._last_tick_ns = now
        if self.record.hear_agent(vad, now):
            self._last_agent_audible_ns = now

    def _channel_opened(self, ch: Channel) -> None:
        def on_message(message: str | bytes, t_ns: int) -> None:
            del t_ns
            self.record.channel_messages.append((ch.label, message))

        ch.on_message = on_message
        if self.wconfig.channel_greeting is not None:
            ch.send(self.wconfig.channel_greeting)

    # -- the call -------------------------------------------------------------------------

    async def run(self) -> CallRecord:
        return await self.run_webrtc()

    async def run_webrtc(self) -> WebRtcRecord:
        cfg = self.wconfig
        rec = self.record
        peer = self.peer = AudioPeer(name="caller")
        peer.on_rtp = self._rtp
        connected = asyncio.Event()

        def state(s: str) -> None:
            if s in ("connected", "failed", "closed"):
                connected.set()

        peer.on_state = state
        session_url: str | None = None
        async with aiohttp.ClientSession() as http:
            try:
                channels = [peer.open_channel(label) for label in cfg.channels]
                for ch in channels:
                    ch.on_open = lambda ch=ch: self._channel_opened(ch)
                offer = await peer.create_offer()
                try:
                    answer = await post_offer(
                        http, cfg.url, cfg.signaling, offer, headers=cfg.headers
                    )
                except SignalingError as exc:
                    rec.http_status = exc.upstream_status or exc.status
                    rec.http_reason = exc.reason
                    rec.error = f"signaling: {exc.reason}"
                    return rec
                rec.http_status = answer.status
                session_url = answer.session_url
                await peer.accept_answer(answer.sdp)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(cfg.connect_timeout_s):
                        await connected.wait()
                if peer.state != "connected":
                    rec.error = f"the peer connection did not connect ({peer.state})"
                    return rec
                rec.connected_ns = peer.connected_ns
                sent = peer.track.sent_log = []
                await self._converse()
                if not peer.track.dropped:
                    frame = self.frame
                    move_to_departures(
                        rec.speech, rec.noises, self._pushed, sent, rec.t0_ns, self.rate, frame
                    )
            except Exception as exc:
                rec.error = f"{type(exc).__name__}: {exc}"
            finally:
                if session_url is not None and cfg.signaling == "whip":
                    await hang_up(http, session_url)
                await peer.close()
        return rec

    async def _converse(self) -> None:
        self.record.t0_ns = time.monotonic_ns()
        await self._play()
        await self._wind_down()


# -- ground truth -------------------------------------------------------------------------


def move_to_departures(
    speech: list[SpeechTruth],
    noises: list[NoiseTruth],
    pushed: list[int],
    sent: list[int],
    t0_ns: int,
    rate: int,
    frame: int,
) -> bool:
    """Move the caller's truth to the proxy's vantage: each edge by how late the frame
    holding it left against its schedule (the end of its interval), which the proxy sees
    as it arrives (its kernel stamp). ``pushed``: each frame's end position in the stream
    as it was handed to aiortc's sender; ``sent``: when the sender took each, in order
    (it writes it in the same step; the last few may still have been queued at the
    hang-up: their edges stay). Call it only when the sending queue dropped nothing, else
    the order does not match; False, nothing moved, where it plainly does not."""
    if len(sent) > len(pushed):
        return False
    lag = {end: t - (t0_ns + end * NS_PER_S // rate) for end, t in zip(pushed, sent, strict=False)}

    def moved(t_ns: int, last: bool) -> int:
        pos = round((t_ns - t0_ns) * rate / NS_PER_S) - (1 if last else 0)
        return t_ns + lag.get((pos // frame + 1) * frame, 0)

    for s in speech:
        s.onset_ns, s.offset_ns = moved(s.onset_ns, False), moved(s.offset_ns, True)
    for n in noises:
        n.onset_ns, n.offset_ns = moved(n.onset_ns, False), moved(n.offset_ns, True)
    return True


@dataclass(frozen=True, slots=True)
class AgentSpeechTruth:
    response: int
    clip: str
    onset_ns: int  # the clip's speech onset, as it reached the caller
    end_ns: int  # the end of the last speech sample that reached the caller


MAX_TRANSIT_NS = 500 * NS_PER_MS


def _arrival_after(times: list[int] | None, sent_ns: int) -> int | None:
    """The first arrival of a payload after it was sent (same host, same clock).

    ``sent_ns`` is taken just after the payload was queued for aiortc's sender,
    which sends it later, so it arrives after ``sent_ns``; a payload that repeats
    (silence) arrives many times, and the first after the send is the one sent."""
    if not times:
        return None
    i = bisect_left(times, sent_ns)
    if i < len(times) and times[i] - sent_ns <= MAX_TRANSIT_NS:
        return times[i]
    return None


def webrtc_agent_speech(record: WebRtcRecord, log: WebRtcCallLog) -> list[AgentSpeechTruth]:
    """When each answer's speech reached the caller, from payload arrivals."""
    rate = CLIP_RATE_HZ
    out: list[AgentSpeechTruth] = []
    for r in log.responses:
        chunks = [c for c in log.chunks if c.response == r.index]
        if not chunks:
            continue
        c = load_clip(r.clip)
        onset_pos = round(c.onset_ms * rate / 1000)
        # Speech segments, in clip samples.
        segs = [(round(a * rate / 1000), round(b * rate / 1000)) for a, b in c.segments_ms]
        onset_ns: int | None = None
        end_ns: int | None = None
        for ch in chunks:
            arrived = _arrival_after(record.arrivals.get(ch.key), ch.sent_ns)
            if arrived is None:
                continue
            lo, hi = ch.clip_pos, ch.clip_pos + ch.n
            if onset_ns is None and lo <= onset_pos < hi:
                onset_ns = arrived + (onset_pos - lo) * NS_PER_S // rate
            for a, b in segs:
                top = min(b, hi)
                if max(a, lo) < top:
                    end_ns = arrived + (top - lo) * NS_PER_S // rate
        if onset_ns is not None and end_ns is not None:
            out.append(AgentSpeechTruth(r.index, r.clip, onset_ns, end_ns))
    return out


def webrtc_turn_truths(record: WebRtcRecord, log: WebRtcCallLog) -> list[TurnTruth]:
    """The truth of every caller turn: its edges, the answer's onset and any stop latency."""
    return truths_of_turns(record.speech, webrtc_agent_speech(record, log))
