"""The proxy's metrics, through the OpenTelemetry metrics API.

Recorded once per call from its receipt (and +-1 on the active-calls counter at
call start and end), never per message. Durations are in seconds (unit ``s``), as
OpenTelemetry (``docs/general/metrics.md``: "seconds ... SHOULD be used") and
Prometheus (base units) ask, and as Pipecat and LiveKit record theirs; attribute
keys are namespaced. Prometheus names (what ``/metrics`` serves; OTLP carries the
instrument names)::

    voxproxy_turn_ttfs_seconds_{bucket,sum,count}{voxproxy_dialect}
    voxproxy_turn_talk_over_total{voxproxy_dialect}
    voxproxy_barge_in_stop_latency_seconds_{bucket,sum,count}{voxproxy_dialect}
    gen_ai_execute_tool_duration_seconds_{bucket,sum,count}{gen_ai_tool_name,error_type}
    voxproxy_call_duration_seconds_{bucket,sum,count}{voxproxy_dialect,voxproxy_terminal,
                                                      error_type}
    voxproxy_calls_total{voxproxy_verdict,voxproxy_terminal}
    voxproxy_call_active
    voxproxy_anomalies_total{voxproxy_anomaly_kind}
    voxproxy_barge_ins_total{voxproxy_barge_in_outcome}
    voxproxy_telemetry_spans_dropped_total{voxproxy_telemetry_drop_reason}
    voxproxy_telemetry_log_records_dropped_total{voxproxy_telemetry_drop_reason}

A talk-over turn (the agent started before the caller stopped: negative
time to first sound) has no place in a duration histogram; it is counted in
``voxproxy.turn.talk_over`` instead, so that ``ttfs_count + talk_over`` is every
answered turn and the histogram's share of them is visible.

``voxproxy proxy --metrics-legacy-ms`` also serves the metrics of the release before,
for one release (see :data:`LEGACY_PROMETHEUS_NAMES`): the three histograms in
milliseconds, with their bare ``dialect`` / ``status`` labels, and the old name of the
active-calls gauge, on a meter (instrumentation scope) of their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry.metrics import Meter
from opentelemetry.util.types import AttributeValue

from voxproxy.telemetry import attributes as A

if TYPE_CHECKING:
    from voxproxy.receipts.model import Receipt

PROMETHEUS_NAMES = {
    A.METRIC_TTFS: "voxproxy_turn_ttfs_seconds",
    A.METRIC_TALK_OVER: "voxproxy_turn_talk_over_total",
    A.METRIC_STOP_LATENCY: "voxproxy_barge_in_stop_latency_seconds",
    A.METRIC_TOOL_DURATION: "gen_ai_execute_tool_duration_seconds",
    A.METRIC_CALL_DURATION: "voxproxy_call_duration_seconds",
    A.METRIC_CALLS: "voxproxy_calls_total",
    A.METRIC_ACTIVE_CALLS: "voxproxy_call_active",
    A.METRIC_ANOMALIES: "voxproxy_anomalies_total",
    A.METRIC_BARGE_INS: "voxproxy_barge_ins_total",
    A.METRIC_SPANS_DROPPED: "voxproxy_telemetry_spans_dropped_total",
    A.METRIC_LOGS_DROPPED: "voxproxy_telemetry_log_records_dropped_total",
}
"""Instrument name -> the family name Prometheus sees (checked by the tests)."""

LEGACY_PROMETHEUS_NAMES = {
    A.METRIC_TTFS: "voxproxy_turn_ttfs_milliseconds",
    A.METRIC_STOP_LATENCY: "voxproxy_barge_in_stop_latency_milliseconds",
    A.LEGACY_METRIC_TOOL_LATENCY: "voxproxy_tool_latency_milliseconds",
    A.LEGACY_METRIC_ACTIVE_CALLS: "voxproxy_calls_active",
}
"""What ``--metrics-legacy-ms`` adds: the names of the release before."""

TOOL_ERRORS = frozenset({"error", "timeout", "malformed"})
"""Tool statuses that mean the tool call failed (its ``error.type``)."""

FAILED_TERMINALS = frozenset(
    {
        "upstream_refused",
        "upstream_unreachable",
        "upstream_timeout",
        "agent_vanished",
        "message_too_big",
        "proxy_error",
        "bad_offer",
        "ice_failed",
        "proxy_crashed",
    }
)
"""Terminal states of a call that failed (its ``error.type``)."""

MS_PER_S = 1000.0


class Instruments:
    """Every instrument voxproxy records, created on one meter."""

    def __init__(self, meter: Meter) -> None:
        latency = list(A.LATENCY_BUCKETS_S)
        self.ttfs = meter.create_histogram(
            A.METRIC_TTFS,
            unit="s",
            description="Time to first sound: caller speech end -> agent audio audible "
            "(talk-over turns are counted in voxproxy.turn.talk_over instead).",
            explicit_bucket_boundaries_advisory=latency,
        )
        self.talk_over = meter.create_counter(
            A.METRIC_TALK_OVER,
            unit="{turn}",
            description="Turns the agent started before the caller stopped (negative time "
            "to first sound): not in the voxproxy.turn.ttfs histogram.",
        )
        self.stop_latency = meter.create_histogram(
            A.METRIC_STOP_LATENCY,
            unit="s",
            description="Barge-in stop latency: caller talks over the agent -> agent audio ends.",
            explicit_bucket_boundaries_advisory=latency,
        )
        self.tool_duration = meter.create_histogram(
            A.METRIC_TOOL_DURATION,
            unit="s",
            description="Tool call duration: tool.started -> tool.finished (GenAI semantic "
            "conventions; the same as the execute_tool span's duration).",
            explicit_bucket_boundaries_advisory=list(A.TOOL_BUCKETS_S),
        )
        self.call_duration = meter.create_histogram(
            A.METRIC_CALL_DURATION,
            unit="s",
            description="Call duration: caller connected -> call ended.",
            explicit_bucket_boundaries_advisory=list(A.CALL_BUCKETS_S),
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
        self.logs_dropped = meter.create_counter(
            A.METRIC_LOGS_DROPPED,
            unit="{log_record}",
            description="Receipt log records that could not be exported (the receipt is "
            "written to the proxy's own sinks all the same).",
        )
        self.legacy: LegacyInstruments | None = None

    def add_legacy(self, meter: Meter) -> None:
        """Also record the milliseconds metrics of the release before (on ``meter``)."""
        self.legacy = LegacyInstruments(meter)

    def call_opened(self) -> None:
        self.active.add(1)
        if self.legacy is not None:
            self.legacy.active.add(1)

    def call_closed(self) -> None:
        self.active.add(-1)
        if self.legacy is not None:
            self.legacy.active.add(-1)

    def record(self, r: Receipt) -> None:
        dialect: dict[str, AttributeValue] = {A.LABEL_DIALECT: r.dialect}
        for t in r.turns:
            if t.ttfs_ms is None:
                continue
            if t.ttfs_ms >= 0:
                self.ttfs.record(t.ttfs_ms / MS_PER_S, dialect)
            else:
                self.talk_over.add(1, dialect)
        for t in r.turns:
            b = t.barge_in
            if b is not None:
                self.barge_ins.add(1, {A.LABEL_OUTCOME: b.outcome})
                if b.stop_latency_ms is not None and b.stop_latency_ms >= 0:
                    self.stop_latency.record(b.stop_latency_ms / MS_PER_S, dialect)
        for c in r.tools:
            if c.latency_ms is None or c.latency_ms < 0:
                continue  # unfinished or cancelled: no duration was measured
            attrs: dict[str, AttributeValue] = {A.GEN_AI_TOOL_NAME: c.tool or "unknown"}
            if c.status in TOOL_ERRORS:
                attrs[A.ERROR_TYPE] = c.status or "error"
            self.tool_duration.record(c.latency_ms / MS_PER_S, attrs)
        call: dict[str, AttributeValue] = {A.LABEL_DIALECT: r.dialect, A.LABEL_TERMINAL: r.terminal}
        if r.terminal in FAILED_TERMINALS:
            call[A.ERROR_TYPE] = r.terminal
        self.call_duration.record(max(0.0, r.duration_ms) / MS_PER_S, call)
        verdict = r.verdict.verdict if r.verdict is not None else "none"
        self.calls.add(1, {A.LABEL_VERDICT: verdict, A.LABEL_TERMINAL: r.terminal})
        for kind, count in r.anomalies.items():
            self.anomalies.add(count, {A.LABEL_KIND: kind})
        if self.legacy is not None:
            self.legacy.record(r)


class LegacyInstruments:
    """The milliseconds histograms (and gauge name) of the release before: recorded only
    under ``--metrics-legacy-ms``, to be removed in the next release."""

    def __init__(self, meter: Meter) -> None:
        buckets = list(A.LATENCY_BUCKETS_MS)
        self.ttfs = meter.create_histogram(
            A.METRIC_TTFS,
            unit="ms",
            description="Deprecated (use voxproxy_turn_ttfs_seconds): time to first sound.",
            explicit_bucket_boundaries_advisory=buckets,
        )
        self.stop_latency = meter.create_histogram(
            A.METRIC_STOP_LATENCY,
            unit="ms",
            description="Deprecated (use voxproxy_barge_in_stop_latency_seconds): barge-in "
            "stop latency.",
            explicit_bucket_boundaries_advisory=buckets,
        )
        self.tool_latency = meter.create_histogram(
            A.LEGACY_METRIC_TOOL_LATENCY,
            unit="ms",
            description="Deprecated (use gen_ai_execute_tool_duration_seconds): tool latency.",
            explicit_bucket_boundaries_advisory=buckets,
        )
        self.active = meter.create_up_down_counter(
            A.LEGACY_METRIC_ACTIVE_CALLS,
            unit="{call}",
            description="Deprecated (use voxproxy_call_active): calls in progress.",
        )

    def record(self, r: Receipt) -> None:
        dialect = {A.LEGACY_LABEL_DIALECT: r.dialect}
        for t in r.turns:
            if t.ttfs_ms is not None and t.ttfs_ms >= 0:
                self.ttfs.record(t.ttfs_ms, dialect)
            b = t.barge_in
            if b is not None and b.stop_latency_ms is not None and b.stop_latency_ms >= 0:
                self.stop_latency.record(b.stop_latency_ms, dialect)
        for c in r.tools:
            if c.latency_ms is not None and c.latency_ms >= 0:
                self.tool_latency.record(c.latency_ms, {A.LEGACY_LABEL_STATUS: c.status or "none"})
