"""A call's spans, written after the fact from what was measured.

When a call ends, its receipt (times in ms relative to call start) and the
session's absolute times (monotonic ns) are turned into spans with explicit
start and end times, converted to wall-clock time through the proxy's one
:class:`~voxproxy.core.timebase.EpochAnchor`:

* ``voxproxy.call`` (SERVER; opened at call start; ended here);
* ``voxproxy.upstream`` (CLIENT, under the call): the agent's leg, from the proxy's
  handshake to the call's end; its context is the ``traceparent`` the agent received,
  so the agent's own spans nest under it;
* ``voxproxy.turn`` per turn: caller speech end -> agent first sound, figures and
  evidence as attributes (namespaced: Pipecat's ``turn`` span covers a whole exchange);
* ``voxproxy.stage <name>`` per stage the wire showed in that turn (from the previous
  stage, or the turn's start, to the stage);
* ``execute_tool <tool>`` per tool call (start -> finish, cancel or call end), under
  the turn it started in (GenAI conventions: INTERNAL, ``gen_ai.operation.name``,
  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``);
* span events on the call span: barge-ins, flushes, tool / state / outcome events,
  anomalies (counted per kind at call end: the receipt does not time them); the
  upstream connection on the upstream span.

Errors follow OpenTelemetry's ``semantic-conventions/docs/general/recording-errors.md``:
a span whose operation failed (a call that ended on a failure, a tool call that erred
or timed out, a turn the agent never answered) has status ``ERROR`` and
``error.type``, and the status description does not repeat it. A stale write or an
unsafe retry is a finding about the agent, not a failed operation: flagged by
attributes and a ``gen_ai.evaluation.result`` event on the tool span, whose status
stays unset.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from voxproxy.telemetry import attributes as A

if TYPE_CHECKING:
    from voxproxy.core.receipt import Receipt, ToolCallRecord, TurnRecord
    from voxproxy.core.timebase import EpochAnchor
    from voxproxy.telemetry.base import CallTimes

from voxproxy.core.timebase import NS_PER_MS
from voxproxy.telemetry.metrics import FAILED_TERMINALS, TOOL_ERRORS

UPSTREAM_FAILURES = frozenset(
    {"upstream_refused", "upstream_unreachable", "upstream_timeout", "agent_vanished"}
)
"""Terminal states that are failures of the agent's leg (``error.type`` on its span)."""

__all__ = ["FAILED_TERMINALS", "TOOL_ERRORS", "UPSTREAM_FAILURES", "write_call"]


def _attrs(pairs: Mapping[str, AttributeValue | None]) -> dict[str, AttributeValue]:
    return {k: v for k, v in pairs.items() if v is not None}


def call_attributes(r: Receipt, link_id: str | None = None) -> dict[str, AttributeValue]:
    """The call span's attributes. ``gen_ai.conversation.id`` is set only to an id the
    agent also knows: the proxy-issued ``link_id`` it received in ``X-Voxproxy-Call``
    (never the keyed hash, which only voxproxy can compute: ``voxproxy.call.id``)."""
    s = r.summary
    e = r.effects
    pairs: dict[str, AttributeValue | None] = {
        A.GEN_AI_CONVERSATION_ID: link_id,
        A.CALL_LINK_ID: link_id,
        A.CALL_ID: r.call,
        A.CALL_ID_SOURCE: r.call_id_source,
        A.DIALECT: r.dialect,
        A.TRANSPORT: r.transport,
        A.TERMINAL: r.terminal,
        A.DURATION_MS: r.duration_ms,
        A.CLOSE_INITIATOR: r.close.initiator,
        A.CLOSE_CALLER_CODE: r.close.caller_code,
        A.CLOSE_AGENT_CODE: r.close.agent_code,
        A.UPSTREAM_STATUS: r.close.upstream_status,
        A.UPSTREAM_CONNECT_MS: r.upstream_connect_ms,
        A.TURNS: s.turns,
        A.RESPONSES: s.responses,
        A.NO_RESPONSES: s.no_responses,
        A.TTFS_MS_MEDIAN: s.ttfs_ms_median,
        A.TTFS_MS_MAX: s.ttfs_ms_max,
        A.BARGE_INS: s.barge_ins,
        A.BARGE_INS_STOPPED: s.barge_ins_stopped,
        A.STOP_LATENCY_MS_MAX: s.stop_latency_ms_max,
        A.FLUSHES: s.flushes,
        A.YIELDED: s.yielded_without_caller_speech,
        A.ANOMALIES_TOTAL: sum(r.anomalies.values()),
        A.MEASUREMENT_DISABLED: r.measurement_disabled,
        A.MARKS_CHECKED: r.marks.checked,
        A.MARKS_MEAN_ERROR_MS: r.marks.mean_error_ms,
        A.CALLER_AUDIO_MS: r.traffic.caller_audio_ms,
        A.AGENT_AUDIO_MS: r.traffic.agent_audio_ms,
        A.AGENT_AUDIO_DROPPED_MS: r.traffic.agent_audio_dropped_ms,
        A.VERDICT: r.verdict.verdict if r.verdict is not None else None,
        A.VERDICT_GATE: r.verdict.gate if r.verdict is not None else None,
        A.POLICY: r.policy,
    }
    if e is not None:
        pairs.update(
            {
                A.EFFECTS_TOOL_CALLS: e.tool_calls,
                A.EFFECTS_UNFINISHED: e.unfinished,
                A.EFFECTS_STALE_WRITES: e.stale_writes,
                A.EFFECTS_UNSAFE_RETRIES: e.unsafe_retries,
                A.EFFECTS_CONFIRMATIONS_BEFORE_FINISH: e.confirmations_before_finish,
                A.EFFECTS_CONFIRMATION_MISMATCHES: e.confirmation_mismatches,
                A.EFFECTS_OUTCOME_VERIFIED: e.outcome_verified,
            }
        )
    return _attrs(pairs)


def turn_interval(t: TurnRecord, r: Receipt) -> tuple[float, float]:
    """The turn span's extent in ms from call start.

    A response: caller speech end -> agent first sound (``ttfs_ms``; negative
    when the agent talked over the caller, then the span runs the other way
    round). No response: caller speech end -> the response timeout (or the
    call's end). Agent-initiated: the silence before it (``reprompt_ms``) ->
    agent onset, or an instant at the onset.
    """
    end_of_call = r.duration_ms
    if t.caller_offset_ms is not None and t.agent_onset_ms is not None:
        lo, hi = sorted((t.caller_offset_ms, t.agent_onset_ms))
        return lo, hi
    if t.caller_offset_ms is not None:
        limit = t.caller_offset_ms + r.settings.response_timeout_ms
        return t.caller_offset_ms, max(t.caller_offset_ms, min(limit, end_of_call))
    if t.agent_onset_ms is not None:
        start = t.agent_onset_ms - (t.reprompt_ms or 0.0)
        return max(0.0, start), t.agent_onset_ms
    start = t.caller_onset_ms or 0.0
    return start, start


def turn_attributes(t: TurnRecord) -> dict[str, AttributeValue]:
    talked_over = t.ttfs_ms is not None and t.ttfs_ms < 0
    pairs: dict[str, AttributeValue | None] = {
        A.TURN_INDEX: t.index,
        A.TURN_KIND: t.kind,
        A.TURN_TTFS_MS: t.ttfs_ms,
        A.TURN_TTFS_UNCERTAINTY_MS: t.ttfs_uncertainty_ms,
        A.TURN_REASON: t.reason,
        A.TURN_CALLER_ONSET_MS: t.caller_onset_ms,
        A.TURN_CALLER_OFFSET_MS: t.caller_offset_ms,
        A.TURN_AGENT_ONSET_MS: t.agent_onset_ms,
        A.TURN_AGENT_OFFSET_MS: t.agent_offset_ms,
        A.TURN_TALK_OVER_MS: t.talk_over_ms,
        A.TURN_REPROMPT_MS: t.reprompt_ms,
        A.TURN_FLUSHES: t.flushes,
        A.TURN_TOOL_CALLS: t.tool_calls,
        A.TURN_YIELDED: t.yielded_without_caller_speech,
        A.TURN_EVIDENCE: "vad",
        A.TURN_TALKED_OVER: True if talked_over else None,
    }
    if t.stages is not None:
        pairs[A.TURN_SERVER_VAD_DIFF_MS] = t.stages.server_vad_offset_diff_ms
    b = t.barge_in
    if b is not None:
        pairs.update(
            {
                A.BARGE_IN_OUTCOME: b.outcome,
                A.BARGE_IN_EVIDENCE: b.evidence,
                A.BARGE_IN_STOP_LATENCY_MS: b.stop_latency_ms,
                A.BARGE_IN_STOP_UNCERTAINTY_MS: b.stop_uncertainty_ms,
                A.BARGE_IN_REASON: b.reason,
                A.BARGE_IN_AMBIGUOUS: b.ambiguous,
                A.BARGE_IN_IN_PAUSE: b.in_pause,
                A.BARGE_IN_ONSET_MS: b.onset_ms,
                A.BARGE_IN_STOP_MS: b.stop_ms,
            }
        )
    return _attrs(pairs)


def end_reasons(r: Receipt) -> dict[int, str]:
    """``voxproxy.turn.end_reason`` per turn that had agent audio (or lacked it
    because the call ended): the answer a barge-in talked over was ``interrupted``."""
    out: dict[int, str] = {}
    answered = [t for t in r.turns if t.agent_onset_ms is not None]
    for t in answered:
        out[t.index] = "completed"
    for t in r.turns:
        if t.reason == "call_ended":
            out[t.index] = "session_closed"
        b = t.barge_in
        if b is None:
            continue
        talked_over = [
            a
            for a in answered
            if a.index != t.index
            and a.agent_onset_ms is not None
            and a.agent_onset_ms <= b.onset_ms
        ]
        if talked_over:
            out[talked_over[-1].index] = "interrupted"
    return out


def _stage_spans(
    tracer: Tracer,
    parent: Context,
    t: TurnRecord,
    start_ms: float,
    at: _Wall,
) -> int:
    if t.stages is None or not t.stages.marks:
        return 0
    marks = sorted(t.stages.marks.items(), key=lambda kv: kv[1])
    prev = min(start_ms, marks[0][1])
    n = 0
    for name, when in marks:
        attrs: dict[str, AttributeValue] = {A.STAGE_NAME: name, A.STAGE_AT_MS: when}
        if t.caller_offset_ms is not None:
            attrs[A.STAGE_SINCE_CALLER_END_MS] = round(when - t.caller_offset_ms, 1)
        span = tracer.start_span(
            A.SPAN_STAGE_PREFIX + name,
            context=parent,
            kind=SpanKind.INTERNAL,
            start_time=at(prev),
            attributes=attrs,
        )
        span.end(end_time=at(when))
        prev = when
        n += 1
    return n


def _tool_attributes(c: ToolCallRecord) -> dict[str, AttributeValue]:
    return _attrs(
        {
            A.GEN_AI_OPERATION_NAME: A.OP_EXECUTE_TOOL,
            A.GEN_AI_TOOL_NAME: c.tool,
            A.GEN_AI_TOOL_CALL_ID: c.operation_id,
            A.TOOL_STATUS: c.status,
            A.TOOL_ATTEMPT: c.attempt,
            A.TOOL_LATENCY_MS: c.latency_ms,
            A.TOOL_CANCELLED: c.cancelled,
            A.TOOL_IDEMPOTENT: c.idempotent,
            A.TOOL_STALE_WRITE: c.stale_write,
            A.TOOL_STALE_CAUSE: c.stale_cause,
            A.TOOL_UNSAFE_RETRY: c.unsafe_retry,
            A.TOOL_SOURCE: c.source,
            A.TURN_INDEX: c.turn,
        }
    )


class _Wall:
    """ms from call start -> wall-clock ns, through the proxy's epoch anchor."""

    __slots__ = ("t0_ns",)

    def __init__(self, anchor: EpochAnchor, start_ns: int) -> None:
        self.t0_ns = anchor.wall_ns_at(start_ns)

    def __call__(self, ms: float) -> int:
        return self.t0_ns + round(ms * NS_PER_MS)


def _cancel_times(r: Receipt) -> dict[str, float]:
    out: dict[str, float] = {}
    for ev in r.events:
        if ev.kind == "tool.cancelled" and ev.operation_id and ev.operation_id not in out:
            out[ev.operation_id] = ev.t_ms
    return out


def _events(r: Receipt) -> Iterator[tuple[str, float, dict[str, AttributeValue]]]:
    for b_turn in r.turns:
        b = b_turn.barge_in
        if b is not None:
            yield (
                A.EVENT_BARGE_IN,
                b.onset_ms,
                _attrs(
                    {
                        A.TURN_INDEX: b_turn.index,
                        A.BARGE_IN_OUTCOME: b.outcome,
                        A.BARGE_IN_EVIDENCE: b.evidence,
                        A.BARGE_IN_STOP_LATENCY_MS: b.stop_latency_ms,
                        A.BARGE_IN_AMBIGUOUS: b.ambiguous,
                    }
                ),
            )
    for ev in r.events:
        if ev.kind.startswith("tool."):
            continue  # tool calls are spans of their own
        yield (
            A.EVENT_TOOL_PREFIX + ev.kind,
            ev.t_ms,
            _attrs(
                {
                    A.EVENT_KIND: ev.kind,
                    A.EVENT_FIELD: ev.field,
                    A.EVENT_VERSION: ev.version,
                    A.EVENT_VERIFIED: ev.verified,
                    A.EVENT_SOURCE: ev.source,
                    A.GEN_AI_TOOL_CALL_ID: ev.operation_id,
                }
            ),
        )


def _finding(kind: str, cause: str | None) -> dict[str, AttributeValue]:
    return _attrs(
        {
            A.GEN_AI_EVALUATION_NAME: kind,
            A.GEN_AI_EVALUATION_SCORE_LABEL: "fail",
            A.GEN_AI_EVALUATION_SCORE_VALUE: 0.0,
            A.GEN_AI_EVALUATION_EXPLANATION: cause,
        }
    )


def _fail(span: Span, error_type: str) -> None:
    """A failed operation: ``error.type`` and status ERROR, no description repeating it."""
    span.set_attribute(A.ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR))


def upstream_attributes(r: Receipt) -> dict[str, AttributeValue]:
    return _attrs(
        {
            A.UPSTREAM_STATUS: r.close.upstream_status,
            A.UPSTREAM_CONNECT_MS: r.upstream_connect_ms,
            A.CLOSE_AGENT_CODE: r.close.agent_code,
        }
    )


def write_call(
    tracer: Tracer,
    call_span: Span,
    receipt: Receipt,
    times: CallTimes,
    *,
    upstream_span: Span | None = None,
    link_id: str | None = None,
    experimental: bool = False,
) -> int:
    """Write every child span and event of one call, then end ``upstream_span`` (the
    agent's leg, if the call reached it) and ``call_span``.

    ``experimental`` adds the GenAI names that exist only in open proposals
    (``gen_ai.agent.invocation.end_reason``). Returns the number of spans ended (the
    call span included).
    """
    r = receipt
    anchor = times.anchor
    at = _Wall(anchor, times.start_ns)
    call_ctx = trace.set_span_in_context(call_span)
    call_span.set_attributes(call_attributes(r, link_id))
    written = 0
    end_wall = anchor.wall_ns_at(times.end_ns)
    if upstream_span is not None:
        upstream_span.set_attributes(upstream_attributes(r))
        if r.upstream_connect_ms is not None:
            upstream_span.add_event(A.EVENT_UPSTREAM_CONNECTED, timestamp=at(r.upstream_connect_ms))
        if r.terminal in UPSTREAM_FAILURES:
            _fail(upstream_span, r.terminal)
        upstream_span.end(end_time=end_wall)
        written += 1
    elif r.upstream_connect_ms is not None:
        call_span.add_event(A.EVENT_UPSTREAM_CONNECTED, timestamp=at(r.upstream_connect_ms))
    reasons = end_reasons(r)
    turn_ctx: dict[int, Context] = {}
    for t in r.turns:
        lo, hi = turn_interval(t, r)
        attrs = turn_attributes(t)
        if t.index in reasons:
            attrs[A.TURN_END_REASON] = reasons[t.index]
            if experimental:
                attrs[A.GEN_AI_INVOCATION_END_REASON] = reasons[t.index]
        span = tracer.start_span(
            A.SPAN_TURN,
            context=call_ctx,
            kind=SpanKind.INTERNAL,
            start_time=at(lo),
            attributes=attrs,
        )
        ctx = trace.set_span_in_context(span)
        turn_ctx[t.index] = ctx
        written += _stage_spans(tracer, ctx, t, lo, at)
        if t.kind == "no_response":
            _fail(span, "no_response")
        span.end(end_time=at(hi))
        written += 1
    cancels = _cancel_times(r)
    for c in r.tools:
        parent = turn_ctx.get(c.turn, call_ctx) if c.turn is not None else call_ctx
        unfinished = c.finished_ms is None and not c.cancelled
        stop = c.finished_ms
        if stop is None:
            stop = cancels.get(c.operation_id, r.duration_ms)
        attrs = _tool_attributes(c)
        if unfinished:
            attrs[A.TOOL_UNFINISHED] = True
        span = tracer.start_span(
            A.SPAN_TOOL_PREFIX + (c.tool or "unknown"),
            context=parent,
            kind=SpanKind.INTERNAL,
            start_time=at(c.started_ms),
            attributes=attrs,
        )
        if c.status in TOOL_ERRORS:
            _fail(span, c.status or "error")
        end = at(max(stop, c.started_ms))
        if c.stale_write:
            span.add_event(
                A.EVENT_EVALUATION, _finding(A.EVALUATION_STALE_WRITE, c.stale_cause), end
            )
        if c.unsafe_retry:
            span.add_event(A.EVENT_EVALUATION, _finding(A.EVALUATION_UNSAFE_RETRY, None), end)
        span.end(end_time=end)
        written += 1
    for name, when, attrs in _events(r):
        call_span.add_event(name, attributes=attrs, timestamp=at(when))
    for flush in times.flushes:
        call_span.add_event(
            A.EVENT_FLUSH,
            attributes={A.TURN_INDEX: flush.turn, A.FLUSH_CUT_AUDIBLE: flush.cut_audible},
            timestamp=anchor.wall_ns_at(flush.t_ns),
        )
    for kind, count in r.anomalies.items():
        call_span.add_event(
            A.EVENT_ANOMALY,
            attributes={A.ANOMALY_KIND: kind, A.ANOMALY_COUNT: count},
            timestamp=end_wall,
        )
    if r.terminal in FAILED_TERMINALS:
        _fail(call_span, r.terminal)
    call_span.end(end_time=end_wall)
    return written + 1
