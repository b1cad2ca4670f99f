"""A tiny OTLP receiver for tests: OTLP/HTTP (protobuf) on loopback, and OTLP/gRPC.

It decodes ``ExportTraceServiceRequest`` / ``ExportMetricsServiceRequest`` /
``ExportLogsServiceRequest`` with ``opentelemetry-proto`` and keeps the spans and log
records as plain records.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from support.waiting import wait_until


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return _attrs(v.kvlist_value.values)
    return getattr(v, kind)


def _attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


def _scoped(resources: Any, scopes: str, items: str) -> Iterator[tuple[dict[str, Any], str, Any]]:
    """Each item of an OTLP export (spans, log records) with its resource's attributes and
    its instrumentation scope's name."""
    for rs in resources:
        resource = _attrs(rs.resource.attributes)
        for ss in getattr(rs, scopes):
            for item in getattr(ss, items):
                yield resource, ss.scope.name, item


@dataclass
class SpanEvent:
    name: str
    time_ns: int
    attributes: dict[str, Any]


@dataclass
class SpanRecord:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    start_ns: int
    end_ns: int
    kind: int
    attributes: dict[str, Any]
    events: list[SpanEvent]
    status_code: int
    resource: dict[str, Any]
    scope: str


@dataclass
class LogRecord:
    event_name: str
    time_ns: int
    trace_id: str
    span_id: str
    body: Any
    attributes: dict[str, Any]
    resource: dict[str, Any]


@dataclass
class Received:
    spans: list[SpanRecord] = field(default_factory=list)
    logs: list[LogRecord] = field(default_factory=list)
    metric_names: set[str] = field(default_factory=set)
    metric_units: dict[str, str] = field(default_factory=dict)
    trace_requests: int = 0
    headers: dict[str, str] = field(default_factory=dict)  # of the last OTLP/HTTP request
    metric_requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_traces(self, req: trace_service_pb2.ExportTraceServiceRequest) -> None:
        with self.lock:
            self.trace_requests += 1
            for resource, scope, s in _scoped(req.resource_spans, "scope_spans", "spans"):
                events = [
                    SpanEvent(e.name, e.time_unix_nano, _attrs(e.attributes)) for e in s.events
                ]
                self.spans.append(
                    SpanRecord(
                        name=s.name,
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_span_id=s.parent_span_id.hex(),
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                        kind=s.kind,
                        attributes=_attrs(s.attributes),
                        events=events,
                        status_code=s.status.code,
                        resource=resource,
                        scope=scope,
                    )
                )

    def add_logs(self, req: logs_service_pb2.ExportLogsServiceRequest) -> None:
        with self.lock:
            for resource, _, r in _scoped(req.resource_logs, "scope_logs", "log_records"):
                self.logs.append(
                    LogRecord(
                        event_name=r.event_name,
                        time_ns=r.time_unix_nano,
                        trace_id=r.trace_id.hex(),
                        span_id=r.span_id.hex(),
                        body=_value(r.body),
                        attributes=_attrs(r.attributes),
                        resource=resource,
                    )
                )

    def add_metrics(self, req: metrics_service_pb2.ExportMetricsServiceRequest) -> None:
        with self.lock:
            self.metric_requests += 1
            for rm in req.resource_metrics:
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        self.metric_names.add(m.name)
                        self.metric_units[m.name] = m.unit

    def named(self, name: str) -> list[SpanRecord]:
        with self.lock:
            return [s for s in self.spans if s.name == name]


def _body(request_body: bytes, encoding: str | None) -> bytes:
    if encoding == "gzip":
        return gzip.decompress(request_body)
    if encoding == "deflate":
        return zlib.decompress(request_body)
    return request_body


async def _export(
    request: web.Request, service: Any, signal: str, add: Callable[[Any], None]
) -> web.Response:
    """Decode one OTLP/HTTP export of ``signal`` (Trace, Metrics, Logs) into ``add`` and
    answer with the empty success response."""
    data = _body(await request.read(), request.headers.get("Content-Encoding"))
    req = getattr(service, f"Export{signal}ServiceRequest")()
    req.ParseFromString(data)
    add(req)
    out = getattr(service, f"Export{signal}ServiceResponse")().SerializeToString()
    return web.Response(body=out, content_type="application/x-protobuf")


class HttpReceiver:
    """OTLP/HTTP: POST /v1/traces, /v1/metrics and /v1/logs (application/x-protobuf)."""

    def __init__(self) -> None:
        self.received = Received()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _traces(self, request: web.Request) -> web.Response:
        self.received.headers = {k.lower(): v for k, v in request.headers.items()}
        return await _export(request, trace_service_pb2, "Trace", self.received.add_traces)

    async def _metrics(self, request: web.Request) -> web.Response:
        return await _export(request, metrics_service_pb2, "Metrics", self.received.add_metrics)

    async def _logs(self, request: web.Request) -> web.Response:
        return await _export(request, logs_service_pb2, "Logs", self.received.add_logs)

    async def start(self) -> HttpReceiver:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/traces", self._traces)
        app.router.add_post("/v1/metrics", self._metrics)
        app.router.add_post("/v1/logs", self._logs)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def wait_for(self, predicate: Any, timeout: float = 10.0) -> None:
        await wait_until(
            lambda: predicate(self.received), timeout, f"OTLP receiver ({self.received.spans})"
        )


class _Export:
    """An OTLP/gRPC service's one method: ``add`` the request, answer ``response()``."""

    def __init__(self, add: Callable[[Any], None], response: Callable[[], Any]) -> None:
        self.add = add
        self.response = response

    def Export(self, request: Any, context: Any) -> Any:  # the gRPC method name
        self.add(request)
        return self.response()


class GrpcReceiver:
    """OTLP/gRPC: the TraceService and LogsService on a loopback port (a thread pool of
    its own)."""

    def __init__(self) -> None:
        import grpc

        self.received = Received()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        traces = _Export(self.received.add_traces, trace_service_pb2.ExportTraceServiceResponse)
        logs = _Export(self.received.add_logs, logs_service_pb2.ExportLogsServiceResponse)
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(traces, self.server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(logs, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> GrpcReceiver:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop(grace=None)
