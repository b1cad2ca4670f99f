"""The OTel telemetry's exporters: each signal's exporter as the standard ``OTEL_*``
environment asks for it (off, the console, OTLP over HTTP or gRPC), and the wrappers that
count what was exported and what was dropped."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
    OTLPLogExporter as GrpcLogExporter,
)
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
    OTLPMetricExporter as GrpcMetricExporter,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http._log_exporter import (
    OTLPLogExporter as HttpLogExporter,
)
from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
    OTLPMetricExporter as HttpMetricExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk._logs.export import ConsoleLogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExportResult

from voxproxy.telemetry.otel import (
    CountingExporter,
    CountingLogExporter,
    log_exporter,
    metric_exporter,
    span_exporter,
)

# signal, its chooser, its console exporter, its OTLP exporters over HTTP and gRPC
SIGNALS: list[tuple[str, Callable[[Mapping[str, str]], Any], type, type, type]] = [
    ("traces", span_exporter, ConsoleSpanExporter, HttpSpanExporter, GrpcSpanExporter),
    ("metrics", metric_exporter, ConsoleMetricExporter, HttpMetricExporter, GrpcMetricExporter),
    ("logs", log_exporter, ConsoleLogRecordExporter, HttpLogExporter, GrpcLogExporter),
]


def _chosen(choose: Callable[[Mapping[str, str]], Any], env: Mapping[str, str]) -> type | None:
    exporter = choose(env)
    if exporter is None:
        return None
    exporter.shutdown()
    return type(exporter)


@pytest.mark.parametrize(("signal", "choose", "console", "http", "grpc"), SIGNALS)
def test_each_signal_gets_the_exporter_its_environment_names(
    signal: str,
    choose: Callable[[Mapping[str, str]], Any],
    console: type,
    http: type,
    grpc: type,
) -> None:
    up = signal.upper()
    assert _chosen(choose, {}) is http  # OTLP over HTTP by default
    assert _chosen(choose, {f"OTEL_{up}_EXPORTER": "none"}) is None
    assert _chosen(choose, {f"OTEL_{up}_EXPORTER": "console"}) is console
    assert _chosen(choose, {f"OTEL_{up}_EXPORTER": "zipkin,console"}) is console
    assert _chosen(choose, {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) is grpc
    per_signal = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", f"OTEL_EXPORTER_OTLP_{up}_PROTOCOL": ""}
    assert _chosen(choose, per_signal) is grpc  # an empty per-signal value defers
    assert _chosen(choose, {f"OTEL_EXPORTER_OTLP_{up}_PROTOCOL": "grpc"}) is grpc
    assert _chosen(choose, {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}) is http  # unsupported


class _Telemetry:
    """Records what the counting exporters report as dropped, by signal."""

    def __init__(self) -> None:
        self.dropped: list[tuple[str, int, str]] = []

    def note_dropped(self, n: int, reason: str) -> None:
        self.dropped.append(("spans", n, reason))

    def note_logs_dropped(self, n: int, reason: str) -> None:
        self.dropped.append(("logs", n, reason))


class _Inner:
    """An exporter that answers each export from a list: a result, or an exception."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.shut = 0

    def export(self, batch: Sequence[object]) -> Any:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def shutdown(self) -> None:
        self.shut += 1


@pytest.mark.parametrize(
    ("wrap", "ok", "failed", "signal", "what"),
    [
        (CountingExporter, SpanExportResult.SUCCESS, SpanExportResult.FAILURE, "spans", "span"),
        (
            CountingLogExporter,
            LogRecordExportResult.SUCCESS,
            LogRecordExportResult.FAILURE,
            "logs",
            "log",
        ),
    ],
)
def test_the_counting_exporters_count_exports_failures_and_exceptions(
    wrap: Any, ok: Any, failed: Any, signal: str, what: str, caplog: pytest.LogCaptureFixture
) -> None:
    telemetry = _Telemetry()
    inner = _Inner([ok, failed, RuntimeError("collector gone")])
    exporter = wrap(inner, telemetry)
    assert exporter.export([1, 2, 3]) is ok
    assert exporter.export([1, 2]) is failed
    with caplog.at_level(logging.ERROR, logger="voxproxy.telemetry"):
        assert exporter.export([1]) is failed
    assert (exporter.exported, exporter.failed) == (3, 3)
    assert telemetry.dropped == [(signal, 2, "export_failed"), (signal, 1, "export_failed")]
    assert [r.getMessage() for r in caplog.records] == [f"the {what} exporter raised"]


def test_an_aborted_span_exporter_drops_later_batches_as_shutdown() -> None:
    telemetry = _Telemetry()
    inner = _Inner([SpanExportResult.SUCCESS])
    exporter = CountingExporter(inner, telemetry)  # type: ignore[arg-type]
    exporter.abort()
    assert exporter.export([1, 2]) is SpanExportResult.FAILURE  # not handed to the collector
    exporter.shutdown()
    assert inner.shut == 1 and inner.answers == [SpanExportResult.SUCCESS]
    assert (exporter.exported, exporter.failed) == (0, 2)
    assert telemetry.dropped == [("spans", 2, "shutdown")]
