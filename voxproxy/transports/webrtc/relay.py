"""The relay: a caller's peer connection and the agent's, back to back, media and
data channels forwarded unchanged, measurement fed copies through :class:`RelayObserver`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import aiohttp

from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Audio, Direction, Pcm
from voxproxy.httpserve import (
    HEADER_TIMEOUT_S,
)
from voxproxy.transports.ends import EndCause
from voxproxy.transports.webrtc import signaling_client
from voxproxy.transports.webrtc.codecs import (
    AudioEncoder,
    CodecInfo,
    MeasuredStream,
    RtpIn,
    frame_ticks,
)
from voxproxy.transports.webrtc.ends import EndInfo
from voxproxy.transports.webrtc.media import MAX_PACE_MS, Channel
from voxproxy.transports.webrtc.peer import AudioPeer, BadSdp
from voxproxy.transports.webrtc.signaling_server import (
    HttpError,
    Offer,
    Session,
    SignalingServer,
    add_trickled,
)
from voxproxy.transports.websocket import Admission
from voxproxy.transports.websocket.arrivals import ForwardDelays

log = logging.getLogger("voxproxy.webrtc")

# The default pacing constant (WebRtcRelayConfig.pace_ms): none. Pacing hides only stalls
# of the relay shorter than the constant, which a receiver's jitter buffer (20 ms steps)
# barely notices, and costs every packet the constant plus the timer's own lateness on a
# busy core; what the relay's stalls do to the caller is stated instead (its late packets
# widen the figures' uncertainty). docs/measurement.md has the figures.
PACE_MS = 0.0


@dataclass(frozen=True, slots=True)
class RelayStats:
    """What the forwarding plane did with one call's audio (both directions)."""

    packets: tuple[int, int]
    passthrough: tuple[int, int]
    transcoded: tuple[int, int]
    dropped: tuple[int, int]
    forward_ns: tuple[int, int]  # summed arrival -> handed to the other leg's sender
    # Packets that left more than media.LATE_NS after their arrival plus the pacing
    # constant, and the most one did (what the far end's jitter buffer saw of the relay).
    late: tuple[int, int] = (0, 0)
    late_max_ns: tuple[int, int] = (0, 0)
    # The forwarding delays per direction, and how many packets the kernel stamped / the
    # loop stamped when it read them (the receipt's forwarding).
    forwarded: tuple[ForwardDelays, ForwardDelays] | None = None
    kernel_stamped: tuple[int, int] = (0, 0)
    read_stamped: tuple[int, int] = (0, 0)


class RelayObserver(Protocol):
    """What the relay tells the measurement side. Implementations must be cheap."""

    def upstream_headers(self) -> dict[str, str]:
        """Extra headers for our offer to the agent (call id, trace context)."""
        ...

    def on_upstream_open(self, t_ns: int, status: int) -> None: ...

    def on_audio(self, audio: Audio, wire_bytes: int, kernel: bool = True) -> None:
        """Audio decoded for measurement, carried by a packet of ``wire_bytes`` that
        arrived at ``audio.t_ns``: the kernel's receive time, or (``kernel`` False) when
        the event loop read it."""
        ...

    def on_receiver_report(self, t_ns: int, jitter_ms: float, rtt_ms: float | None) -> None:
        """The caller's RTCP report of the audio we send it (RFC 3550 jitter, round trip)."""
        ...

    def on_late(self, t_ns: int, late_ms: float) -> None:
        """A packet towards the caller left ``late_ms`` later than the earliest of the
        last 2 s would have it by their RTP timestamps (a stall of the relay, a burst of
        the agent's): what the caller's jitter buffer grows by."""
        ...

    def on_data(
        self, direction: Direction, label: str, message: str | bytes, t_ns: int
    ) -> None: ...

    def on_end(self, t_ns: int, info: EndInfo, stats: RelayStats) -> None: ...


RelayObserverFactory = Callable[[int, Offer], RelayObserver]


@dataclass(frozen=True, slots=True)
class WebRtcRelayConfig:
    upstream: str  # the agent's signaling URL (WHIP endpoint, or Pipecat's .../api/offer)
    signaling: signaling_client.Signaling = "whip"
    signaling_timeout_s: float = 10.0
    ice_timeout_s: float = 15.0  # both legs must connect within this time after the answer
    idle_timeout_s: float | None = None
    ice_servers: tuple[str, ...] = ()
    agent_codecs: tuple[str, ...] | None = None  # codec preference towards the agent
    caller_codecs: tuple[str, ...] | None = None  # codec preference towards the caller
    measure: bool = True
    whip_path: str = signaling_client.WHIP_PATH
    max_calls: int | None = None  # calls in progress at most; more are refused with 503
    header_timeout_s: float = HEADER_TIMEOUT_S  # for a signaling request's headers to arrive
    # Each packet leaves at its arrival (the kernel's) plus this: a stall of the event loop
    # shorter than this does not reach the far end's jitter buffer (media.OutboundTrack).
    # Off by default (PACE_MS).
    pace_ms: float = PACE_MS

    def __post_init__(self) -> None:
        if not 0.0 <= self.pace_ms <= MAX_PACE_MS:
            raise ValueError(f"pace_ms must lie in 0-{MAX_PACE_MS:g} ms, got {self.pace_ms:g}")


class _Direction:
    """Forwarding state of one direction: source leg -> destination leg."""

    __slots__ = (
        "dropped",
        "dst",
        "encoder",
        "forward_ns",
        "kernel",
        "measured",
        "packets",
        "passthrough",
        "transcoded",
        "tx_pts",
    )

    def __init__(self, dst: AudioPeer) -> None:
        self.dst = dst
        self.measured = MeasuredStream()
        self.encoder: AudioEncoder | None = None
        self.tx_pts: int | None = None
        self.packets = 0
        self.passthrough = 0
        self.transcoded = 0
        self.dropped = 0
        self.forward_ns = 0
        self.kernel = 0  # packets whose arrival the kernel stamped


class WebRtcRelay:
    """One relayed call: the caller's peer, the agent's peer, and what passes between them."""

    def __init__(self, server: WebRtcRelayServer, offer: Offer) -> None:
        self.server = server
        self.config = cfg = server.config
        self.offer = offer
        self.id = uuid.uuid4().hex
        self.t_start_ns = time.monotonic_ns()
        self._loop = asyncio.get_running_loop()
        self.observer: RelayObserver | None = None
        try:
            self.observer = server.observer_factory(self.t_start_ns, offer)
        except Exception:
            log.exception("observer factory failed; the call is relayed unmeasured")
        self.caller = self._peer("caller", cfg.caller_codecs)
        self.agent = self._peer("agent", cfg.agent_codecs)
        self._dirs = (_Direction(self.agent), _Direction(self.caller))
        self.caller.on_rtp = lambda p: self._rtp(CALLER_TO_AGENT, p)
        self.agent.on_rtp = lambda p: self._rtp(AGENT_TO_CALLER, p)
        self.caller.on_channel = lambda ch: self._channel(CALLER_TO_AGENT, ch)
        self.agent.on_channel = lambda ch: self._channel(AGENT_TO_CALLER, ch)
        self.caller.on_state = lambda s: self._state(CALLER_TO_AGENT, s)
        self.agent.on_state = lambda s: self._state(AGENT_TO_CALLER, s)
        # What can be seen of the way to the caller (its jitter buffer's input).
        self.caller.on_report = self._receiver_report
        self.caller.track.on_late = self._late
        self.agent_answer: signaling_client.AgentAnswer | None = None
        self._end: EndInfo | None = None
        self._ending: asyncio.Task[None] | None = None
        self._timers: list[asyncio.TimerHandle] = []
        self._last_activity = time.monotonic()
        self.observer_errors = 0
        self.answered = False

    def _peer(self, name: str, codecs: tuple[str, ...] | None) -> AudioPeer:
        """One leg's peer: its codecs, the call's ICE servers and pacing."""
        cfg = self.config
        return AudioPeer(
            ice_servers=cfg.ice_servers,
            codecs=codecs,
            name=name,
            pace_ms=cfg.pace_ms,
            direct_send=True,
        )

    # -- setup ----------------------------------------------------------------------------

    async def open(self) -> str:
        """Negotiate both legs; returns the caller's answer or raises :class:`HttpError`."""
        cfg = self.config
        try:
            direction = AudioPeer.offer_direction(self.offer.sdp) if self.offer.sdp.strip() else ""
        except Exception:
            direction = ""
        try:
            # The caller's offer is checked and applied first; its answer is only created
            # (and returned) once the agent has answered ours, so that a refusal reaches the
            # caller as an HTTP error.
            await self.caller.apply_offer(self.offer.sdp)
        except BadSdp as exc:
            await self._fail(400, str(exc), EndInfo(EndCause.BAD_OFFER, initiator="caller"))
        headers = {}
        auth = self.offer.headers.get("authorization")
        if auth:
            headers["Authorization"] = auth
        if self.observer is not None:
            try:
                headers.update(self.observer.upstream_headers())
            except Exception:
                self._observer_failed()
        try:
            sdp = await self.agent.create_offer(
                direction=direction or "sendrecv", data=self.caller.offered_data
            )
            answer = await signaling_client.post_offer(
                self.server.http,
                cfg.upstream,
                cfg.signaling,
                sdp,
                headers=headers,
                timeout_s=cfg.signaling_timeout_s,
                request_data=self.offer.request_data,
            )
            self.agent_answer = answer
            await self.agent.accept_answer(answer.sdp)
        except signaling_client.SignalingError as exc:
            initiator = "agent" if exc.cause is EndCause.UPSTREAM_REFUSED else "proxy"
            await self._fail(
                exc.status,
                exc.reason,
                EndInfo(exc.cause, upstream_status=exc.upstream_status, initiator=initiator),
            )
        except BadSdp as exc:
            status = self.agent_answer.status if self.agent_answer else None
            await self._fail(
                502,
                f"the agent's answer is unusable: {exc}",
                EndInfo(EndCause.UPSTREAM_UNREACHABLE, upstream_status=status, initiator="agent"),
            )
        except Exception as exc:
            log.exception("could not open the agent leg")
            await self._fail(
                500, f"proxy error: {exc!r}", EndInfo(EndCause.PROXY_ERROR, initiator="proxy")
            )
        try:
            answer_sdp = await self.caller.finish_answer()
        except BadSdp as exc:
            await self._fail(400, str(exc), EndInfo(EndCause.BAD_OFFER, initiator="caller"))
        self.answered = True
        loop = asyncio.get_running_loop()
        self._timers.append(loop.call_later(cfg.ice_timeout_s, self._ice_deadline))
        if cfg.idle_timeout_s:
            self._timers.append(loop.call_later(cfg.idle_timeout_s, self._idle_check))
        return answer_sdp

    async def _fail(self, status: int, reason: str, info: EndInfo) -> NoReturn:
        info.http_status = status
        info.reason = reason
        await self.end(info)
        raise HttpError(status, reason) from None

    # -- forwarding -----------------------------------------------------------------------

    def _rtp(self, direction: Direction, p: RtpIn) -> None:
        d = self._dirs[direction]
        d.packets += 1
        d.kernel += p.kernel
        self._last_activity = time.monotonic()
        dst = d.dst
        out_codec = dst.send_codec if dst.state == "connected" else None
        pcm: Pcm | None = None
        if out_codec is None:
            d.dropped += 1
        elif out_codec.same_as(p.codec):
            # The payload as it came, its RTP timestamp carried over.
            dst.send_payload(p.payload, p.timestamp, out_codec, p.t_ns)
            d.passthrough += 1
            d.forward_ns += time.monotonic_ns() - p.t_ns
        else:
            pcm = d.measured.decode(p)
            self._transcode(d, p, pcm, out_codec)
            d.forward_ns += time.monotonic_ns() - p.t_ns
        if self.observer is not None and self.config.measure:
            # After the send: the packet was written above (or aiortc's sender task, woken
            # by the push, runs first: the loop's ready queue is FIFO), and the datagrams
            # read in this turn of the loop are forwarded before any is measured.
            self._loop.call_soon(self._measure, d, direction, p, pcm)

    def _measure(self, d: _Direction, direction: Direction, p: RtpIn, pcm: Pcm | None) -> None:
        observer = self.observer
        if observer is None or self._end is not None:
            return
        try:
            if pcm is None:
                pcm = d.measured.decode(p)
            vad_pcm = d.measured.for_vad(p, pcm)
            audio = Audio(direction, vad_pcm, d.measured.rate_hz, p.t_ns)
            observer.on_audio(audio, len(p.payload), p.kernel)
        except Exception:
            self._observer_failed()

    def _receiver_report(self, t_ns: int, jitter_ms: float, rtt_ms: float | None) -> None:
        if self.observer is not None and self._end is None:
            try:
                self.observer.on_receiver_report(t_ns, jitter_ms, rtt_ms)
            except Exception:
                self._observer_failed()

    def _late(self, t_ns: int, late_ns: int) -> None:
        if self.observer is not None and self._end is None:
            try:
                self.observer.on_late(t_ns, late_ns / 1e6)
            except Exception:
                self._observer_failed()

    def _transcode(self, d: _Direction, p: RtpIn, pcm: Pcm, out_codec: CodecInfo) -> None:
        dec = d.measured.decoder
        assert dec is not None
        if d.encoder is None or d.encoder.codec != out_codec:
            d.encoder = AudioEncoder(out_codec)
        payloads = d.encoder.encode(pcm, dec.sample_rate_hz)
        ticks = frame_ticks(out_codec)
        # Keep the source's timing: a pause in its timestamps is a pause in ours.
        src_pts = p.timestamp * out_codec.clock_rate // p.codec.clock_rate
        pts = src_pts if d.tx_pts is None else max(d.tx_pts, src_pts - ticks * len(payloads))
        for payload in payloads:
            d.dst.send_payload(payload, pts, out_codec, p.t_ns)
            pts += ticks
            d.transcoded += 1
        d.tx_pts = pts

    # -- data channels --------------------------------------------------------------------

    def _channel(self, direction: Direction, ch: Channel) -> None:
        """A channel the ``direction``'s sender opened: open its twin on the other leg."""
        other_peer = self.agent if direction is CALLER_TO_AGENT else self.caller
        if other_peer.closed:
            return
        dc = ch.dc
        try:
            twin = other_peer.open_channel(
                ch.label,
                ordered=dc.ordered,
                max_retransmits=dc.maxRetransmits,
                max_packet_lifetime=dc.maxPacketLifeTime,
                protocol=dc.protocol,
            )
        except Exception:
            log.exception("could not open data channel %r on the other leg", ch.label)
            return
        back = AGENT_TO_CALLER if direction is CALLER_TO_AGENT else CALLER_TO_AGENT
        ch.on_message = lambda m, t: self._data(direction, ch.label, twin, m, t)
        twin.on_message = lambda m, t: self._data(back, ch.label, ch, m, t)
        ch.on_close = twin.close
        twin.on_close = ch.close

    def _data(
        self, direction: Direction, label: str, dst: Channel, message: str | bytes, t_ns: int
    ) -> None:
        self._last_activity = time.monotonic()
        dst.send(message)
        if self.observer is not None:
            try:
                self.observer.on_data(direction, label, message, t_ns)
            except Exception:
                self._observer_failed()

    # -- life -----------------------------------------------------------------------------

    def _state(self, direction: Direction, state: str) -> None:
        if self._end is not None:
            return
        caller = direction is CALLER_TO_AGENT
        if state == "connected" and not caller and self.observer is not None:
            status = self.agent_answer.status if self.agent_answer else 200
            try:
                t = self.agent.connected_ns or time.monotonic_ns()
                self.observer.on_upstream_open(t, status)
            except Exception:
                self._observer_failed()
        elif state == "failed":
            peer = self.caller if caller else self.agent
            if peer.connected_ns is None:
                if caller:
                    info = EndInfo(EndCause.ICE_FAILED, initiator="caller")
                else:
                    info = EndInfo(
                        EndCause.UPSTREAM_UNREACHABLE,
                        initiator="agent",
                        reason="the media path to the agent never connected",
                    )
            else:
                cause = EndCause.CALLER_VANISHED if caller else EndCause.AGENT_VANISHED
                info = EndInfo(cause, initiator="caller" if caller else "agent")
            self._spawn_end(info)
        elif state == "closed" and self.answered:
            cause = EndCause.CALLER_CLOSED if caller else EndCause.AGENT_CLOSED
            self._spawn_end(EndInfo(cause, initiator="caller" if caller else "agent"))

    def _ice_deadline(self) -> None:
        if self._end is not None:
            return
        late: tuple[tuple[AudioPeer, EndCause, str, str], ...] = (
            (self.caller, EndCause.ICE_FAILED, "caller", "the caller's ICE"),
            (self.agent, EndCause.UPSTREAM_UNREACHABLE, "agent", "the media path to the agent"),
        )
        for side, cause, initiator, what in late:
            if side.connected_ns is None:
                reason = f"{what} did not connect in time"
                self._spawn_end(EndInfo(cause, initiator=initiator, reason=reason))
                return

    def _idle_check(self) -> None:
        timeout = self.config.idle_timeout_s
        if self._end is not None or not timeout:
            return
        idle = time.monotonic() - self._last_activity
        if idle >= timeout:
            self._spawn_end(EndInfo(EndCause.IDLE_TIMEOUT, initiator="proxy"))
        else:
            loop = asyncio.get_running_loop()
            self._timers.append(loop.call_later(timeout - idle, self._idle_check))

    def _spawn_end(self, info: EndInfo) -> None:
        if self._ending is None:
            self._ending = asyncio.get_running_loop().create_task(self.end(info))
            self.server.ending.add(self._ending)
            self._ending.add_done_callback(self.server.ending.discard)

    async def hang_up(self) -> None:
        """The caller's WHIP DELETE."""
        await self.end(EndInfo(EndCause.CALLER_CLOSED, initiator="caller"))

    async def add_candidates(self, candidates: list[dict[str, Any]]) -> None:
        await add_trickled(self.caller.pc, candidates)

    async def end(self, info: EndInfo) -> None:
        """Close both legs (once), hang up on the agent and report."""
        if self._end is not None:
            if self._ending is not None and self._ending is not asyncio.current_task():
                await asyncio.shield(self._ending)
            return
        self._end = info
        t_ns = time.monotonic_ns()
        for timer in self._timers:
            timer.cancel()
        self.server.relays.discard(self)
        self.server.admission.release()
        self.server.signaling.forget(self.id)
        await asyncio.gather(self.caller.close(), self.agent.close(), return_exceptions=True)
        answer = self.agent_answer
        if answer is not None and answer.session_url and info.cause is not EndCause.AGENT_CLOSED:
            await signaling_client.hang_up(self.server.http, answer.session_url)
        stats = RelayStats(
            packets=(self._dirs[0].packets, self._dirs[1].packets),
            passthrough=(self._dirs[0].passthrough, self._dirs[1].passthrough),
            transcoded=(self._dirs[0].transcoded, self._dirs[1].transcoded),
            dropped=(
                self._dirs[0].dropped + self.agent.track.dropped,
                self._dirs[1].dropped + self.caller.track.dropped,
            ),
            forward_ns=(self._dirs[0].forward_ns, self._dirs[1].forward_ns),
            late=(self.agent.track.late, self.caller.track.late),
            late_max_ns=(self.agent.track.late_max_ns, self.caller.track.late_max_ns),
            forwarded=(self.agent.track.forwarded, self.caller.track.forwarded),
            kernel_stamped=(self._dirs[0].kernel, self._dirs[1].kernel),
            read_stamped=(
                self._dirs[0].packets - self._dirs[0].kernel,
                self._dirs[1].packets - self._dirs[1].kernel,
            ),
        )
        self.server.finished.append(stats)
        observer, self.observer = self.observer, None
        if observer is not None:
            try:
                observer.on_end(t_ns, info, stats)
            except Exception:
                self._observer_failed()
        # (Not held past the call: its measurement is freed at once, not when the cycles
        # between the relay and its peer connections are collected.)

    def _observer_failed(self) -> None:
        self.observer_errors += 1
        if self.observer_errors == 1:
            log.exception("measurement failed; the call goes on")


class WebRtcRelayServer:
    """Serves callers (WHIP and Pipecat signaling) and relays each call to the agent."""

    def __init__(self, config: WebRtcRelayConfig, observer_factory: RelayObserverFactory) -> None:
        self.config = config
        self.observer_factory = observer_factory
        self.relays: set[WebRtcRelay] = set()
        self.signaling = SignalingServer(
            self._open_session,
            whip_path=config.whip_path,
            header_timeout_s=config.header_timeout_s,
        )
        self.finished: deque[RelayStats] = deque(maxlen=4096)
        self.admission = Admission(config.max_calls)
        self.ending: set[asyncio.Task[None]] = set()  # calls ending on their own
        self._http: aiohttp.ClientSession | None = None

    @property
    def http(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = aiohttp.ClientSession()
        return self._http

    async def _open_session(self, offer: Offer) -> tuple[str, Session]:
        # Over the cap, the offer is refused before anything is spent on it: no peer
        # connection (so no UDP socket), no offer to the agent, no receipt.
        admission = self.admission
        if not admission.admit():
            n = admission.refused
            if n & (n - 1) == 0:  # the 1st, 2nd, 4th, 8th ... refusal
                log.warning("%s: offer refused with 503 (%d refused so far)", admission.reason, n)
            raise HttpError(
                503, f"voxproxy: {admission.reason}; try again later", {"Retry-After": "1"}
            )
        try:
            relay = WebRtcRelay(self, offer)
        except BaseException:
            admission.release()
            raise
        self.relays.add(relay)
        answer = await relay.open()
        return answer, relay

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        return await self.signaling.start(host, port)

    async def stop(self, drain_s: float = 0.0) -> None:
        """Stop accepting; let calls finish for ``drain_s``; then end the rest."""
        await self.signaling.stop()
        deadline = time.monotonic() + drain_s
        while self.relays and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.gather(
            *(
                r.end(EndInfo(EndCause.PROXY_SHUTDOWN, initiator="proxy"))
                for r in list(self.relays)
            ),
            *list(self.ending),
            return_exceptions=True,
        )
        if self._http is not None:
            await self._http.close()
            self._http = None
