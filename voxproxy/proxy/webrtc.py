"""The WebRTC proxy: the media relay (forwarding) joined to one CallSession per call (measuring).

The relay (:mod:`voxproxy.transports.webrtc`) decodes a copy of every audio
packet and stamps it on arrival; this module hands it to the call's
:class:`~voxproxy.core.session.CallSession` with ``on_audio``. WebRTC media is paced
in real time, so the session is told that agent audio is audible on arrival
(MEASUREMENT.md section 3: the playout model degenerates to the identity).
Data channel messages go to ``on_message``: those on OpenAI's ``oai-events``
channel (or every channel, with ``dialect="openai-realtime"``) are decoded as
OpenAI Realtime events (stage marks, tool calls, ``output_audio_buffer.clear``
flushes); the others are only counted. Receipts, sinks, telemetry and the
event API work as for the websocket proxy; receipts say ``transport: webrtc``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from voxproxy.clock import LagMonitor
from voxproxy.core.dialects.channels import CHANNEL_DIALECTS, ChannelDecoder
from voxproxy.core.errors import ConfigError
from voxproxy.core.events import Audio, Direction, StageMark, ToolEvent
from voxproxy.core.receipt import CloseInfo, Receipt, terminal_of
from voxproxy.core.timebase import NS_PER_S
from voxproxy.proxy.lifecycle import (
    CallHost,
    MeasuredCall,
    MeasuringSettings,
    ReceiptSink,
    forwarding_record,
    loop_lag_over,
)
from voxproxy.proxy.livecalls import LiveCalls
from voxproxy.telemetry import (
    TRACE_HEADERS,
    Telemetry,
)
from voxproxy.transports.webrtc import (
    EndInfo,
    Offer,
    RelayStats,
    WebRtcRelayConfig,
    WebRtcRelayServer,
)

log = logging.getLogger("voxproxy.proxy.webrtc")


@dataclass(frozen=True, slots=True)
class WebRtcProxyConfig(MeasuringSettings):
    """The WebRTC proxy: its relay, how data channels are measured, and how it measures
    (measurement runs inline, per packet: there is no measurement queue to be behind)."""

    relay: WebRtcRelayConfig
    # How data channel messages are measured: "auto" decodes the oai-events channel as
    # OpenAI Realtime events, "openai-realtime" every channel, "none" no channel.
    dialect: str = "auto"

    def __post_init__(self) -> None:
        if self.dialect not in CHANNEL_DIALECTS:
            raise ConfigError(
                f"a WebRTC call's data channels are measured as {', '.join(CHANNEL_DIALECTS)}; "
                f"got dialect {self.dialect!r}"
            )
        # The session of a WebRTC call: its media is paced, audible on arrival.
        object.__setattr__(
            self,
            "session",
            replace(self.session, transport="webrtc", agent_playout="arrival"),
        )


class CallTiming:
    """How far one WebRTC call's timing may be off, for its figures' uncertainty.

    * **Clock lag** (:meth:`clock_lag`): media the kernel stamped on arrival
      (:mod:`voxproxy.transports.webrtc.arrival`) is not late however late the loop
      read it; around media stamped when the loop read it (no kernel stamp), the
      loop's lag at the read (the proxy's :class:`~voxproxy.clock.LagMonitor`).
    * **Downstream** (:meth:`downstream`): the caller's jitter buffer plays the
      agent's audio later than the proxy forwards it, by a floor of its own (the
      declared ``downstream_offset_ms``) and by what it grew to over the lateness it
      saw, which the proxy cannot see. What it can see bounds that growth: how late
      the packets towards the caller left against their own timestamps (the relay's
      stalls, the agent's bursts: ``OutboundTrack.on_late``), and the interarrival
      jitter the caller reports (RTCP receiver reports, RFC 3550 6.4.1) times
      :data:`JITTER_BUFFER_FACTOR` for the way from the proxy to the caller, over the
      :data:`DOWNSTREAM_WINDOW_NS` before an edge (and reports up to
      :data:`REPORT_AFTER_NS` after it, which describe it too).
    """

    __slots__ = ("_late", "_monitor", "_read", "_reports")

    def __init__(self, monitor: LagMonitor) -> None:
        self._monitor = monitor
        self._read: list[tuple[int, int]] = []  # spans of media stamped when read
        self._reports: dict[int, float] = {}  # second -> the caller's largest jitter (ms)
        self._late: dict[int, float] = {}  # second -> the latest packet towards it (ms)

    def read_stamped(self, t_ns: int) -> None:
        """Media that arrived at ``t_ns`` was stamped when the loop read it."""
        _note(self._read, t_ns, t_ns, _SPAN_JOIN_NS)

    def receiver_report(self, t_ns: int, jitter_ms: float) -> None:
        _keep_max(self._reports, t_ns, jitter_ms)

    def late(self, t_ns: int, late_ms: float) -> None:
        _keep_max(self._late, t_ns, late_ms)

    def clock_lag(self, start_ns: int, end_ns: int) -> int:
        """How late a stamp of this call's media in ``[start_ns, end_ns]`` may be."""
        if any(a <= end_ns and b >= start_ns for a, b in self._read):
            return self._monitor.max_between(start_ns, end_ns)
        return 0

    def downstream(self, t_ns: int) -> float:
        """How much later than the proxy's figure (offset included) the caller may have
        heard the agent's audio at ``t_ns`` (ms)."""
        lo = t_ns - DOWNSTREAM_WINDOW_NS
        jitter = _max_over(self._reports, lo, t_ns + REPORT_AFTER_NS)
        late = _max_over(self._late, lo, t_ns)
        return round(JITTER_BUFFER_FACTOR * jitter + late, 1)


# A jitter buffer's growth over its floor, in units of the RFC 3550 jitter J its receiver
# reports: for Gaussian transit times J is 1.13 sigma, and an adaptive buffer holds the
# 95-97th percentile of the delay spread it saw, about 3.3-3.8 sigma above its earliest.
JITTER_BUFFER_FACTOR = 4.0
# What a jitter buffer remembers: it grows at once and shrinks over seconds.
DOWNSTREAM_WINDOW_NS = 10 * NS_PER_S
# A receiver report this soon after an edge still describes the jitter at it (browsers
# report every 1-5 s; J itself averages the last ~16 packets).
REPORT_AFTER_NS = 5 * NS_PER_S
_SPAN_JOIN_NS = 1 * NS_PER_S
_MAX_SPANS = 4096


def _note(spans: list[tuple[int, int]], start_ns: int, end_ns: int, join_ns: int) -> None:
    if spans and (start_ns <= spans[-1][1] + join_ns or len(spans) >= _MAX_SPANS):
        spans[-1] = (spans[-1][0], max(spans[-1][1], end_ns))
    else:
        spans.append((start_ns, end_ns))


def _keep_max(per_second: dict[int, float], t_ns: int, value: float) -> None:
    """The largest value of each second (bounded by the call's length in seconds)."""
    k = t_ns // NS_PER_S
    if value > per_second.get(k, 0.0):
        per_second[k] = value


def _max_over(per_second: dict[int, float], lo_ns: int, hi_ns: int) -> float:
    """The largest value of the seconds that overlap ``[lo_ns, hi_ns]``."""
    return max(
        (per_second.get(k, 0.0) for k in range(lo_ns // NS_PER_S, hi_ns // NS_PER_S + 1)),
        default=0.0,
    )


class WebRtcCallContext(MeasuredCall):
    """Observer of one relayed WebRTC call: feeds the session, emits the receipt."""

    __slots__ = ("carrier", "decoder", "timing")

    _proxy: WebRtcProxy

    def __init__(self, proxy: WebRtcProxy, t_ns: int, offer: Offer) -> None:
        self.decoder = ChannelDecoder(proxy.config.dialect, proxy.dialect_options)
        self.timing = CallTiming(proxy.clock_lag)
        super().__init__(
            proxy,
            t_ns,
            self.decoder,
            "webrtc",
            self.decoder.name,
            clock_lag=self.timing.clock_lag,
            downstream=self.timing.downstream,
        )
        self.carrier = {k: v for k, v in offer.headers.items() if k in TRACE_HEADERS}

    def upstream_headers(self) -> dict[str, str]:
        # Continue the caller's trace if its offer carried one; start one otherwise.
        return dict(self._call_headers(self.carrier))

    def on_audio(self, audio: Audio, wire_bytes: int, kernel: bool = True) -> None:
        if not kernel:
            self.timing.read_stamped(audio.t_ns)
        self.session.on_audio(audio, wire_bytes=wire_bytes)

    def on_receiver_report(self, t_ns: int, jitter_ms: float, rtt_ms: float | None) -> None:
        del rtt_ms  # the network leg's own delay is the declared offset's, not a jitter
        self.timing.receiver_report(t_ns, jitter_ms)

    def on_late(self, t_ns: int, late_ms: float) -> None:
        self.timing.late(t_ns, late_ms)

    def on_data(self, direction: Direction, label: str, message: str | bytes, t_ns: int) -> None:
        self.decoder.label = label
        if self.capture is not None:
            self.capture.label(label)
        self.session.on_message(direction, message, t_ns)

    def on_event(self, ev: ToolEvent | StageMark) -> None:
        """An event from outside the media (the event API), stamped on arrival."""
        self.session.on_event(ev)

    def on_end(self, t_ns: int, info: EndInfo, stats: RelayStats) -> None:
        self._ended()
        proxy = self._proxy
        proxy.relay_stats.append(stats)
        answered = self.session.upstream_connected_ns is not None
        upstream_status = info.upstream_status
        if upstream_status is None and answered:
            upstream_status = 201 if proxy.config.relay.signaling == "whip" else 200
        close = CloseInfo(
            initiator=info.initiator,  # type: ignore[arg-type]
            upstream_status=upstream_status,
        )
        receipt = self._receipt(t_ns, terminal_of(info.cause), close, dialect=self.decoder.name)
        if receipt is not None:
            if stats.forwarded is not None:
                # the packets' delays to their departure (a relay's leg writes each at
                # once; with pacing, aiortc's sender takes it, then packs, encrypts and
                # writes it in the same step)
                forwarded, kernel, read = stats.forwarded, stats.kernel_stamped, stats.read_stamped
                forwarding = forwarding_record(forwarded, kernel, read)
                receipt = receipt.model_copy(update={"forwarding": forwarding})
            self._publish(receipt, t_ns)


class WebRtcProxy(CallHost):
    """Serves WebRTC callers, relays each to the agent, writes one receipt per call."""

    config: WebRtcProxyConfig

    def __init__(
        self,
        config: WebRtcProxyConfig,
        sinks: list[ReceiptSink] | None = None,
        telemetry: Telemetry | None = None,
        judge: Callable[[Receipt], Receipt] | None = None,
    ) -> None:
        """``judge`` gives each receipt its verdict, once, before the sinks and telemetry
        see it (as :class:`voxproxy.proxy.Proxy` does)."""
        super().__init__(config.secret, config.dialect_options, sinks, telemetry, judge)
        self.config = config
        self.relay_stats: list[RelayStats] = []
        self.live = LiveCalls(self.secret)
        self.server = WebRtcRelayServer(config.relay, self._observer)
        if config.max_loop_lag_ms is not None:
            self.server.admission.overloaded = self._overloaded

    def _overloaded(self) -> str | None:
        """Why a new call would not be served transparently now, or None."""
        assert self.config.max_loop_lag_ms is not None
        return loop_lag_over(self.clock_lag, self.config.max_loop_lag_ms)

    def _observer(self, t_ns: int, offer: Offer) -> WebRtcCallContext:
        return WebRtcCallContext(self, t_ns, offer)

    async def start(self, host: str, port: int) -> int:
        self.clock_lag.start()
        return await self.server.start(host, port)

    def url(self, signaling: str = "whip") -> str:
        return self.server.signaling.url("pipecat" if signaling == "pipecat" else "whip")

    async def stop(self, drain_s: float = 0.0) -> None:
        await self.server.stop(drain_s)
        await self.clock_lag.stop()
