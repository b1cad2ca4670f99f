"""The OTel telemetry's exporter choice: each signal's exporter as the standard
``OTEL_*`` environment asks for it (off, the console, OTLP over HTTP or gRPC)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
from opentelemetry.sdk._logs.export import ConsoleLogRecordExporter
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from voxproxy.telemetry.otel import log_exporter, metric_exporter, span_exporter

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
