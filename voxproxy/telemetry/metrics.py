"""The proxy's metrics, through the OpenTelemetry metrics API.

Recorded once per call from its receipt (and +-1 on the active-calls counter at
call start and end), never per message. Prometheus names (what
``/metrics`` serves; OTLP carries the instrument names)::

    voxproxy_turn_ttfs_milliseconds_{bucket,sum,count}{dialect}
    voxproxy_barge_in_stop_latency_milliseconds_{bucket,sum,count}{dialect}
    voxproxy_tool_latency_milliseconds_{bucket,sum,count}{status}
    voxproxy_calls_total{verdict,terminal}
    voxproxy_calls_active
    voxproxy_anomalies_total{kind}
    voxproxy_barge_ins_total{outcome}
    voxproxy_telemetry_spans_dropped_total{reason}
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry.metrics import Meter

from voxproxy.telemetry import attributes as A

if TYPE_CHECKING:
    from voxproxy.receipts.model import Receipt

PROMETHEUS_NAMES = {
    A.METRIC_TTFS: "voxproxy_turn_ttfs_milliseconds",
    A.METRIC_STOP_LATENCY: "voxproxy_barge_in_stop_latency_milliseconds",
    A.METRIC_TOOL_LATENCY: "voxproxy_tool_latency_milliseconds",
    A.METRIC_CALLS: "voxproxy_calls_total",
    A.METRIC_ACTIVE_CALLS: "voxproxy_calls_active",
    A.METRIC_ANOMALIES: "voxproxy_anomalies_total",
    A.METRIC_BARGE_INS: "voxproxy_barge_ins_total",
    A.METRIC_SPANS_DROPPED: "voxproxy_telemetry_spans_dropped_total",
}
"""Instrument name -> the family name Prometheus sees (checked by the tests)."""


class Instruments:
    """Every instrument voxproxy records, created on one meter."""

    def __init__(self, meter: Meter) -> None:
        buckets = list(A.LATENCY_BUCKETS_MS)
        self.ttfs = meter.create_histogram(
            A.METRIC_TTFS,
            unit="ms",
            description="Time to first sound: caller speech end -> agent audio audible.",
            explicit_bucket_boundaries_advisory=buckets,
        )
        self.stop_latency = meter.create_histogram(
            A.METRIC_STOP_LATENCY,
            unit="ms",
            description="Barge-in stop latency: caller talks over the agent -> agent audio ends.",
            explicit_bucket_boundaries_advisory=buckets,
        )
        self.tool_latency = meter.create_histogram(
            A.METRIC_TOOL_LATENCY,
            unit="ms",
            description="Tool call latency: tool.started -> tool.finished.",
            explicit_bucket_boundaries_advisory=buckets,
        )
        self.calls = meter.create_counter(
            A.METRIC_CALLS, unit="{call}", description="Calls ended, by verdict and terminal state."
        )
        self.active = meter.create_up_down_counter(
            A.METRIC_ACTIVE_CALLS, unit="{call}", description="Calls in progress."
        )
        self.anomalies = meter.create_counter(
            A.METRIC_ANOMALIES,
            unit="{message}",
            description="Messages that could not be measured, and measurement errors, by kind.",
        )
        self.barge_ins = meter.create_counter(
            A.METRIC_BARGE_INS, unit="{barge_in}", description="Barge-ins, by outcome."
        )
        self.spans_dropped = meter.create_counter(
            A.METRIC_SPANS_DROPPED,
            unit="{span}",
            description="Spans that could not be exported (collector down, queue full, shutdown).",
        )

    def record(self, r: Receipt) -> None:
        dialect = {A.LABEL_DIALECT: r.dialect}
        for t in r.turns:
            if t.ttfs_ms is not None and t.ttfs_ms >= 0:
                self.ttfs.record(t.ttfs_ms, dialect)
            b = t.barge_in
            if b is not None:
                self.barge_ins.add(1, {A.LABEL_OUTCOME: b.outcome})
                if b.stop_latency_ms is not None and b.stop_latency_ms >= 0:
                    self.stop_latency.record(b.stop_latency_ms, dialect)
        for c in r.tools:
            if c.latency_ms is not None and c.latency_ms >= 0:
                self.tool_latency.record(c.latency_ms, {A.LABEL_STATUS: c.status or "none"})
        verdict = r.verdict.verdict if r.verdict is not None else "none"
        self.calls.add(1, {A.LABEL_VERDICT: verdict, A.LABEL_TERMINAL: r.terminal})
        for kind, count in r.anomalies.items():
            self.anomalies.add(count, {A.LABEL_KIND: kind})
