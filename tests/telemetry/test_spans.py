"""Spans written after the fact from a receipt: structure, times and attributes (in memory)."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from receipt_samples import sample_receipt

from voxproxy.clock import EpochAnchor
from voxproxy.telemetry import CallTimes, FlushTime
from voxproxy.telemetry import attributes as A
from voxproxy.telemetry.spans import write_call

NS_PER_MS = 1_000_000
ANCHOR = EpochAnchor(mono_ns=5_000_000_000, wall_ns=1_735_689_600_000_000_000)
START_NS = 7_000_000_000  # monotonic call start


def _write(receipt=None, flushes=()):  # type: ignore[no-untyped-def]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    r = receipt or sample_receipt()
    call = tracer.start_span(
        A.SPAN_CALL, kind=SpanKind.SERVER, start_time=ANCHOR.wall_ns_at(START_NS)
    )
    end = START_NS + round(r.duration_ms * NS_PER_MS)
    n = write_call(tracer, call, r, CallTimes(ANCHOR, START_NS, end, flushes))
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
    call = _one(spans, "call")
    assert call.parent is None
    assert call.start_time == _wall(0) and call.end_time == _wall(r.duration_ms)
    assert call.attributes is not None
    assert call.attributes[A.GEN_AI_CONVERSATION_ID] == r.call
    assert call.attributes[A.VERDICT] == "tool_effect_failed"
    assert call.attributes[A.EFFECTS_UNSAFE_RETRIES] == 1
    assert call.attributes[A.ANOMALIES_TOTAL] == 3
    turns = sorted((s for s in spans if s.name == "turn"), key=lambda s: s.attributes[A.TURN_INDEX])  # type: ignore[index]
    assert len(turns) == 4
    for t in turns:
        assert t.parent is not None and t.parent.span_id == call.context.span_id
    # Response turns: caller speech end -> agent first sound.
    assert (turns[0].start_time, turns[0].end_time) == (_wall(2500), _wall(3000))
    assert (turns[1].start_time, turns[1].end_time) == (_wall(6500), _wall(7400))
    # No response: caller speech end -> the response timeout; marked as an error.
    assert (turns[2].start_time, turns[2].end_time) == (_wall(11000), _wall(19000))
    assert turns[2].status.status_code is StatusCode.ERROR
    # Agent-initiated: the silence before the reprompt.
    assert (turns[3].start_time, turns[3].end_time) == (_wall(18500), _wall(20000))
    # The answer the barge-in talked over was interrupted; the others completed.
    reasons = [t.attributes.get(A.GEN_AI_INVOCATION_END_REASON) for t in turns]  # type: ignore[union-attr]
    assert reasons == ["interrupted", "completed", None, "completed"]
    assert turns[1].attributes[A.BARGE_IN_STOP_LATENCY_MS] == 250.0  # type: ignore[index]


def test_stages_chain_from_the_turn_start_to_each_mark() -> None:
    _, spans = _write()
    turn0 = next(s for s in spans if s.name == "turn" and s.attributes[A.TURN_INDEX] == 0)  # type: ignore[index]
    stages = sorted(
        (s for s in spans if s.name.startswith("stage ")), key=lambda s: s.start_time or 0
    )
    assert [s.name for s in stages] == [
        "stage server_speech_stopped",
        "stage response_created",
        "stage first_audio_delta",
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
    turns = {s.attributes[A.TURN_INDEX]: s for s in spans if s.name == "turn"}  # type: ignore[index]
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
    assert ok.status.status_code is StatusCode.UNSET
    assert timeout.status.status_code is StatusCode.ERROR
    assert timeout.attributes[A.ERROR_TYPE] == "timeout"  # type: ignore[index]
    # The cancelled retry ends at its cancel, and is flagged as an unsafe retry.
    assert (retry.start_time, retry.end_time) == (_wall(8500), _wall(8800))
    assert retry.attributes[A.TOOL_UNSAFE_RETRY] is True  # type: ignore[index]
    assert retry.attributes[A.TOOL_CANCELLED] is True  # type: ignore[index]
    assert retry.attributes[A.ERROR_TYPE] == "unsafe_retry"  # type: ignore[index]


def test_events_on_the_call_span() -> None:
    _, spans = _write(flushes=[FlushTime(1, START_NS + 5250 * NS_PER_MS, True)])
    call = _one(spans, "call")
    events = [(e.name, e.timestamp, dict(e.attributes or {})) for e in call.events]
    names = [e[0] for e in events]
    assert names.count("barge_in") == 1 and names.count("flush") == 1
    barge = next(e for e in events if e[0] == "barge_in")
    assert barge[1] == _wall(5000) and barge[2][A.BARGE_IN_OUTCOME] == "stopped"
    flush = next(e for e in events if e[0] == "flush")
    assert flush[1] == _wall(5250) and flush[2][A.FLUSH_CUT_AUDIBLE] is True
    assert ("upstream_connected", _wall(12.5), {}) in events
    tool_events = [e for e in events if e[0].startswith("tool_event ")]
    assert [e[0] for e in tool_events] == [
        "tool_event confirmation",
        "tool_event backend.verified",
        "tool_event outcome.verified",
    ]
    anomalies = {e[2][A.ANOMALY_KIND]: e[2][A.ANOMALY_COUNT] for e in events if e[0] == "anomaly"}
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
    assert [s.name for s in spans] == ["call"]
    assert spans[0].status.status_code is StatusCode.ERROR
    assert spans[0].attributes[A.ERROR_TYPE] == "upstream_unreachable"  # type: ignore[index]
