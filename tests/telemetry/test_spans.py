"""Spans written after the fact from a receipt: structure, times and attributes (in memory)."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from support.receipt_samples import sample_receipt

from voxproxy.core.timebase import NS_PER_MS, EpochAnchor
from voxproxy.telemetry import CallTimes, FlushTime
from voxproxy.telemetry import attributes as A
from voxproxy.telemetry.spans import write_call

ANCHOR = EpochAnchor(mono_ns=5_000_000_000, wall_ns=1_735_689_600_000_000_000)
START_NS = 7_000_000_000  # monotonic call start


LINK_ID = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"


def _write(receipt=None, flushes=(), upstream=False, **options):  # type: ignore[no-untyped-def]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    r = receipt or sample_receipt()
    call = tracer.start_span(
        A.SPAN_CALL, kind=SpanKind.SERVER, start_time=ANCHOR.wall_ns_at(START_NS)
    )
    client = None
    if upstream:
        client = tracer.start_span(
            A.SPAN_UPSTREAM,
            context=trace.set_span_in_context(call),
            kind=SpanKind.CLIENT,
            start_time=ANCHOR.wall_ns_at(START_NS + NS_PER_MS),
        )
    end = START_NS + round(r.duration_ms * NS_PER_MS)
    n = write_call(
        tracer, call, r, CallTimes(ANCHOR, START_NS, end, flushes), upstream_span=client, **options
    )
    spans = list(exporter.get_finished_spans())
    assert n == len(spans)
    return r, spans


def _wall(ms: float) -> int:
    return ANCHOR.wall_ns_at(START_NS) + round(ms * NS_PER_MS)


def _one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    (found,) = [s for s in spans if s.name == name]
    return found


def test_the_span_tree_follows_the_receipt() -> None:
    r, spans = _write(flushes=[FlushTime(1, START_NS + 5250 * NS_PER_MS, True)])
    call = _one(spans, "voxproxy.call")
    assert call.parent is None
    assert call.start_time == _wall(0) and call.end_time == _wall(r.duration_ms)
    assert call.attributes is not None
    # The keyed hash is voxproxy's own id; no id the agent knows was given: no
    # gen_ai.conversation.id at all.
    assert call.attributes[A.CALL_ID] == r.call
    assert A.GEN_AI_CONVERSATION_ID not in call.attributes
    assert call.status.status_code is StatusCode.UNSET
    assert call.attributes[A.VERDICT] == "tool_effect_failed"
    assert call.attributes[A.EFFECTS_UNSAFE_RETRIES] == 1
    assert call.attributes[A.ANOMALIES_TOTAL] == 3
    turns = sorted(
        (s for s in spans if s.name == "voxproxy.turn"), key=lambda s: s.attributes[A.TURN_INDEX]
    )  # type: ignore[index]
    assert len(turns) == 4
    for t in turns:
        assert t.parent is not None and t.parent.span_id == call.context.span_id
    # Response turns: caller speech end -> agent first sound.
    assert (turns[0].start_time, turns[0].end_time) == (_wall(2500), _wall(3000))
    assert (turns[1].start_time, turns[1].end_time) == (_wall(6500), _wall(7400))
    # No response: caller speech end -> the response timeout; a failed turn, recorded
    # the OTel way (error.type, and a status description that does not repeat it).
    assert (turns[2].start_time, turns[2].end_time) == (_wall(11000), _wall(19000))
    assert turns[2].status.status_code is StatusCode.ERROR
    assert turns[2].status.description is None
    assert turns[2].attributes[A.ERROR_TYPE] == "no_response"  # type: ignore[index]
    for t in (turns[0], turns[1], turns[3]):
        assert t.status.status_code is StatusCode.UNSET
        assert A.ERROR_TYPE not in t.attributes  # type: ignore[operator]
    # Agent-initiated: the silence before the reprompt.
    assert (turns[3].start_time, turns[3].end_time) == (_wall(18500), _wall(20000))
    # The answer the barge-in talked over was interrupted; the others completed.
    reasons = [t.attributes.get(A.TURN_END_REASON) for t in turns]  # type: ignore[union-attr]
    assert reasons == ["interrupted", "completed", None, "completed"]
    # The proposal's name (semantic-conventions-genai PR #390) only when opted in.
    assert all(A.GEN_AI_INVOCATION_END_REASON not in t.attributes for t in turns)  # type: ignore[operator]
    assert turns[1].attributes[A.BARGE_IN_STOP_LATENCY_MS] == 250.0  # type: ignore[index]


def test_stages_chain_from_the_turn_start_to_each_mark() -> None:
    _, spans = _write()
    turn0 = next(
        s
        for s in spans
        if s.name == "voxproxy.turn" and s.attributes[A.TURN_INDEX] == 0  # type: ignore[index]
    )
    stages = sorted(
        (s for s in spans if s.name.startswith("voxproxy.stage ")),
        key=lambda s: s.start_time or 0,
    )
    assert [s.name for s in stages] == [
        "voxproxy.stage server_speech_stopped",
        "voxproxy.stage response_created",
        "voxproxy.stage first_audio_delta",
    ]
    # The server's end of speech came 50 ms before the proxy's: the chain starts there.
    assert [(s.start_time, s.end_time) for s in stages] == [
        (_wall(2450), _wall(2450)),
        (_wall(2450), _wall(2600)),
        (_wall(2600), _wall(2900)),
    ]
    for s in stages:
        assert s.parent is not None and s.parent.span_id == turn0.context.span_id
    assert stages[0].attributes[A.STAGE_SINCE_CALLER_END_MS] == -50.0  # type: ignore[index]


def test_tools_are_spans_under_their_turn_with_the_derived_checks() -> None:
    _, spans = _write()
    turns = {s.attributes[A.TURN_INDEX]: s for s in spans if s.name == "voxproxy.turn"}  # type: ignore[index]
    tools = {
        s.attributes[A.GEN_AI_TOOL_CALL_ID]: s for s in spans if s.name.startswith("execute_tool")
    }  # type: ignore[index]
    assert set(tools) == {"op-1", "op-2", "op-3"}
    ok, timeout, retry = tools["op-1"], tools["op-2"], tools["op-3"]
    assert ok.name == "execute_tool lookup_order"
    assert ok.attributes[A.GEN_AI_TOOL_NAME] == "lookup_order"  # type: ignore[index]
    assert ok.parent is not None and ok.parent.span_id == turns[0].context.span_id
    assert retry.parent is not None and retry.parent.span_id == turns[1].context.span_id
    assert (ok.start_time, ok.end_time) == (_wall(3000), _wall(3400))
    assert ok.kind is SpanKind.INTERNAL
    assert ok.attributes[A.GEN_AI_OPERATION_NAME] == "execute_tool"  # type: ignore[index]
    assert ok.status.status_code is StatusCode.UNSET
    assert timeout.status.status_code is StatusCode.ERROR
    assert timeout.status.description is None  # not a copy of error.type
    assert timeout.attributes[A.ERROR_TYPE] == "timeout"  # type: ignore[index]
    # The cancelled retry ends at its cancel. An unsafe retry is a finding about the
    # agent, not a failed operation: an attribute and an evaluation event, no error.
    assert (retry.start_time, retry.end_time) == (_wall(8500), _wall(8800))
    assert retry.attributes[A.TOOL_UNSAFE_RETRY] is True  # type: ignore[index]
    assert retry.attributes[A.TOOL_CANCELLED] is True  # type: ignore[index]
    assert A.ERROR_TYPE not in retry.attributes  # type: ignore[operator]
    assert retry.status.status_code is StatusCode.UNSET
    (finding,) = retry.events
    assert finding.name == "gen_ai.evaluation.result" and finding.timestamp == _wall(8800)
    assert dict(finding.attributes or {}) == {
        "gen_ai.evaluation.name": "voxproxy.tool.unsafe_retry",
        "gen_ai.evaluation.score.label": "fail",
        "gen_ai.evaluation.score.value": 0.0,
    }
    assert not ok.events and not timeout.events


def test_a_stale_write_is_a_finding_not_an_error() -> None:
    r = sample_receipt()
    stale = r.tools[0].model_copy(update={"stale_write": True, "stale_cause": "barge_in"})
    _, spans = _write(r.model_copy(update={"tools": [stale]}))
    (tool,) = [s for s in spans if s.name.startswith("execute_tool ")]
    assert tool.status.status_code is StatusCode.UNSET
    assert tool.attributes[A.TOOL_STALE_WRITE] is True  # type: ignore[index]
    assert A.ERROR_TYPE not in tool.attributes  # type: ignore[operator]
    (finding,) = tool.events
    assert finding.attributes["gen_ai.evaluation.name"] == "voxproxy.tool.stale_write"  # type: ignore[index]
    assert finding.attributes["gen_ai.evaluation.explanation"] == "barge_in"  # type: ignore[index]


def test_the_upstream_leg_is_a_client_span_and_the_link_id_is_the_conversation() -> None:
    r, spans = _write(upstream=True, link_id=LINK_ID)
    call = _one(spans, "voxproxy.call")
    up = _one(spans, "voxproxy.upstream")
    assert up.kind is SpanKind.CLIENT
    assert up.parent is not None and up.parent.span_id == call.context.span_id
    assert up.end_time == call.end_time
    assert up.attributes[A.UPSTREAM_CONNECT_MS] == r.upstream_connect_ms == 12.5  # type: ignore[index]
    assert up.attributes[A.CLOSE_AGENT_CODE] == r.close.agent_code  # type: ignore[index]
    assert [(e.name, e.timestamp) for e in up.events] == [
        ("voxproxy.upstream.connected", _wall(12.5))
    ]
    assert "voxproxy.upstream.connected" not in [e.name for e in call.events]
    assert up.status.status_code is StatusCode.UNSET
    assert call.attributes[A.GEN_AI_CONVERSATION_ID] == LINK_ID  # type: ignore[index]
    assert call.attributes[A.CALL_LINK_ID] == LINK_ID  # type: ignore[index]
    assert call.attributes[A.CALL_ID] == r.call  # type: ignore[index]
    # An agent that refused the handshake: the failure is the upstream leg's too.
    refused = sample_receipt(
        terminal="upstream_refused", turns=[], tools=[], events=[], effects=None, anomalies={}
    )
    _, spans = _write(refused, upstream=True)
    up = _one(spans, "voxproxy.upstream")
    assert up.status.status_code is StatusCode.ERROR
    assert up.attributes[A.ERROR_TYPE] == "upstream_refused"  # type: ignore[index]


def test_unstable_gen_ai_names_only_when_opted_in() -> None:
    _, spans = _write(experimental=True)
    turns = sorted(
        (s for s in spans if s.name == "voxproxy.turn"),
        key=lambda s: s.attributes[A.TURN_INDEX],  # type: ignore[index]
    )
    stable = [t.attributes.get(A.TURN_END_REASON) for t in turns]  # type: ignore[union-attr]
    proposed = [t.attributes.get(A.GEN_AI_INVOCATION_END_REASON) for t in turns]  # type: ignore[union-attr]
    assert proposed == stable == ["interrupted", "completed", None, "completed"]


def test_a_talk_over_turn_is_flagged() -> None:
    r = sample_receipt()
    t0 = r.turns[0].model_copy(update={"ttfs_ms": -300.0, "agent_onset_ms": 2200.0})
    _, spans = _write(r.model_copy(update={"turns": [t0, *r.turns[1:]]}))
    turns = {s.attributes[A.TURN_INDEX]: s for s in spans if s.name == "voxproxy.turn"}  # type: ignore[index]
    assert turns[0].attributes[A.TURN_TALKED_OVER] is True  # type: ignore[index]
    assert (turns[0].start_time, turns[0].end_time) == (_wall(2200), _wall(2500))
    assert A.TURN_TALKED_OVER not in turns[1].attributes  # type: ignore[operator]


def test_events_on_the_call_span() -> None:
    _, spans = _write(flushes=[FlushTime(1, START_NS + 5250 * NS_PER_MS, True)])
    call = _one(spans, "voxproxy.call")
    events = [(e.name, e.timestamp, dict(e.attributes or {})) for e in call.events]
    names = [e[0] for e in events]
    assert names.count("voxproxy.barge_in") == 1 and names.count("voxproxy.flush") == 1
    barge = next(e for e in events if e[0] == "voxproxy.barge_in")
    assert barge[1] == _wall(5000) and barge[2][A.BARGE_IN_OUTCOME] == "stopped"
    assert A.GEN_AI_INVOCATION_END_REASON not in barge[2]  # an invoke_agent name, not an event's
    flush = next(e for e in events if e[0] == "voxproxy.flush")
    assert flush[1] == _wall(5250) and flush[2][A.FLUSH_CUT_AUDIBLE] is True
    # Without an upstream span (the call never reached the agent's handshake), the
    # connection is an event of the call span.
    assert ("voxproxy.upstream.connected", _wall(12.5), {}) in events
    tool_events = [e for e in events if e[0].startswith("voxproxy.event ")]
    assert [e[0] for e in tool_events] == [
        "voxproxy.event confirmation",
        "voxproxy.event backend.verified",
        "voxproxy.event outcome.verified",
    ]
    anomalies = {
        e[2][A.ANOMALY_KIND]: e[2][A.ANOMALY_COUNT] for e in events if e[0] == "voxproxy.anomaly"
    }
    assert anomalies == {"malformed": 2, "unknown_event": 1}
    # Content-free: no value hash is copied into the spans.
    for _, _, attrs in events:
        assert "h_1" not in attrs.values() and "h_2" not in attrs.values()


def test_a_failed_call_is_an_error_span_without_turns() -> None:
    r = sample_receipt(
        terminal="upstream_unreachable",
        turns=[],
        tools=[],
        events=[],
        effects=None,
        anomalies={},
        upstream_connect_ms=None,
    )
    _, spans = _write(r)
    assert [s.name for s in spans] == ["voxproxy.call"]
    assert spans[0].status.status_code is StatusCode.ERROR
    assert spans[0].status.description is None
    assert spans[0].attributes[A.ERROR_TYPE] == "upstream_unreachable"  # type: ignore[index]
