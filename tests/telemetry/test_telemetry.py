"""voxproxy.telemetry (the package's own logic): make_telemetry gives the no-op telemetry
unless traces or metrics are asked for, and always when ``OTEL_SDK_DISABLED`` is set."""

from __future__ import annotations

import pytest

from voxproxy.telemetry import (
    NULL_TELEMETRY,
    TelemetryConfig,
    make_telemetry,
    otlp_requested,
)


def test_telemetry_is_off_by_default_and_when_the_sdk_is_disabled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", raising=False)
    assert make_telemetry(TelemetryConfig()) is NULL_TELEMETRY
    assert not otlp_requested()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    assert otlp_requested()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert make_telemetry(TelemetryConfig(otlp=True, metrics_listen=("127.0.0.1", 0))) is (
        NULL_TELEMETRY
    )


def test_a_metrics_listener_alone_asks_for_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    from voxproxy.telemetry.otel import OtelTelemetry

    telemetry = make_telemetry(TelemetryConfig(metrics_listen=("127.0.0.1", 0)))
    assert isinstance(telemetry, OtelTelemetry)
    assert telemetry is not NULL_TELEMETRY
