"""Names of span attributes, span events, spans and metrics, in one place.

OpenTelemetry semantic-convention names are reused where one exists: ``error.type``
(``semantic-conventions/docs/general/recording-errors.md``), and the GenAI names of
open-telemetry/semantic-conventions-genai (``gen-ai-spans.md``, ``gen-ai-metrics.md``,
``gen-ai-events.md``: *Development* status). Attributes that exist only in open
proposals (the voice-agent PR #390, whose names still change between revisions) are
emitted only under ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` (the
opt-in those documents prescribe), next to a stable ``voxproxy.`` twin that is always
emitted. Everything voxproxy measures that no convention covers, span names included,
lives under the ``voxproxy.`` namespace.

No attribute carries content: ids are the receipt's keyed hashes, tool and
field names are names, and values appear only as counts, enumerations, times
and booleans.
"""

from __future__ import annotations

from typing import Final

# -- semantic conventions reused -----------------------------------------------------------

GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_INVOCATION_END_REASON: Final = "gen_ai.agent.invocation.end_reason"
"""Open proposal (semantic-conventions-genai PR #390): opt-in only, see
:data:`TURN_END_REASON` for the stable twin."""
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
ERROR_TYPE: Final = "error.type"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
URL_SCHEME: Final = "url.scheme"

EXPERIMENTAL_OPT_IN: Final = "gen_ai_latest_experimental"
"""The ``OTEL_SEMCONV_STABILITY_OPT_IN`` value that turns on the unstable GenAI names."""

OP_EXECUTE_TOOL: Final = "execute_tool"
OP_INVOKE_AGENT: Final = "invoke_agent"

# -- span names ----------------------------------------------------------------------------

SPAN_CALL: Final = "voxproxy.call"  # SERVER: the caller's leg, the whole call
SPAN_UPSTREAM: Final = "voxproxy.upstream"  # CLIENT: the agent's leg; its context goes upstream
SPAN_TURN: Final = "voxproxy.turn"  # caller speech end -> agent first sound (the gap)
SPAN_STAGE_PREFIX: Final = "voxproxy.stage "  # + the stage name ("voxproxy.stage response_created")
SPAN_TOOL_PREFIX: Final = "execute_tool "  # + the tool name (GenAI convention)

# -- span events and log records -----------------------------------------------------------

EVENT_UPSTREAM_CONNECTED: Final = "voxproxy.upstream.connected"
EVENT_BARGE_IN: Final = "voxproxy.barge_in"
EVENT_FLUSH: Final = "voxproxy.flush"
EVENT_ANOMALY: Final = "voxproxy.anomaly"
EVENT_TOOL_PREFIX: Final = "voxproxy.event "  # + the event kind ("voxproxy.event confirmation")
EVENT_EVALUATION: Final = "gen_ai.evaluation.result"
"""A finding about the agent (a stale write, an unsafe retry) on the tool span, and the
call's verdict as a log record (GenAI events: ``gen-ai-events.md``)."""
EVENT_RECEIPT: Final = "voxproxy.call.receipt"
"""The log record that carries a call's receipt (one per call)."""
EVALUATION_VERDICT: Final = "voxproxy.verdict"
EVALUATION_STALE_WRITE: Final = "voxproxy.tool.stale_write"
EVALUATION_UNSAFE_RETRY: Final = "voxproxy.tool.unsafe_retry"

# -- call ----------------------------------------------------------------------------------

CALL_ID: Final = "voxproxy.call.id"
CALL_ID_SOURCE: Final = "voxproxy.call.id_source"
CALL_LINK_ID: Final = "voxproxy.call.link_id"
"""The proxy-issued id the agent receives in ``X-Voxproxy-Call`` (random, per call)."""
DIALECT: Final = "voxproxy.dialect"
TRANSPORT: Final = "voxproxy.transport"
TERMINAL: Final = "voxproxy.terminal"
DURATION_MS: Final = "voxproxy.duration_ms"
CLOSE_INITIATOR: Final = "voxproxy.close.initiator"
CLOSE_CALLER_CODE: Final = "voxproxy.close.caller_code"
CLOSE_AGENT_CODE: Final = "voxproxy.close.agent_code"
UPSTREAM_STATUS: Final = "voxproxy.upstream.status"
UPSTREAM_CONNECT_MS: Final = "voxproxy.upstream.connect_ms"
TURNS: Final = "voxproxy.core.turns"
RESPONSES: Final = "voxproxy.responses"
NO_RESPONSES: Final = "voxproxy.no_responses"
TTFS_MS_MEDIAN: Final = "voxproxy.ttfs_ms.median"
TTFS_MS_MAX: Final = "voxproxy.ttfs_ms.max"
BARGE_INS: Final = "voxproxy.barge_ins"
BARGE_INS_STOPPED: Final = "voxproxy.barge_ins.stopped"
STOP_LATENCY_MS_MAX: Final = "voxproxy.barge_in.stop_latency_ms.max"
FLUSHES: Final = "voxproxy.flushes"
YIELDED: Final = "voxproxy.yielded_without_caller_speech"
ANOMALIES_TOTAL: Final = "voxproxy.anomalies"
MEASUREMENT_DISABLED: Final = "voxproxy.measurement_disabled"
VERDICT: Final = "voxproxy.verdict"
VERDICT_GATE: Final = "voxproxy.verdict.gate"
POLICY: Final = "voxproxy.policy"
MARKS_CHECKED: Final = "voxproxy.marks.checked"
MARKS_MEAN_ERROR_MS: Final = "voxproxy.marks.mean_error_ms"
CALLER_AUDIO_MS: Final = "voxproxy.traffic.caller_audio_ms"
AGENT_AUDIO_MS: Final = "voxproxy.traffic.agent_audio_ms"
AGENT_AUDIO_DROPPED_MS: Final = "voxproxy.traffic.agent_audio_dropped_ms"
EFFECTS_TOOL_CALLS: Final = "voxproxy.core.effects.tool_calls"
EFFECTS_UNFINISHED: Final = "voxproxy.core.effects.unfinished"
EFFECTS_STALE_WRITES: Final = "voxproxy.core.effects.stale_writes"
EFFECTS_UNSAFE_RETRIES: Final = "voxproxy.core.effects.unsafe_retries"
EFFECTS_CONFIRMATIONS_BEFORE_FINISH: Final = "voxproxy.core.effects.confirmations_before_finish"
EFFECTS_CONFIRMATION_MISMATCHES: Final = "voxproxy.core.effects.confirmation_mismatches"
EFFECTS_OUTCOME_VERIFIED: Final = "voxproxy.core.effects.outcome_verified"

# -- turn ----------------------------------------------------------------------------------

TURN_INDEX: Final = "voxproxy.turn.index"
TURN_KIND: Final = "voxproxy.turn.kind"
TURN_TTFS_MS: Final = "voxproxy.turn.ttfs_ms"
TURN_TTFS_UNCERTAINTY_MS: Final = "voxproxy.turn.ttfs_uncertainty_ms"
"""How far ``ttfs_ms`` may be off (detector and clock lag; the receipt's field)."""
TURN_REASON: Final = "voxproxy.turn.reason"
"""Why ``ttfs_ms`` is missing (the receipt's ``reason``)."""
TURN_CALLER_ONSET_MS: Final = "voxproxy.turn.caller_onset_ms"
TURN_CALLER_OFFSET_MS: Final = "voxproxy.turn.caller_offset_ms"
TURN_AGENT_ONSET_MS: Final = "voxproxy.turn.agent_onset_ms"
TURN_AGENT_OFFSET_MS: Final = "voxproxy.turn.agent_offset_ms"
TURN_TALK_OVER_MS: Final = "voxproxy.turn.talk_over_ms"
TURN_REPROMPT_MS: Final = "voxproxy.turn.reprompt_ms"
TURN_FLUSHES: Final = "voxproxy.turn.flushes"
TURN_TOOL_CALLS: Final = "voxproxy.turn.tool_calls"
TURN_YIELDED: Final = "voxproxy.turn.yielded_without_caller_speech"
TURN_SERVER_VAD_DIFF_MS: Final = "voxproxy.turn.server_vad_offset_diff_ms"
TURN_END_REASON: Final = "voxproxy.turn.end_reason"
"""``completed``, ``interrupted`` (a barge-in cut the agent's answer) or ``session_closed``."""
TURN_TALKED_OVER: Final = "voxproxy.turn.talked_over"
"""The agent started before the caller stopped (negative ``ttfs_ms``)."""
TURN_EVIDENCE: Final = "voxproxy.turn.evidence"
"""What the turn's start and end were measured from: ``vad`` (the proxy's own VAD on both
legs, agent audio on the playout timeline)."""

BARGE_IN_OUTCOME: Final = "voxproxy.barge_in.outcome"
BARGE_IN_EVIDENCE: Final = "voxproxy.barge_in.evidence"
BARGE_IN_STOP_LATENCY_MS: Final = "voxproxy.barge_in.stop_latency_ms"
BARGE_IN_STOP_UNCERTAINTY_MS: Final = "voxproxy.barge_in.stop_uncertainty_ms"
BARGE_IN_REASON: Final = "voxproxy.barge_in.reason"
BARGE_IN_AMBIGUOUS: Final = "voxproxy.barge_in.ambiguous"
BARGE_IN_IN_PAUSE: Final = "voxproxy.barge_in.in_pause"
BARGE_IN_ONSET_MS: Final = "voxproxy.barge_in.onset_ms"
BARGE_IN_STOP_MS: Final = "voxproxy.barge_in.stop_ms"

FLUSH_CUT_AUDIBLE: Final = "voxproxy.flush.cut_audible"

# -- stage ---------------------------------------------------------------------------------

STAGE_NAME: Final = "voxproxy.stage.name"
STAGE_AT_MS: Final = "voxproxy.stage.at_ms"
STAGE_SINCE_CALLER_END_MS: Final = "voxproxy.stage.since_caller_end_ms"

# -- tools and events ----------------------------------------------------------------------

TOOL_STATUS: Final = "voxproxy.tool.status"
TOOL_ATTEMPT: Final = "voxproxy.tool.attempt"
TOOL_LATENCY_MS: Final = "voxproxy.tool.latency_ms"
TOOL_CANCELLED: Final = "voxproxy.tool.cancelled"
TOOL_IDEMPOTENT: Final = "voxproxy.tool.idempotent"
TOOL_STALE_WRITE: Final = "voxproxy.tool.stale_write"
TOOL_STALE_CAUSE: Final = "voxproxy.tool.stale_cause"
TOOL_UNSAFE_RETRY: Final = "voxproxy.tool.unsafe_retry"
TOOL_UNFINISHED: Final = "voxproxy.tool.unfinished"
TOOL_SOURCE: Final = "voxproxy.tool.source"
EVENT_KIND: Final = "voxproxy.event.kind"
EVENT_FIELD: Final = "voxproxy.event.field"
EVENT_VERSION: Final = "voxproxy.event.version"
EVENT_VERIFIED: Final = "voxproxy.event.verified"
EVENT_SOURCE: Final = "voxproxy.event.source"

ANOMALY_KIND: Final = "voxproxy.anomaly.kind"
ANOMALY_COUNT: Final = "voxproxy.anomaly.count"

# -- metrics (instrument names; Prometheus adds unit suffixes and ``_total``) --------------

METRIC_TTFS: Final = "voxproxy.turn.ttfs"
METRIC_TALK_OVER: Final = "voxproxy.turn.talk_over"
METRIC_STOP_LATENCY: Final = "voxproxy.barge_in.stop_latency"
METRIC_TOOL_DURATION: Final = "gen_ai.execute_tool.duration"
METRIC_CALL_DURATION: Final = "voxproxy.call.duration"
METRIC_CALLS: Final = "voxproxy.calls"
METRIC_ACTIVE_CALLS: Final = "voxproxy.call.active"
METRIC_ANOMALIES: Final = "voxproxy.anomalies"
METRIC_BARGE_INS: Final = "voxproxy.barge_ins"
METRIC_SPANS_DROPPED: Final = "voxproxy.telemetry.spans.dropped"
METRIC_LOGS_DROPPED: Final = "voxproxy.telemetry.log_records.dropped"

# Metric attribute keys: namespaced (Prometheus turns the dots into underscores).
LABEL_VERDICT: Final = VERDICT
LABEL_TERMINAL: Final = TERMINAL
LABEL_KIND: Final = "voxproxy.anomaly.kind"
LABEL_OUTCOME: Final = "voxproxy.barge_in.outcome"
LABEL_DIALECT: Final = DIALECT
LABEL_REASON: Final = "voxproxy.telemetry.drop_reason"

LATENCY_BUCKETS_S: Final = (
    0.0,
    0.05,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.4,
    0.5,
    0.6,
    0.7,
    0.8,
    0.9,
    1.0,
    1.2,
    1.5,
    2.0,
    2.5,
    3.0,
    4.0,
    5.0,
    7.5,
    10.0,
)
"""Histogram bucket boundaries for voice latencies, in seconds: 50 ms steps where verdict
thresholds sit (0.3 s barge-in stop, 1.2 s first response), up to 10 s."""

TOOL_BUCKETS_S: Final = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
"""The boundaries ``gen-ai-metrics.md`` advises for ``gen_ai.execute_tool.duration``."""

CALL_BUCKETS_S: Final = (
    1.0,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1200.0,
    1800.0,
    3600.0,
    7200.0,
)
"""Call durations: a second to two hours."""
