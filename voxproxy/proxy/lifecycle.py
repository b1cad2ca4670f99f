"""The call lifecycle both proxies share, whatever carries the call.

A :class:`MeasuredCall` is one call around its :class:`~voxproxy.core.session.CallSession`:
its link id (sent to the agent in ``X-Voxproxy-Call``), its trace, its entries in the
live calls and the crash journal, its end and its receipt. A :class:`ReceiptOutlet` is
where finished receipts go: :func:`publish` judges each once and hands it to every sink,
then to telemetry; :func:`recover_crashed` publishes the receipts a killed proxy owed,
from its journal. Admission on the event loop's lag (:func:`loop_lag_over`) is the same
for both transports. The websocket proxy (:mod:`voxproxy.proxy.websocket`) and the
WebRTC proxy (:mod:`voxproxy.proxy.webrtc`) build on this module.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from voxproxy.clock import EpochAnchor, LagMonitor, new_secret
from voxproxy.core.dialects.base import Decoder, DialectOptions
from voxproxy.core.events import Direction, Event
from voxproxy.core.ids import keyed_hash
from voxproxy.core.receipt import CloseInfo, ForwardDelay, Forwarding, Receipt, Terminal
from voxproxy.core.session import CallSession, SessionConfig
from voxproxy.core.timebase import NS_PER_MS
from voxproxy.proxy.livecalls import CALL_PREFIX, LiveCalls
from voxproxy.telemetry import NULL_TELEMETRY, CallTimes, CallTrace, FlushTime, Telemetry
from voxproxy.transports.websocket.arrivals import ArrivalLog, ForwardDelays

if TYPE_CHECKING:
    from voxproxy.captures.format import CaptureHeader
    from voxproxy.captures.writer import CallCapture, CaptureWriter
    from voxproxy.receipts.journal import CallJournal

log = logging.getLogger("voxproxy.proxy")

NO_SECRET = (
    "no secret configured (--secret / VOXPROXY_PROXY_SECRET): call ids are keyed with a "
    "random secret made at start and will not match across restarts"
)
"""Said once per start (by the parent of ``--workers``, which hands its workers one key)."""

DEFAULT_MAX_LOOP_LAG_MS = 100.0
LAG_WINDOW_NS = 1_000 * NS_PER_MS  # admission looks at the loop's lag over the last second
MIN_LAG_READINGS = 3  # readings in that second for their median to count (see loop_lag_over)
# A loop that lags while its thread used less than this share of a core over the same
# second waited for a core the machine gave to other work: not the proxy's own load.
OWN_LOAD_SHARE = 0.5

CALL_ID_HEADER = "X-Voxproxy-Call"


ReceiptSink = Callable[[Receipt], None]


def loop_lag_over(clock_lag: LagMonitor, bound_ms: float) -> str | None:
    """Why a new call is refused when the loop's lag over the last second is over
    ``bound_ms`` (both transports' admission on measured load), or None.

    The lag is the median of the last second's readings, so that one stall (a burst of
    handshakes, the process waiting for a core once) is not taken for a load that lasts;
    and a median of fewer than :data:`MIN_LAG_READINGS` readings counts only when they
    add up to half the second or more (a loop so late it could take no more readings).
    Else one late reading just after the proxy started (a collection of the garbage
    collector, modules still loading) would refuse the first caller.

    A lag counts only while the loop's thread used at least :data:`OWN_LOAD_SHARE` of a
    core over the same second (:meth:`LagMonitor.cpu_share`; unknown counts): a loop
    that lags while its thread mostly waits was kept waiting by other work on the
    machine. Refusing would not give it a core back, and the caller would lose a call
    the proxy carries as well as the machine lets anything run; the lag still shows in
    the figures' uncertainty and in the proxy's forwarding delay."""
    lags = clock_lag.recent_lags_ns(LAG_WINDOW_NS)
    if len(lags) < MIN_LAG_READINGS and sum(lags) < LAG_WINDOW_NS // 2:
        return None
    lags.sort()
    lag_ns = lags[len(lags) // 2]
    if lag_ns <= bound_ms * NS_PER_MS:
        return None
    share = clock_lag.cpu_share(LAG_WINDOW_NS)
    if share is not None and share < OWN_LOAD_SHARE:
        return None
    return f"event loop lag {lag_ns / NS_PER_MS:.0f} ms"


def forwarding_record(
    delays: tuple[ForwardDelays, ForwardDelays], kernel: Sequence[int], read: Sequence[int]
) -> Forwarding:
    """The receipt's ``forwarding``, whatever transport carried the call: each
    direction's delays from a message's arrival at the host to its leaving for the other
    leg, and where those arrival times came from (``kernel``, ``read``: per direction,
    how many the kernel stamped, how many the event loop stamped when it read them)."""

    def one(d: Direction) -> ForwardDelay:
        fd = delays[d]
        return ForwardDelay(
            messages=fd.n,
            p50_ms=fd.quantile_ms(0.5),
            p95_ms=fd.quantile_ms(0.95),
            max_ms=round(fd.max_ns / NS_PER_MS, 2) if fd.n else None,
            arrival="mixed" if kernel[d] and read[d] else ("read" if read[d] else "kernel"),
        )

    return Forwarding(
        caller_to_agent=one(Direction.CALLER_TO_AGENT),
        agent_to_caller=one(Direction.AGENT_TO_CALLER),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasuringSettings:
    """How a proxy measures its calls, whatever transport carries them: what the
    websocket proxy's and the WebRTC proxy's configurations share (each adds its relay
    and its dialect)."""

    dialect_options: DialectOptions = field(default_factory=DialectOptions)
    session: SessionConfig = field(default_factory=SessionConfig)
    secret: bytes | None = None  # the key of the receipts' ids (None: one drawn at start)
    # A new call is refused (503, Retry-After) while the event loop's lag (the median of
    # its readings over the last second) exceeds this (None: no such refusal).
    max_loop_lag_ms: float | None = DEFAULT_MAX_LOOP_LAG_MS


class Unmeasured:
    """The decoder of a call whose measurement could not be set up: it decodes nothing."""

    def __init__(self, name: str) -> None:
        self.name = name

    def decode(self, direction: Direction, payload: bytes | str, t_ns: int) -> list[Event]:
        del direction, payload, t_ns
        return []


class StampError:
    """How late a call's message stamped in ``[start_ns, end_ns]`` may have been stamped
    (its session's ``clock_lag``): the loop's longest block near it (``monitor``),
    unless the transport said (``arrivals``, at the call's end) that the stamps there
    came from the kernel: then only what queued messages' reads leave unknown, each
    no more than the loop's longest block while it waited
    (``transports.websocket.arrivals``). Not the call's own method: the session would
    hold the call, and the call its session (a cycle the collector alone frees)."""

    __slots__ = ("arrivals", "monitor")

    def __init__(self, monitor: LagMonitor) -> None:
        self.monitor = monitor
        self.arrivals: ArrivalLog | None = None  # None: every stamp as late as the loop

    def __call__(self, start_ns: int, end_ns: int) -> int:
        arrivals = self.arrivals
        if arrivals is None:
            return self.monitor.max_between(start_ns, end_ns)
        return arrivals.error_between(start_ns, end_ns, self.monitor.max_between)


class MeasuredCall:
    """One call of either proxy around its :class:`CallSession`: its link id (handed
    upstream in ``X-Voxproxy-Call``), its entries in the live calls and the journal, its
    trace, the agent's answer, the end of the call and the receipt's publication. The
    transports' observers (``proxy.websocket.CallContext``,
    ``proxy.webrtc.WebRtcCallContext``) add what their wire needs."""

    __slots__ = ("_proxy", "capture", "link_id", "session", "stamps", "trace")

    def __init__(
        self,
        proxy: CallHost,
        t_ns: int,
        decoder: Decoder,
        transport: str,
        dialect: str,
        *,
        clock_lag: Callable[[int, int], int] | None = None,
        downstream: Callable[[int], float] | None = None,
    ) -> None:
        """``clock_lag`` and ``downstream`` go to the session (:class:`CallSession`); by
        default the call's :class:`StampError` (the proxy's loop lag until its transport
        says which stamps the kernel gave)."""
        self._proxy = proxy
        self.link_id = uuid.uuid4().hex
        # How late the call's arrival stamps may be (its session's clock_lag).
        self.stamps = StampError(proxy.clock_lag)
        lag: Callable[[int, int], int] = clock_lag or self.stamps
        # What the session is handed, and what it asks, on disk (voxproxy.captures).
        self.capture: CallCapture | None = None
        if proxy.captures is not None:
            try:
                asks = ("clock_lag",) if downstream is None else ("clock_lag", "downstream")
                header = capture_header(proxy, t_ns, self.link_id, transport, asks)
                self.capture = capture = proxy.captures.open_call(header)
                lag = capture.answers("clock_lag", lag)
                if downstream is not None:
                    downstream = capture.answers("downstream", downstream)
            except Exception:  # the call goes on, measured, uncaptured
                log.exception("could not start a call's capture (counted in its failures)")
                proxy.captures.count_failure()
        self.session = CallSession(
            decoder,
            t_ns,
            secret=proxy.secret,
            link_id=self.link_id,
            config=proxy.config.session,
            anchor=proxy.anchor,
            clock_lag=lag,
            downstream=downstream,
        )
        self.session.tap = self.capture
        self.trace: CallTrace | None = None
        proxy.active += 1
        proxy.live.add_link(self, self.link_id)
        proxy.telemetry.call_opened()
        proxy.journal_opened(self.link_id, t_ns, transport, dialect)

    def _call_headers(self, carrier: dict[str, str]) -> list[tuple[str, str]]:
        """The headers of our request to the agent: the call's link id, and the trace
        context (the caller's trace continued if ``carrier`` holds one) when tracing."""
        headers = [(CALL_ID_HEADER, self.link_id)]
        proxy = self._proxy
        if proxy.telemetry.tracing:
            self.trace = proxy.telemetry.start_call(
                proxy.anchor,
                self.session.start_ns,
                carrier,
                link_id=self.link_id,
                upstream=proxy.config.relay.upstream,
            )
            if self.trace is not None:
                headers.extend(self.trace.headers)
        return headers

    def on_upstream_open(self, t_ns: int, status: int) -> None:
        session = self.session
        session.on_upstream_connected(t_ns)
        self._proxy.journal_update(
            self.link_id,
            upstream_connect_ms=round((t_ns - session.start_ns) / NS_PER_MS, 1),
            upstream_status=status,
        )

    def _ended(self) -> None:
        """The transport is done with the call (its receipt may still wait)."""
        proxy = self._proxy
        proxy.active -= 1
        proxy.live.remove(self)
        proxy.telemetry.call_closed()

    def _receipt(
        self, t_ns: int, terminal: Terminal, close: CloseInfo, dialect: str | None = None
    ) -> Receipt | None:
        """Build the call's receipt; None (counted in ``receipt_errors``, logged, the
        journal entry closed, a capture of the call finished) if that fails."""
        capture = self.capture
        try:
            receipt = self.session.close(t_ns, terminal, close, dialect=dialect)
        except Exception:
            log.exception("could not build a receipt for a call (counted in receipt_errors)")
            self._proxy.receipt_errors += 1
            self._proxy.journal_closed(self.link_id)
            if capture is not None:
                capture.finish(keyed_hash(self._proxy.secret, self.link_id, CALL_PREFIX))
            return None
        if capture is not None:
            capture.built = receipt
        return receipt

    def _publish(self, receipt: Receipt, t_ns: int) -> None:
        """Publish the call's receipt (as its transport completed it). A capture of the
        call is finished, named by its call id, with what the transport added to the
        session's receipt (its forwarding delays: figures of the proxy's own)."""
        capture = self.capture
        if capture is not None and capture.built is not None:
            capture.finish(receipt.call, added_fields(capture.built, receipt))
        publish(self._proxy, receipt, self.session, self.trace, t_ns)


class ReceiptOutlet:
    """What the websocket and WebRTC proxies share: the call-id secret, the dialect
    options keyed with it, the clock anchor, and where finished receipts go."""

    def __init__(
        self,
        secret: bytes | None,
        dialect_options: DialectOptions,
        sinks: list[ReceiptSink] | None,
        telemetry: Telemetry | None,
        judge: Callable[[Receipt], Receipt] | None,
    ) -> None:
        if secret is None:
            log.warning("%s", NO_SECRET)
        self.secret = secret or new_secret()
        # Dialects that hash what the wire carries (tool arguments) use the same secret.
        self.dialect_options = (
            dialect_options
            if dialect_options.secret is not None
            else replace(dialect_options, secret=self.secret)
        )
        self.anchor = EpochAnchor.now()
        # How late the event loop's clock readings run: the uncertainty of every figure.
        self.clock_lag = LagMonitor()
        self.sinks: list[ReceiptSink] = list(sinks or [])
        self.judge = judge
        self.telemetry = telemetry or NULL_TELEMETRY  # spans and metrics; off by default
        self.active = 0
        self.calls = 0
        self.receipt_errors = 0
        # The calls in progress on disk, so that a crash loses no receipt (set by the CLI).
        self.journal: CallJournal | None = None
        # Where each call's session inputs are written (proxy --capture; set by the server).
        self.captures: CaptureWriter | None = None

    # -- the call journal (see voxproxy.receipts.journal) --------------------------------------

    def journal_opened(self, key: str, t_ns: int, transport: str, dialect: str) -> None:
        if self.journal is not None:
            self.journal.opened(
                key,
                started_at=self.anchor.iso_at(t_ns),
                start_wall_ns=self.anchor.wall_ns_at(t_ns),
                transport=transport,
                dialect=dialect,
                call=keyed_hash(self.secret, key, CALL_PREFIX),
                call_id_source="proxy",
            )

    def journal_update(self, key: str, **fields: object) -> None:
        if self.journal is not None:
            self.journal.update(key, **fields)

    def journal_closed(self, key: str) -> None:
        if self.journal is not None:
            self.journal.closed(key)


def added_fields(built: Receipt, final: Receipt) -> dict[str, Any]:
    """The fields of ``final`` (as JSON) that a transport set on the session's ``built``
    receipt."""
    before = orjson.loads(built.model_dump_json(by_alias=True))
    after: dict[str, Any] = orjson.loads(final.model_dump_json(by_alias=True))
    return {k: v for k, v in after.items() if before.get(k) != v}


def capture_header(
    proxy: CallHost, t_ns: int, link_id: str, transport: str, questions: tuple[str, ...]
) -> CaptureHeader:
    """What a capture of a call of ``proxy`` that started at ``t_ns`` says of its
    measurement's settings (``questions``: those the session may put to the proxy)."""
    from voxproxy import __version__
    from voxproxy.captures.format import CaptureHeader

    return CaptureHeader.of(
        transport=transport,
        dialect=proxy.config.dialect,
        options=proxy.dialect_options,
        config=proxy.config.session,
        start_ns=t_ns,
        anchor=proxy.anchor,
        link_id=link_id,
        secret=proxy.secret,
        version=__version__,
        questions=questions,
    )


def recover_crashed(
    outlet: ReceiptOutlet, entries: list[dict[str, Any]], config: SessionConfig
) -> int:
    """Publish a ``proxy_crashed`` receipt for each call a killed proxy left open in its
    journal, with what the journal knew: start, transport, dialect, call id, whether the
    agent answered, and the duration up to the last sign of life. Returns how many."""
    done = 0
    for e in entries:
        try:
            start_wall = int(e["start_wall_ns"])
            anchor = EpochAnchor(mono_ns=0, wall_ns=start_wall)
            dialect = str(e.get("dialect") or "auto")
            transport = str(e.get("transport") or "websocket")
            session = CallSession(
                Unmeasured(dialect),
                0,
                secret=outlet.secret,
                link_id=str(e["key"]),
                config=replace(config, transport=transport),
                anchor=anchor,
            )
            connected = e.get("upstream_connect_ms")
            if isinstance(connected, (int, float)):
                session.upstream_connected_ns = int(connected * NS_PER_MS)
            end_ns = max(0, int(e.get("alive_ns", start_wall)) - start_wall)
            close = CloseInfo(initiator="none", upstream_status=e.get("upstream_status"))
            receipt = session.close(end_ns, "proxy_crashed", close, dialect=dialect)
            receipt = receipt.model_copy(
                update={
                    "call": str(e["call"]),
                    "call_id_source": "wire" if e.get("call_id_source") == "wire" else "proxy",
                }
            )
        except Exception:
            log.exception("could not rebuild the receipt of a crashed call from the journal")
            outlet.receipt_errors += 1
            if outlet.journal is not None and "key" in e:
                outlet.journal.closed(str(e["key"]))
            continue
        publish(outlet, receipt, session, None, end_ns, anchor=anchor)
        done += 1
    return done


def publish(
    outlet: ReceiptOutlet,
    receipt: Receipt,
    session: CallSession,
    trace: CallTrace | None,
    t_ns: int,
    *,
    anchor: EpochAnchor | None = None,
) -> None:
    """Judge a receipt once, hand it to every sink, then to telemetry. Never raises."""
    outlet.calls += 1
    if outlet.judge is not None:
        try:
            receipt = outlet.judge(receipt)
        except Exception:
            log.exception("could not judge a receipt; it is written without a verdict")
    for sink in outlet.sinks:
        try:
            sink(receipt)
        except Exception:
            outlet.receipt_errors += 1
            log.exception("a receipt sink failed")
    telemetry = outlet.telemetry
    if telemetry is NULL_TELEMETRY:
        return
    flushes: list[FlushTime] = []
    if telemetry.tracing:
        for turn in session.final_turns:
            flushes.extend(FlushTime(turn.index, f.t_ns, f.cut_audible) for f in turn.flushes)
    try:
        times = CallTimes(anchor or outlet.anchor, session.start_ns, t_ns, flushes)
        telemetry.on_receipt(receipt, trace, times)
    except Exception:
        log.exception("telemetry failed for a call; the receipt is written all the same")


class UpstreamSettings(Protocol):
    @property
    def upstream(self) -> str: ...


class HostSettings(Protocol):
    """What a call reads of its proxy's configuration (either transport's)."""

    @property
    def dialect(self) -> str: ...

    @property
    def session(self) -> SessionConfig: ...

    @property
    def relay(self) -> UpstreamSettings: ...


class CallHost(ReceiptOutlet):
    """A proxy of either transport as its calls see it: the outlet, its settings, and
    the calls in progress (the event API finds a call there)."""

    config: HostSettings
    live: LiveCalls[MeasuredCall]
