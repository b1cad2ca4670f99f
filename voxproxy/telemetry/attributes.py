"""Names of span attributes, span events, spans and metrics, in one place.

OpenTelemetry semantic-convention names are reused where one exists (the GenAI
conventions are *Development* status; the names pinned here are those of
``gen-ai-voice-agents.md`` and ``gen-ai-agent-spans.md``). Everything voxproxy
measures that no convention covers lives under the ``voxproxy.`` namespace.

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
"""``completed``, ``interrupted`` (a barge-in cut the agent's answer) or ``session_closed``."""
ERROR_TYPE: Final = "error.type"

OP_EXECUTE_TOOL: Final = "execute_tool"
OP_INVOKE_AGENT: Final = "invoke_agent"

# -- span names ----------------------------------------------------------------------------

SPAN_CALL: Final = "call"
SPAN_TURN: Final = "turn"
SPAN_STAGE_PREFIX: Final = "stage "  # + the stage name, e.g. "stage response_created"
SPAN_TOOL_PREFIX: Final = "execute_tool "  # + the tool name (GenAI convention)

# -- span events ---------------------------------------------------------------------------

EVENT_UPSTREAM_CONNECTED: Final = "upstream_connected"
EVENT_BARGE_IN: Final = "barge_in"
EVENT_FLUSH: Final = "flush"
EVENT_ANOMALY: Final = "anomaly"
EVENT_TOOL_PREFIX: Final = "tool_event "  # + the event kind, e.g. "tool_event confirmation"

# -- call ----------------------------------------------------------------------------------

CALL_ID: Final = "voxproxy.call.id"
CALL_ID_SOURCE: Final = "voxproxy.call.id_source"
DIALECT: Final = "voxproxy.dialect"
TRANSPORT: Final = "voxproxy.transport"
TERMINAL: Final = "voxproxy.terminal"
DURATION_MS: Final = "voxproxy.duration_ms"
CLOSE_INITIATOR: Final = "voxproxy.close.initiator"
CLOSE_CALLER_CODE: Final = "voxproxy.close.caller_code"
CLOSE_AGENT_CODE: Final = "voxproxy.close.agent_code"
UPSTREAM_STATUS: Final = "voxproxy.upstream.status"
UPSTREAM_CONNECT_MS: Final = "voxproxy.upstream.connect_ms"
TURNS: Final = "voxproxy.turns"
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
EFFECTS_TOOL_CALLS: Final = "voxproxy.effects.tool_calls"
EFFECTS_UNFINISHED: Final = "voxproxy.effects.unfinished"
EFFECTS_STALE_WRITES: Final = "voxproxy.effects.stale_writes"
EFFECTS_UNSAFE_RETRIES: Final = "voxproxy.effects.unsafe_retries"
EFFECTS_CONFIRMATIONS_BEFORE_FINISH: Final = "voxproxy.effects.confirmations_before_finish"
EFFECTS_CONFIRMATION_MISMATCHES: Final = "voxproxy.effects.confirmation_mismatches"
EFFECTS_OUTCOME_VERIFIED: Final = "voxproxy.effects.outcome_verified"

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
METRIC_STOP_LATENCY: Final = "voxproxy.barge_in.stop_latency"
METRIC_TOOL_LATENCY: Final = "voxproxy.tool.latency"
METRIC_CALLS: Final = "voxproxy.calls"
METRIC_ACTIVE_CALLS: Final = "voxproxy.calls.active"
METRIC_ANOMALIES: Final = "voxproxy.anomalies"
METRIC_BARGE_INS: Final = "voxproxy.barge_ins"
METRIC_SPANS_DROPPED: Final = "voxproxy.telemetry.spans.dropped"

# Metric attribute keys (short: they become Prometheus labels).
LABEL_VERDICT: Final = "verdict"
LABEL_TERMINAL: Final = "terminal"
LABEL_KIND: Final = "kind"
LABEL_OUTCOME: Final = "outcome"
LABEL_DIALECT: Final = "dialect"
LABEL_STATUS: Final = "status"
LABEL_REASON: Final = "reason"

LATENCY_BUCKETS_MS: Final = (
    0.0,
    50.0,
    100.0,
    150.0,
    200.0,
    250.0,
    300.0,
    400.0,
    500.0,
    600.0,
    700.0,
    800.0,
    900.0,
    1000.0,
    1200.0,
    1500.0,
    2000.0,
    2500.0,
    3000.0,
    4000.0,
    5000.0,
)
"""Explicit histogram bucket boundaries for 0-5000 ms latencies (finer where verdict
thresholds sit: 300 ms barge-in stop, 1200 ms first response)."""
