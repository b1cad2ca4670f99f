"""The OpenTelemetry-backed :class:`~voxproxy.telemetry.Telemetry`.

Configured the OpenTelemetry way: the exporters read the standard environment
variables themselves (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``..._HEADERS``,
``..._TIMEOUT``, ``..._COMPRESSION``, ``..._CERTIFICATE`` and the per-signal
``..._TRACES_*`` / ``..._METRICS_*`` forms); this module honours
``OTEL_EXPORTER_OTLP_PROTOCOL`` (``http/protobuf``, the default, or ``grpc``; also
per signal), ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` /
``OTEL_LOGS_EXPORTER`` (``otlp``, ``console`` or ``none``; the logs carry the
receipts, :mod:`voxproxy.telemetry.logs`), ``OTEL_SEMCONV_STABILITY_OPT_IN``
(``gen_ai_latest_experimental``: the GenAI names of open proposals),
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (through
:meth:`Resource.create`), ``OTEL_TRACES_SAMPLER`` (the SDK's default sampler reads
it), ``OTEL_BSP_*`` and ``OTEL_METRIC_EXPORT_INTERVAL``.

Nothing here touches the forwarding plane: spans are batched and exported by
the SDK's worker thread, metrics by the periodic reader's thread. A collector
that is down costs dropped spans, counted (``voxproxy.telemetry.spans.dropped``
and a rate-limited log line), never a call.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    ConsoleLogRecordExporter,
    LogRecordExporter,
    LogRecordExportResult,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import Span, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from voxproxy import __version__
from voxproxy.core.receipt import Receipt
from voxproxy.core.timebase import EpochAnchor
from voxproxy.telemetry import attributes as A
from voxproxy.telemetry.base import (
    CallTimes,
    CallTrace,
    Telemetry,
    TelemetryConfig,
    experimental_requested,
)
from voxproxy.telemetry.logs import receipt_records
from voxproxy.telemetry.metrics import Instruments
from voxproxy.telemetry.spans import write_call

if TYPE_CHECKING:
    from voxproxy.telemetry.prometheus import MetricsServer

log = logging.getLogger("voxproxy.telemetry")

DROP_LOG_INTERVAL_S = 60.0
PROTOCOLS = ("http/protobuf", "grpc")
E = TypeVar("E")  # an exporter: of spans, metrics or log records
R = TypeVar("R")  # an export result: of spans or log records


def _protocol(env: Mapping[str, str], signal: str) -> str:
    raw = (
        env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    if raw not in PROTOCOLS:
        log.warning("OTLP protocol %r is not supported for %s; using http/protobuf", raw, signal)
        return "http/protobuf"
    return raw


def _exporter_name(env: Mapping[str, str], signal: str) -> str:
    raw = (env.get(f"OTEL_{signal.upper()}_EXPORTER") or "otlp").strip().lower()
    names = [n.strip() for n in raw.split(",") if n.strip()]
    for name in names:
        if name in ("otlp", "console", "none"):
            return name
        log.warning("OTEL_%s_EXPORTER=%s is not supported; ignored", signal.upper(), name)
    return "otlp"


def _exporter(
    env: Mapping[str, str], signal: str, console: Callable[[], E], module: str, name: str
) -> E | None:
    """The exporter of ``signal`` the environment asks for (None: that signal off): the
    console one, or OTLP over gRPC or HTTP, ``name`` in
    ``opentelemetry.exporter.otlp.proto.{grpc,http}.<module>``, imported only when chosen."""
    chosen = _exporter_name(env, signal)
    if chosen == "none":
        return None
    if chosen == "console":
        return console()
    transport = "grpc" if _protocol(env, signal) == "grpc" else "http"
    otlp = importlib.import_module(f"opentelemetry.exporter.otlp.proto.{transport}.{module}")
    exporter: E = getattr(otlp, name)()
    return exporter


def span_exporter(env: Mapping[str, str]) -> SpanExporter | None:
    """The span exporter the environment asks for (None: traces off)."""
    return _exporter(env, "traces", ConsoleSpanExporter, "trace_exporter", "OTLPSpanExporter")


def metric_exporter(env: Mapping[str, str]) -> MetricExporter | None:
    """The metric exporter the environment asks for (None: no OTLP metrics)."""
    return _exporter(env, "metrics", ConsoleMetricExporter, "metric_exporter", "OTLPMetricExporter")


def log_exporter(env: Mapping[str, str]) -> LogRecordExporter | None:
    """The log exporter the environment asks for (None: no receipt log records)."""
    return _exporter(env, "logs", ConsoleLogRecordExporter, "_log_exporter", "OTLPLogExporter")


def upstream_address(url: str | None) -> dict[str, str | int]:
    """``server.address`` / ``server.port`` / ``url.scheme`` of the agent's URL (nothing
    else of it: a path or query may carry a token)."""
    if not url:
        return {}
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return {}
    out: dict[str, str | int] = {}
    if parts.hostname:
        out[A.SERVER_ADDRESS] = parts.hostname
    if port is None:
        port = {"ws": 80, "http": 80, "wss": 443, "https": 443}.get(parts.scheme)
    if port is not None:
        out[A.SERVER_PORT] = port
    if parts.scheme:
        out[A.URL_SCHEME] = parts.scheme
    return out


def make_resource(service_name: str) -> Resource:
    """``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` win over voxproxy's defaults."""
    base = Resource.create({})
    extra: dict[str, str] = {}
    if str(base.attributes.get("service.name", "")).startswith("unknown_service"):
        extra["service.name"] = service_name
    if "service.version" not in base.attributes:
        extra["service.version"] = __version__
    return base.merge(Resource(extra)) if extra else base


class _Counting:
    """What a wrapped exporter exported, and what it failed to (counted as dropped)."""

    def __init__(self, what: str, dropped: Callable[[int, str], None]) -> None:
        self._what = what  # in the log line: "the <what> exporter raised"
        self._dropped = dropped
        self.exported = 0
        self.failed = 0

    def _counted(self, n: int, export: Callable[[], R], success: R, failure: R) -> R:
        """``export()`` of ``n`` items, counted; an exception is a failure, logged."""
        try:
            result = export()
        except Exception:
            log.exception("the %s exporter raised", self._what)
            result = failure
        if result is success:
            self.exported += n
        else:
            self.failed += n
            self._dropped(n, "export_failed")
        return result


class CountingExporter(_Counting, SpanExporter):
    """Wraps the real exporter: counts what it exported and what it dropped."""

    def __init__(self, inner: SpanExporter, telemetry: OtelTelemetry) -> None:
        super().__init__("span", telemetry.note_dropped)
        self.inner = inner
        self._aborted = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        n = len(spans)
        if self._aborted:
            self.failed += n
            self._dropped(n, "shutdown")
            return SpanExportResult.FAILURE
        return self._counted(
            n, lambda: self.inner.export(spans), SpanExportResult.SUCCESS, SpanExportResult.FAILURE
        )

    def abort(self) -> None:
        """Stop waiting on a collector: pending retries end, later batches are dropped."""
        self._aborted = True
        with contextlib.suppress(Exception):
            self.inner.shutdown()

    def shutdown(self) -> None:
        if not self._aborted:
            self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class CountingLogExporter(_Counting, LogRecordExporter):
    """Wraps the real log exporter: counts the receipt log records it could not export."""

    def __init__(self, inner: LogRecordExporter, telemetry: OtelTelemetry) -> None:
        super().__init__("log", telemetry.note_logs_dropped)
        self.inner = inner

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        return self._counted(
            len(batch),
            lambda: self.inner.export(batch),
            LogRecordExportResult.SUCCESS,
            LogRecordExportResult.FAILURE,
        )

    def shutdown(self) -> None:
        self.inner.shutdown()  # type: ignore[no-untyped-call]

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class CountingProcessor(BatchSpanProcessor):
    """The SDK's batch processor, counting the spans handed to it."""

    def __init__(self, exporter: SpanExporter) -> None:
        super().__init__(exporter)
        self.submitted = 0

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None and span.context.trace_flags.sampled:
            self.submitted += 1
        super().on_end(span)


class OtelCallTrace(CallTrace):
    __slots__ = ("link_id", "span", "upstream")

    def __init__(
        self,
        headers: Sequence[tuple[str, str]],
        span: Span,
        upstream: Span | None = None,
        link_id: str | None = None,
    ) -> None:
        super().__init__(headers)
        self.span = span  # SERVER: the call
        self.upstream = upstream  # CLIENT: the agent's leg (its context went upstream)
        self.link_id = link_id


class OtelTelemetry(Telemetry):
    """Traces over OTLP, metrics over OTLP and/or a Prometheus endpoint."""

    def __init__(
        self,
        config: TelemetryConfig,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        env = os.environ if env is None else env
        self._lock = threading.Lock()
        self._dropped: Counter[str] = Counter()
        self._last_drop_log = 0.0
        self._closed = False
        resource = make_resource(config.service_name)
        readers: list[MetricReader] = []
        self._registry = None
        if config.metrics_listen is not None:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from prometheus_client import CollectorRegistry

            self._registry = CollectorRegistry(auto_describe=True)
            readers.append(
                PrometheusMetricReader(registry=self._registry, scope_info_enabled=False)
            )
        if config.otlp:
            exporter = metric_exporter(env)
            if exporter is not None:
                readers.append(PeriodicExportingMetricReader(exporter))
        self.meter_provider = MeterProvider(resource=resource, metric_readers=readers)
        self.instruments = Instruments(
            self.meter_provider.get_meter("voxproxy", __version__), config.tool_names or ()
        )
        self.experimental = (
            experimental_requested(env)
            if config.experimental_gen_ai is None
            else config.experimental_gen_ai
        )
        self.logger_provider: LoggerProvider | None = None
        self.log_exporter: CountingLogExporter | None = None
        logs = log_exporter(env) if config.otlp else None
        if logs is not None:
            self.log_exporter = CountingLogExporter(logs, self)
            self.logger_provider = LoggerProvider(resource=resource)
            self.logger_provider.add_log_record_processor(
                BatchLogRecordProcessor(self.log_exporter)
            )
            self.logger = self.logger_provider.get_logger("voxproxy", __version__)
        self.tracer_provider: TracerProvider | None = None
        self.exporter: CountingExporter | None = None
        self.processor: CountingProcessor | None = None
        inner = span_exporter(env) if config.otlp else None
        if inner is not None:
            self.exporter = CountingExporter(inner, self)
            self.processor = CountingProcessor(self.exporter)
            self.tracer_provider = TracerProvider(resource=resource)
            self.tracer_provider.add_span_processor(self.processor)
            self.tracer = self.tracer_provider.get_tracer("voxproxy", __version__)
            self.tracing = True
        self._propagator = TraceContextTextMapPropagator()
        self._metrics_server: MetricsServer | None = None

    # -- the hooks ---------------------------------------------------------------------------

    def call_opened(self) -> None:
        self.instruments.call_opened()

    def call_closed(self) -> None:
        self.instruments.call_closed()

    def start_call(
        self,
        anchor: EpochAnchor,
        start_ns: int,
        carrier: Mapping[str, str],
        *,
        link_id: str | None = None,
        upstream: str | None = None,
    ) -> CallTrace | None:
        if not self.tracing or self._closed:
            return None
        parent = self._propagator.extract(carrier)  # an invalid traceparent: a new trace
        span = self.tracer.start_span(
            A.SPAN_CALL,
            context=parent,
            kind=SpanKind.SERVER,
            start_time=anchor.wall_ns_at(start_ns),
        )
        # The agent's leg starts now (the proxy is about to open its handshake); the
        # agent receives this CLIENT span's context, so its spans nest under it.
        client = self.tracer.start_span(
            A.SPAN_UPSTREAM,
            context=trace.set_span_in_context(span),
            kind=SpanKind.CLIENT,
            start_time=anchor.wall_ns_at(time.monotonic_ns()),
            attributes=upstream_address(upstream),
        )
        headers: dict[str, str] = {}
        self._propagator.inject(headers, context=trace.set_span_in_context(client))
        return OtelCallTrace(list(headers.items()), span, client, link_id)

    def on_receipt(self, receipt: Receipt, trace_: CallTrace | None, times: CallTimes) -> None:
        try:
            self.instruments.record(receipt)
        except Exception:
            log.exception("could not record the call's metrics")
        if self._closed:
            return
        span: Span | None = None
        upstream: Span | None = None
        link_id: str | None = None
        if isinstance(trace_, OtelCallTrace):
            span, upstream, link_id = trace_.span, trace_.upstream, trace_.link_id
        elif self.tracing:  # the call never reached the upstream handshake
            span = self.tracer.start_span(
                A.SPAN_CALL,
                kind=SpanKind.SERVER,
                start_time=times.anchor.wall_ns_at(times.start_ns),
            )
        if span is not None:
            write_call(
                self.tracer,
                span,
                receipt,
                times,
                upstream_span=upstream,
                link_id=link_id,
                experimental=self.experimental,
            )
        self._emit_receipt(receipt, span, link_id, times)

    def _emit_receipt(
        self, receipt: Receipt, span: Span | None, link_id: str | None, times: CallTimes
    ) -> None:
        """The receipt and its verdict as log records, in the call span's context."""
        if self.logger_provider is None:
            return
        try:
            ctx = trace.set_span_in_context(span) if span is not None else None
            when = times.anchor.wall_ns_at(times.end_ns)
            for rec in receipt_records(receipt, link_id):
                self.logger.emit(
                    timestamp=when,
                    context=ctx,
                    body=rec.body,
                    attributes=rec.attributes,
                    event_name=rec.event_name,
                )
        except Exception:
            log.exception("could not send the call's receipt as log records")

    # -- drops -------------------------------------------------------------------------------

    def note_dropped(self, n: int, reason: str) -> None:
        """``n`` spans were lost (called from the exporter's thread)."""
        if n <= 0:
            return
        with self._lock:
            self._dropped[reason] += n
            total = sum(self._dropped.values())
            now = time.monotonic()
            due = now - self._last_drop_log >= DROP_LOG_INTERVAL_S
            if due:
                self._last_drop_log = now
        with contextlib.suppress(Exception):
            self.instruments.spans_lost(n, reason)
        if due:
            log.warning(
                "telemetry: %d span(s) dropped so far (%s); calls are not affected",
                total,
                ", ".join(f"{k}: {v}" for k, v in sorted(self._dropped.items())),
            )

    def note_logs_dropped(self, n: int, reason: str) -> None:
        """``n`` receipt log records were lost (called from the exporter's thread)."""
        if n > 0:
            with contextlib.suppress(Exception):
                self.instruments.log_records_lost(n, reason)

    def dropped_spans(self) -> int:
        with self._lock:
            return sum(self._dropped.values())

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        listen = self.config.metrics_listen
        if listen is None or self._registry is None or self._metrics_server is not None:
            return
        from voxproxy.telemetry.prometheus import MetricsServer

        server = MetricsServer(self._registry)
        server.ready = self.ready
        self.metrics_port = await server.start(*listen)
        self._metrics_server = server

    def flush(self, timeout_s: float = 5.0) -> None:
        """Export pending spans and metrics now (blocking: call it off the event loop)."""
        if self.processor is not None:
            self.processor.force_flush(int(timeout_s * 1000))
        if self.logger_provider is not None:
            self.logger_provider.force_flush(int(timeout_s * 1000))
        self.meter_provider.force_flush(int(timeout_s * 1000))

    def _shutdown_blocking(self) -> None:
        timeout = self.config.shutdown_timeout_s
        exporter = self.exporter
        timer = None
        if exporter is not None:
            timer = threading.Timer(timeout, exporter.abort)
            timer.daemon = True
            timer.start()
        try:
            if self.tracer_provider is not None:
                self.tracer_provider.shutdown()
        except Exception:
            log.exception("tracer provider shutdown failed")
        finally:
            if timer is not None:
                timer.cancel()
        if self.processor is not None and exporter is not None:
            lost = self.processor.submitted - exporter.exported - exporter.failed
            self.note_dropped(lost, "queue_full")
        dropped = self.dropped_spans()
        if dropped:
            log.warning("telemetry: %d span(s) could not be exported", dropped)
        if self.logger_provider is not None:
            try:
                self.logger_provider.shutdown()
            except Exception:
                log.exception("logger provider shutdown failed")
        try:
            self.meter_provider.shutdown(timeout_millis=timeout * 1000)
        except Exception:
            log.exception("meter provider shutdown failed")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        server = self._metrics_server
        if server is not None:
            await server.stop()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def run() -> None:
            try:
                self._shutdown_blocking()
            finally:
                with contextlib.suppress(RuntimeError):  # the loop is gone
                    loop.call_soon_threadsafe(
                        lambda: done.done() or done.set_result(None)  # type: ignore[func-returns-value]
                    )

        # A daemon thread, not the default executor: a hung exporter must not hold up exit.
        threading.Thread(target=run, name="voxproxy-telemetry-shutdown", daemon=True).start()
        try:
            await asyncio.wait_for(done, self.config.shutdown_timeout_s + 2.0)
        except TimeoutError:
            log.warning("telemetry did not shut down in time; pending data is dropped")
