"""The proxy's metrics, through the OpenTelemetry metrics API.

Recorded once per call from its receipt (and +-1 on the active-calls counter at
call start and end), never per message. Durations are in seconds (unit ``s``), as
OpenTelemetry (``semantic-conventions/docs/general/metrics.md``: "seconds ... SHOULD be used") and
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

Every label value is bounded, so that neither the number of series nor what they
say is the caller's to choose (a label value is also text a caller would otherwise
write into every scrape). Each label has a set of values that pass as they are (its
enumeration in the code; for ``gen_ai.tool.name`` the declared vocabulary,
``--event-names``); a value outside it passes only when it has the shape of a name
(:func:`voxproxy.core.ids.name_shaped`) and fewer than the label's bound of such values were
let in by this process; anything else is recorded as :data:`OTHER`. A receipt's tool
name is already declared, name-shaped or a keyed hash (``n_...``): hashes, a series
each, always fall to :data:`OTHER`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import get_args

from opentelemetry.metrics import Counter, Histogram, Meter
from opentelemetry.util.types import AttributeValue

from voxproxy.core.events import AnomalyKind
from voxproxy.core.ids import name_shaped
from voxproxy.core.receipt import TERMINALS, BargeInRecord, Receipt
from voxproxy.receipts.verdict import VERDICTS
from voxproxy.telemetry import attributes as A

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

TOOL_ERRORS = frozenset({"error", "timeout", "malformed"})
"""Tool statuses that mean the tool call failed (its ``error.type``)."""

FAILED_TERMINALS = frozenset(
    {
        "upstream_refused",
        "upstream_unreachable",
        "upstream_timeout",
        "agent_vanished",
        "message_too_big",
        "protocol_error",
        "proxy_error",
        "bad_offer",
        "ice_failed",
        "proxy_crashed",
    }
)
"""Terminal states of a call that failed (its ``error.type``)."""

MS_PER_S = 1000.0

OTHER = "_OTHER"
"""The label value of whatever a label may not show: OpenTelemetry's own word for a value
outside a known set (``http.request.method``, ``error.type``). No name-shaped value can
be it (those start with a letter)."""
MAX_TOOL_NAME_LABELS = 32
"""Undeclared tool names (name-shaped ones) that pass as ``gen_ai.tool.name``, per
process; declare the rest with ``--event-names``."""
MAX_EXTRA_LABELS = 16
"""Values outside its enumeration a label lets pass (name-shaped ones), per process: a
wire's name for a dialect, a kind a later release adds."""
UNKNOWN_TOOL = "unknown"  # a tool call whose start named no tool
DROP_REASONS = ("export_failed", "queue_full", "shutdown")
BARGE_IN_OUTCOMES: tuple[str, ...] = get_args(BargeInRecord.model_fields["outcome"].annotation)
ANOMALY_KINDS = (*AnomalyKind, "dialect_mismatch")


class LabelValues:
    """The values one label may take: ``known`` ones as they are; up to ``extra`` others,
    first come, when name-shaped; everything else :data:`OTHER`. The values let in stay
    let in, so a series never changes its label."""

    __slots__ = ("admitted", "extra", "known")

    def __init__(self, known: Iterable[str], extra: int) -> None:
        self.known = frozenset(known)
        self.extra = extra
        self.admitted: set[str] = set()

    def __call__(self, value: str) -> str:
        if value in self.known or value in self.admitted:
            return value
        if len(self.admitted) < self.extra and name_shaped(value):
            self.admitted.add(value)
            return value
        return OTHER


class Instruments:
    """Every instrument voxproxy records, created on one meter. ``tool_names``: the
    declared vocabulary of tool names (``--event-names``), each its own
    ``gen_ai.tool.name`` value whatever its shape."""

    def __init__(self, meter: Meter, tool_names: Iterable[str] = ()) -> None:
        self.tool_label = LabelValues((*tool_names, UNKNOWN_TOOL), MAX_TOOL_NAME_LABELS)
        self.dialect_label = LabelValues((), MAX_EXTRA_LABELS)
        self.terminal_label = LabelValues(TERMINALS, MAX_EXTRA_LABELS)
        self.verdict_label = LabelValues((*VERDICTS, "none"), MAX_EXTRA_LABELS)
        self.kind_label = LabelValues(ANOMALY_KINDS, MAX_EXTRA_LABELS)
        self.outcome_label = LabelValues(BARGE_IN_OUTCOMES, MAX_EXTRA_LABELS)
        self.reason_label = LabelValues(DROP_REASONS, MAX_EXTRA_LABELS)

        def seconds(name: str, description: str, buckets: Iterable[float]) -> Histogram:
            return meter.create_histogram(
                name,
                unit="s",
                description=description,
                explicit_bucket_boundaries_advisory=list(buckets),
            )

        def counter(name: str, unit: str, description: str) -> Counter:
            return meter.create_counter(name, unit=unit, description=description)

        self.ttfs = seconds(
            A.METRIC_TTFS,
            "Time to first sound: caller speech end -> agent audio audible (talk-over turns "
            "are counted in voxproxy.turn.talk_over instead).",
            A.LATENCY_BUCKETS_S,
        )
        self.talk_over = counter(
            A.METRIC_TALK_OVER,
            "{turn}",
            "Turns the agent started before the caller stopped (negative time to first "
            "sound): not in the voxproxy.turn.ttfs histogram.",
        )
        self.stop_latency = seconds(
            A.METRIC_STOP_LATENCY,
            "Barge-in stop latency: caller talks over the agent -> agent audio ends.",
            A.LATENCY_BUCKETS_S,
        )
        self.tool_duration = seconds(
            A.METRIC_TOOL_DURATION,
            "Tool call duration: tool.started -> tool.finished (GenAI semantic conventions; "
            "the same as the execute_tool span's duration).",
            A.TOOL_BUCKETS_S,
        )
        self.call_duration = seconds(
            A.METRIC_CALL_DURATION,
            "Call duration: caller connected -> call ended.",
            A.CALL_BUCKETS_S,
        )
        self.calls = counter(
            A.METRIC_CALLS, "{call}", "Calls ended, by verdict and terminal state."
        )
        self.active = meter.create_up_down_counter(
            A.METRIC_ACTIVE_CALLS, unit="{call}", description="Calls in progress."
        )
        self.anomalies = counter(
            A.METRIC_ANOMALIES,
            "{message}",
            "Messages that could not be measured, and measurement errors, by kind.",
        )
        self.barge_ins = counter(A.METRIC_BARGE_INS, "{barge_in}", "Barge-ins, by outcome.")
        self.spans_dropped = counter(
            A.METRIC_SPANS_DROPPED,
            "{span}",
            "Spans that could not be exported (collector down, queue full, shutdown).",
        )
        self.logs_dropped = counter(
            A.METRIC_LOGS_DROPPED,
            "{log_record}",
            "Receipt log records that could not be exported (the receipt is written to the "
            "proxy's own sinks all the same).",
        )

    def call_opened(self) -> None:
        self.active.add(1)

    def call_closed(self) -> None:
        self.active.add(-1)

    def spans_lost(self, n: int, reason: str) -> None:
        self.spans_dropped.add(n, {A.LABEL_REASON: self.reason_label(reason)})

    def log_records_lost(self, n: int, reason: str) -> None:
        self.logs_dropped.add(n, {A.LABEL_REASON: self.reason_label(reason)})

    def record(self, r: Receipt) -> None:
        dialect_name = self.dialect_label(r.dialect)
        terminal = self.terminal_label(r.terminal)
        dialect: dict[str, AttributeValue] = {A.LABEL_DIALECT: dialect_name}
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
                self.barge_ins.add(1, {A.LABEL_OUTCOME: self.outcome_label(b.outcome)})
                if b.stop_latency_ms is not None and b.stop_latency_ms >= 0:
                    self.stop_latency.record(b.stop_latency_ms / MS_PER_S, dialect)
        for c in r.tools:
            if c.latency_ms is None or c.latency_ms < 0:
                continue  # unfinished or cancelled: no duration was measured
            tool = self.tool_label(c.tool or UNKNOWN_TOOL)
            attrs: dict[str, AttributeValue] = {A.GEN_AI_TOOL_NAME: tool}
            if c.status in TOOL_ERRORS:
                attrs[A.ERROR_TYPE] = c.status or "error"
            self.tool_duration.record(c.latency_ms / MS_PER_S, attrs)
        call: dict[str, AttributeValue] = {
            A.LABEL_DIALECT: dialect_name,
            A.LABEL_TERMINAL: terminal,
        }
        if r.terminal in FAILED_TERMINALS:
            call[A.ERROR_TYPE] = r.terminal
        self.call_duration.record(max(0.0, r.duration_ms) / MS_PER_S, call)
        verdict = self.verdict_label(r.verdict.verdict if r.verdict is not None else "none")
        self.calls.add(1, {A.LABEL_VERDICT: verdict, A.LABEL_TERMINAL: terminal})
        for kind, count in r.anomalies.items():
            self.anomalies.add(count, {A.LABEL_KIND: self.kind_label(kind)})
