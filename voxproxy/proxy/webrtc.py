"""The WebRTC proxy: the media relay (forwarding) joined to one CallSession per call (measuring).

The relay (:mod:`voxproxy.transports.webrtc`) decodes a copy of every audio
packet and stamps it on arrival; this module hands it to the call's
:class:`~voxproxy.session.CallSession` with ``on_audio``. WebRTC media is paced
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
from dataclasses import dataclass, field, replace

from voxproxy.dialects.base import DialectOptions
from voxproxy.dialects.channels import CHANNEL_DIALECTS, ChannelDecoder
from voxproxy.errors import ConfigError
from voxproxy.events import Direction, Pcm, StageMark, ToolEvent
from voxproxy.proxy.lifecycle import (
    DEFAULT_MAX_LOOP_LAG_MS,
    CallHost,
    MeasuredCall,
    ReceiptSink,
    loop_lag_over,
)
from voxproxy.proxy.livecalls import LiveCalls
from voxproxy.receipts.model import CloseInfo, Receipt, terminal_of
from voxproxy.session import SessionConfig
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
class WebRtcProxyConfig:
    relay: WebRtcRelayConfig
    # How data channel messages are measured: "auto" decodes the oai-events channel as
    # OpenAI Realtime events, "openai-realtime" every channel, "none" no channel.
    dialect: str = "auto"
    dialect_options: DialectOptions = field(default_factory=DialectOptions)
    session: SessionConfig = field(default_factory=SessionConfig)
    secret: bytes | None = None
    # A new caller's offer is refused (503, Retry-After) while the event loop's lag (the
    # median of its readings over the last second) exceeds this (None: no such refusal),
    # as voxproxy.proxy.ProxyConfig's. Measurement here runs inline, per packet: there
    # is no measurement queue to yield or to be behind.
    max_loop_lag_ms: float | None = DEFAULT_MAX_LOOP_LAG_MS

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


class WebRtcCallContext(MeasuredCall):
    """Observer of one relayed WebRTC call: feeds the session, emits the receipt."""

    __slots__ = ("carrier", "decoder")

    _proxy: WebRtcProxy

    def __init__(self, proxy: WebRtcProxy, t_ns: int, offer: Offer) -> None:
        self.decoder = ChannelDecoder(proxy.config.dialect, proxy.dialect_options)
        super().__init__(proxy, t_ns, self.decoder, "webrtc", self.decoder.name)
        self.carrier = {k: v for k, v in offer.headers.items() if k in TRACE_HEADERS}

    def upstream_headers(self) -> dict[str, str]:
        # Continue the caller's trace if its offer carried one; start one otherwise.
        return dict(self._call_headers(self.carrier))

    def on_audio(
        self, direction: Direction, pcm: Pcm, sample_rate_hz: int, t_ns: int, wire_bytes: int
    ) -> None:
        self.session.on_audio(direction, pcm, sample_rate_hz, t_ns, wire_bytes=wire_bytes)

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
