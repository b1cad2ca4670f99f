"""The websocket proxy: the relay (forwarding) joined to one CallSession per call (measuring)."""

from __future__ import annotations

import logging
import ssl
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from websockets.http11 import Request

from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import Decoder
from voxproxy.core.events import AnomalyKind, Audio, Direction, StageMark, ToolEvent
from voxproxy.core.receipt import CloseInfo, Receipt, terminal_of
from voxproxy.core.session.batch import measure
from voxproxy.core.timebase import NS_PER_MS
from voxproxy.proxy.lifecycle import (
    CallHost,
    MeasuredCall,
    MeasuringSettings,
    ReceiptSink,
    Unmeasured,
    forwarding_record,
    loop_lag_over,
)
from voxproxy.proxy.livecalls import LiveCalls, wire_ids
from voxproxy.proxy.measuring import (
    ADMIT_BEHIND_MS,
    YIELD_LAG_MS,
    MeasurementQueue,
    Queued,
    give_up_measuring,
)
from voxproxy.telemetry import (
    TRACE_HEADERS,
    Telemetry,
)
from voxproxy.transports.websocket import EndCause, EndInfo, RelayConfig, RelayServer

log = logging.getLogger("voxproxy.proxy")

FIRST_MESSAGES_AT_ONCE = 8
"""How many of a call's first messages, until its wire has named it or carried audio,
are measured as they come, past the measurement queue's budget (``urgent`` in
:meth:`~voxproxy.proxy.measuring.MeasurementQueue.may_measure_now`): the telephony wires
name the call in their first or second message. After that many, a wire that named no
call (one that never does, or a hostile one) is measured within the budget like the
rest, so that no caller buys measurement time from the other calls' forwarding."""

# The agent could not be reached, refused the call or did not answer its handshake.
_AGENT_FAILURES = frozenset(
    (EndCause.UPSTREAM_REFUSED, EndCause.UPSTREAM_UNREACHABLE, EndCause.UPSTREAM_TIMEOUT)
)


@dataclass(frozen=True, slots=True)
class ProxyConfig(MeasuringSettings):
    """The websocket proxy: its relay, the wire's dialect, and how it measures (a new
    call is also refused while measurement sheds)."""

    relay: RelayConfig
    dialect: str = "auto"


class CallContext(MeasuredCall):
    """Observer of one relayed websocket call: feeds the session, emits the receipt."""

    __slots__ = ("_end", "_first_left", "_media", "_wire_pending", "backlog", "last_media_s")

    _proxy: Proxy

    def __init__(self, proxy: Proxy, t_ns: int, decoder: Decoder | None = None) -> None:
        cfg = proxy.config
        if decoder is None:
            decoder = make_decoder(cfg.dialect, proxy.dialect_options)
        super().__init__(proxy, t_ns, decoder, "websocket", cfg.dialect)
        self._wire_pending = True  # the wire's own call ids are not known yet
        self._media = False  # a message of this call has carried audio
        self._first_left = FIRST_MESSAGES_AT_ONCE  # of its first messages, measured at once
        self.backlog: deque[Queued] | None = None  # messages queued for measurement
        self._end: tuple[int, EndInfo] | None = None  # the call ended with a backlog
        self.last_media_s = 0.0  # arrival (time.monotonic()) of the last media measured
        # Its pumps may wait for the queue's group pass (one energies pass for all calls).
        self.session.pumps = proxy.measuring.pumps

    def upstream_headers(self, request: Request) -> Iterable[tuple[str, str]]:
        # Continue the caller's trace if its handshake carried one; start one otherwise.
        carrier = {
            name.lower(): value
            for name, value in request.headers.raw_items()
            if name.lower() in TRACE_HEADERS
        }
        return self._call_headers(carrier)

    def on_message(self, direction: Direction, payload: bytes | str, t_ns: int) -> bool | None:
        """Measure one message; says whether it carried audio (for the idle timeout):
        None until the call's wire has carried any, since until then it cannot tell.
        A message queued for measurement (see proxy/measuring.py) reads False once the
        wire has carried audio: if it carries some, ``last_media_s`` says so when it
        is measured."""
        session = self.session
        if session.measurement_disabled and not self.backlog:
            # Given up (too far behind, or its own errors): counted in its traffic, here
            # and now. Queued, a call that gave up for a flood would queue the flood
            # again, and its wait would make the whole proxy look behind (admission).
            session.on_message(direction, payload, t_ns)
            return None
        queue = self._proxy.measuring
        # A call's first messages are measured at once, until its wire has named it or
        # carried audio: the event API, and the journal a killed proxy leaves, know it by
        # those names from then on, however far behind measurement is.
        urgent = self._wire_pending and not self._media and self._first_left > 0
        if urgent:
            self._first_left -= 1
        if not queue.may_measure_now(self, urgent):
            queue.defer(self, (direction, payload, t_ns), urgent)
            return self._no_audio()
        start = queue.cpu_now()
        try:
            return self._measure(direction, payload, t_ns, False)
        finally:
            queue.charge(queue.cpu_now() - start)

    @property
    def pump_due(self) -> bool:
        return self.session.pump_due

    def measure_queued(
        self, limit: int, cpu_ns: Callable[[], int], stop_at: int, shed_before: int
    ) -> int:
        """Measure queued items (see ``proxy.measuring.Measured``) in one call into the
        core (session/batch.py), then do what it says; never raises."""
        backlog = self.backlog
        if backlog is None:
            return 0
        try:
            done = measure(self.session, backlog, limit, cpu_ns, stop_at, shed_before)
        except Exception:
            self.session.note_measurement_error()
            return 0
        if done.last_audio_ns >= 0:
            self._media = True
            self.last_media_s = done.last_audio_ns / 1e9  # (the relay's clock: monotonic)
        if done.named_by is not None:
            self._named(done.named_by)
        return done.shed

    def backlog_drained(self) -> None:
        if self._end is not None:
            t_ns, info = self._end
            self._end = None
            self._close(t_ns, info)

    def give_up(self) -> None:
        """Measurement fell too far behind for this call: it keeps its traffic counts only
        (its receipt says measurement_disabled)."""
        log.warning("measurement of a call fell too far behind: given up (still forwarded)")
        give_up_measuring(self.session, self.backlog)

    def _measure(
        self, direction: Direction, payload: bytes | str, t_ns: int, shed: bool
    ) -> bool | None:
        session = self.session
        if shed:
            events = session.on_message(direction, payload, t_ns, shed=True)
        else:
            events = session.on_message(direction, payload, t_ns)
        if self._wire_pending and session.wire_call_id_hash is not None:
            self._named(payload)
        for ev in events:
            if type(ev) is Audio:
                self._media = True
                self.last_media_s = t_ns / 1e9  # (the relay's clock: time.monotonic)
                return True
        return self._no_audio()

    def _named(self, payload: bytes | str) -> None:
        """The wire just named the call (in ``payload``): the event API may now be told
        about it by those ids too (kept only as keyed hashes). Registered under the
        call's id even if the message's other ids cannot be read."""
        session = self.session
        assert session.wire_call_id_hash is not None
        self._wire_pending = False
        try:
            ids = wire_ids(payload)
        except Exception:
            ids = []
            session.note_measurement_error()
        self._proxy.live.add_wire(self, session.wire_call_id_hash, ids)
        self._proxy.journal_update(
            self.link_id,
            call=session.wire_call_id_hash,
            call_id_source="wire",
            dialect=session.decoder.name,
        )

    def _no_audio(self) -> bool | None:
        """What a message not known to carry audio tells the idle timer: False (no media)
        once the wire has carried audio and is measured; None (cannot tell) before that, or
        when measurement stopped."""
        return False if self._media and not self.session.measurement_disabled else None

    def on_event(self, ev: ToolEvent | StageMark) -> None:
        """An event from outside the media (the event API), stamped on arrival."""
        if self.backlog is not None:
            self._proxy.measuring.defer(self, (None, ev, ev.t_ns))  # after the messages before
            return
        self.session.on_event(ev)

    def on_end(self, t_ns: int, info: EndInfo) -> None:
        self._ended()
        self.stamps.arrivals = info.arrivals
        if self.backlog is not None:
            self._end = (t_ns, info)  # closed once its queued messages are measured
            return
        self._close(t_ns, info)

    def _close(self, t_ns: int, info: EndInfo) -> None:
        terminal = terminal_of(info.cause)
        if info.cause is EndCause.CALLER_CLOSED and self.session.stream_stopped:
            terminal = "completed"
        if info.cause is EndCause.MESSAGE_TOO_BIG:
            self.session.note_anomaly(AnomalyKind.OVERSIZED)
        if info.undelivered:
            self.session.note_anomaly(AnomalyKind.UNDELIVERED, info.undelivered)
        if info.over_rate != (0, 0):  # (forwarded, not measured: traffic and anomaly)
            for d in Direction:
                self.session.count_unmeasured(d, info.over_rate[d], info.over_rate_bytes[d])
            self.session.note_anomaly(AnomalyKind.MESSAGES_OVER_RATE, sum(info.over_rate))
        close = CloseInfo(
            initiator=info.initiator,  # type: ignore[arg-type]
            caller_code=info.caller_code,
            agent_code=info.agent_code,
            upstream_status=info.upstream_status
            if info.upstream_status is not None
            else (101 if self.session.upstream_connected_ns is not None else None),
        )
        receipt = self._receipt(t_ns, terminal, close)
        if receipt is None:
            return
        if info.forwarding is not None and info.arrivals is not None:
            arrivals = info.arrivals
            forwarding = forwarding_record(info.forwarding, arrivals.kernel, arrivals.read_time)
            receipt = receipt.model_copy(update={"forwarding": forwarding})
        if info.cause in _AGENT_FAILURES:  # one line per call, with its cause
            log.warning("call %s: %s", receipt.call, info.detail or info.cause.value)
        if receipt.wire_looks_like is not None:
            log.warning(
                "call %s: the caller's wire looks like %s, not the configured %s: nothing of "
                "it was measured (run with --dialect %s or --dialect auto)",
                receipt.call,
                receipt.wire_looks_like,
                receipt.dialect,
                receipt.wire_looks_like,
            )
        self._publish(receipt, t_ns)


class Proxy(CallHost):
    """Serves callers, relays each to the agent, writes one receipt per call."""

    config: ProxyConfig

    def __init__(
        self,
        config: ProxyConfig,
        sinks: list[ReceiptSink] | None = None,
        telemetry: Telemetry | None = None,
        judge: Callable[[Receipt], Receipt] | None = None,
    ) -> None:
        """``judge`` gives each receipt its verdict, once, before the sinks and
        telemetry see it (see :func:`voxproxy.receipts.verdict.judged`)."""
        super().__init__(config.secret, config.dialect_options, sinks, telemetry, judge)
        self.config = config
        self.live = LiveCalls(self.secret)  # for the event API
        # Measurement runs after forwarding, within a budget per turn of the loop.
        self.measuring = MeasurementQueue(lagging=self._lagging)
        self.server = RelayServer(config.relay, self._observer)
        if config.max_loop_lag_ms is not None:
            self.server.admission.overloaded = self._overloaded

    def _lagging(self) -> bool:
        """The loop runs late now: measurement yields to forwarding (proxy/measuring.py)."""
        return self.clock_lag.lag_now_ns() > YIELD_LAG_MS * NS_PER_MS

    def _overloaded(self) -> str | None:
        """Why a new call would not be served transparently now, or None."""
        assert self.config.max_loop_lag_ms is not None
        why = loop_lag_over(self.clock_lag, self.config.max_loop_lag_ms)
        if why is not None:
            return why
        if self.measuring.shedding:
            return "measurement is shedding"
        # Measurement falls behind when the core no longer carries the calls' forwarding
        # and their measurement (it yields to forwarding): the core is full. Long before
        # it sheds, and before the loop's lag shows in the median of a second.
        behind_ns = self.measuring.behind_ns
        if behind_ns > ADMIT_BEHIND_MS * NS_PER_MS:
            return f"measurement {behind_ns / NS_PER_MS:.0f} ms behind"
        return None

    def _observer(self, t_ns: int) -> CallContext:
        try:
            return CallContext(self, t_ns)
        except Exception:
            # The call still gets its receipt (traffic, terminal), flagged unmeasured.
            log.exception("could not set up measurement for a call; it is forwarded unmeasured")
            ctx = CallContext(self, t_ns, decoder=Unmeasured(self.config.dialect))
            ctx.session.note_measurement_error()
            ctx.session.measurement_disabled = True
            return ctx

    @property
    def refused_calls(self) -> int:
        """Callers refused with 503: ``max_calls`` calls were in progress, or the proxy
        was overloaded (``max_loop_lag_ms``)."""
        return self.server.admission.refused

    async def start(
        self,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None = None,
        *,
        reuse_port: bool = False,
    ) -> int:
        self.clock_lag.start()
        return await self.server.start(host, port, ssl_context, reuse_port=reuse_port)

    async def stop(self, drain_s: float = 0.0) -> None:
        await self.server.stop(drain_s)
        self.measuring.drain()  # calls that ended with messages still queued get receipts
        await self.clock_lag.stop()
