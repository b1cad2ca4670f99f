"""Spans over the real OTLP wire: a live call through the proxy becomes a trace.

An OTLP/HTTP receiver on loopback decodes ``ExportTraceServiceRequest`` and the
spans are checked against the call's receipt: names, parent/child links, wall
clock times (turn start = caller speech end, within a ms), attributes. A small
agent extracts ``traceparent`` from the proxy's handshake and puts its own span
under the call span; a dead collector costs dropped spans and nothing else.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from support.faultkit import proxy_before
from support.livecall import hello_then_barge_in, publishing_config
from support.otlp_receiver import GrpcReceiver, HttpReceiver, Received, SpanRecord
from support.ports import refusing_port
from support.receipt_samples import sample_receipt
from support.waiting import wait_until
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from voxproxy.clock import EpochAnchor
from voxproxy.core.receipt import Receipt
from voxproxy.core.timebase import NS_PER_MS
from voxproxy.loadgen.caller import CallerConfig, ScriptedCaller
from voxproxy.mockagent import MockAgent, MockAgentConfig
from voxproxy.proxy.eventapi import EventApi
from voxproxy.proxy.lifecycle import CALL_ID_HEADER
from voxproxy.proxy.websocket import Proxy, ProxyConfig
from voxproxy.receipts.policy import load_policy
from voxproxy.receipts.verdict import judged
from voxproxy.telemetry import (
    CallTimes,
    TelemetryConfig,
    make_telemetry,
)
from voxproxy.telemetry import attributes as A
from voxproxy.telemetry.otel import OtelTelemetry
from voxproxy.transports.websocket import RelayConfig

TOKEN = "test-token-0123456789abcdef"
SERVER = 2  # SPAN_KIND_SERVER in the OTLP protobuf
CLIENT = 3  # SPAN_KIND_CLIENT
STATUS_ERROR = 2


def _otel_env(monkeypatch: pytest.MonkeyPatch, endpoint: str, protocol: str = "http/protobuf"):  # type: ignore[no-untyped-def]
    for name in ("OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "voxproxy-under-test")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "300")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=voice-team")


def _wall_ms(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000


# -- a live call, spans over OTLP/HTTP --------------------------------------------------------


@pytest.mark.slow
async def test_a_live_call_becomes_a_trace_over_otlp_http(monkeypatch: pytest.MonkeyPatch) -> None:
    receiver = await HttpReceiver().start()
    _otel_env(monkeypatch, receiver.endpoint)
    telemetry = make_telemetry(TelemetryConfig(otlp=True))
    assert isinstance(telemetry, OtelTelemetry) and telemetry.tracing
    receipts: list[Receipt] = []
    agent = MockAgent(
        MockAgentConfig(
            dialect="twilio",
            delay_ms=400.0,
            reaction_ms=150.0,
            barge_in="flush",
            responses=("agent_confirm", "agent_hours", "agent_confirm"),
            events_token=TOKEN,
            tool_latency_ms=2000.0,
        )
    )
    await agent.start()
    policy = load_policy(None)
    proxy = Proxy(
        # Every figure published (a busy machine's clock lag would withhold one): the
        # spans must carry the receipt's figures.
        publishing_config(agent.url, "twilio", b"traces"),
        sinks=[receipts.append],
        telemetry=telemetry,
        judge=lambda r: judged(r, policy),
    )
    api = EventApi(proxy.live, proxy.secret, TOKEN)
    # The agent posts to the port the event API really bound (no port guessed free).
    api_port = await api.start("127.0.0.1", 0)
    agent.config = dataclasses.replace(agent.config, post_events_url=f"http://127.0.0.1:{api_port}")
    port = await proxy.start("127.0.0.1", 0)
    call_sid = "CA" + "7" * 32
    try:
        record = await ScriptedCaller(
            CallerConfig(url=f"ws://127.0.0.1:{port}/", dialect="twilio", call_id=call_sid),
            hello_then_barge_in(),
        ).run()
        assert record.error is None, record.error
        await wait_until(lambda: bool(receipts), 10.0)
        await asyncio.to_thread(telemetry.flush)
        await receiver.wait_for(lambda r: any(s.name == A.SPAN_CALL for s in r.spans))
        await receiver.wait_for(lambda r: len(r.logs) >= 2)
    finally:
        await proxy.stop()
        await api.stop()
        await agent.stop()
        await telemetry.aclose()
        await receiver.stop()

    receipt = receipts[0]
    got = receiver.received
    assert telemetry.dropped_spans() == 0
    (call,) = got.named(A.SPAN_CALL)
    # The proxy started the trace (the caller sent no traceparent).
    assert call.parent_span_id == "" and call.kind == SERVER
    assert call.resource["service.name"] == "voxproxy-under-test"
    assert call.resource["deployment.environment"] == "test"
    assert got.headers["x-tenant"] == "voice-team"  # OTEL_EXPORTER_OTLP_HEADERS
    # voxproxy's keyed hash in its own attribute; the conversation id is the id the agent
    # received in X-Voxproxy-Call (a random per-call id, never the hash).
    assert call.attributes[A.CALL_ID] == receipt.call
    link_id = call.attributes[A.GEN_AI_CONVERSATION_ID]
    assert link_id == call.attributes[A.CALL_LINK_ID] != receipt.call
    assert re.fullmatch(r"[0-9a-f]{32}", link_id)
    # The agent's leg is a CLIENT span under the call, to the agent's host and port.
    (upstream,) = got.named(A.SPAN_UPSTREAM)
    assert upstream.kind == CLIENT and upstream.parent_span_id == call.span_id
    assert upstream.trace_id == call.trace_id and upstream.end_ns == call.end_ns
    assert upstream.attributes["server.address"] == "127.0.0.1"
    assert upstream.attributes["server.port"] == int(agent.url.rsplit(":", 1)[1].strip("/"))
    assert upstream.attributes[A.UPSTREAM_STATUS] == 101
    assert call.attributes[A.CALL_ID_SOURCE] == "wire"
    assert call.attributes[A.TERMINAL] == receipt.terminal
    assert call.attributes[A.TURNS] == receipt.summary.turns
    # Wall clock: the call span starts at the receipt's started_at (ms precision) and
    # lasts exactly the receipt's duration.
    assert abs(call.start_ns / NS_PER_MS - _wall_ms(receipt.started_at)) < 1.0
    assert abs((call.end_ns - call.start_ns) / NS_PER_MS - receipt.duration_ms) < 0.1
    t0_ms = call.start_ns / NS_PER_MS

    turns = sorted(got.named(A.SPAN_TURN), key=lambda s: s.attributes[A.TURN_INDEX])
    assert len(turns) == len(receipt.turns) >= 3
    for span, rec in zip(turns, receipt.turns, strict=True):
        assert span.trace_id == call.trace_id and span.parent_span_id == call.span_id
        assert span.attributes[A.TURN_KIND] == rec.kind
        if rec.kind == "response":
            assert rec.ttfs_ms is not None and rec.caller_offset_ms is not None
            # Turn start = caller speech end on the wall clock, within a ms of the receipt.
            assert abs(span.start_ns / NS_PER_MS - (t0_ms + rec.caller_offset_ms)) < 1.0
            assert abs((span.end_ns - span.start_ns) / NS_PER_MS - rec.ttfs_ms) < 0.2
            assert span.attributes[A.TURN_TTFS_MS] == rec.ttfs_ms
    barged = [t for t in receipt.turns if t.barge_in is not None]
    assert len(barged) == 1 and barged[0].barge_in is not None
    b = barged[0].barge_in
    assert b.outcome == "stopped" and b.evidence == "flush"
    span = turns[barged[0].index]
    assert span.attributes[A.BARGE_IN_OUTCOME] == "stopped"
    assert span.attributes[A.BARGE_IN_STOP_LATENCY_MS] == b.stop_latency_ms
    interrupted = [t for t in turns if t.attributes.get(A.TURN_END_REASON) == "interrupted"]
    assert [t.attributes[A.TURN_INDEX] for t in interrupted] == [barged[0].index - 1]
    events = {e.name: e for e in call.events}
    assert abs(events[A.EVENT_BARGE_IN].time_ns / NS_PER_MS - (t0_ms + b.onset_ms)) < 1.0
    assert receipt.upstream_connect_ms is not None
    (connected,) = upstream.events
    assert connected.name == A.EVENT_UPSTREAM_CONNECTED
    assert abs(connected.time_ns / NS_PER_MS - (t0_ms + receipt.upstream_connect_ms)) < 1.0
    flushes = [e for e in call.events if e.name == A.EVENT_FLUSH]
    assert len(flushes) == receipt.summary.flushes >= 1
    assert b.stop_ms is not None
    # The flush ended the answer: the stop is the last speech heard, at the flush or in
    # the pause just before it (a flush in a pause cut silence), never after it.
    assert any(-1.0 < e.time_ns / NS_PER_MS - (t0_ms + b.stop_ms) < 300.0 for e in flushes), (
        [e.time_ns / NS_PER_MS - t0_ms for e in flushes],
        b.stop_ms,
    )

    # The mock agent's simulated tools, posted on the event API, are tool spans under
    # the turn they started in.
    assert len(receipt.tools) >= 2
    tools = {
        s.attributes[A.GEN_AI_TOOL_CALL_ID]: s
        for s in got.spans
        if s.name.startswith("execute_tool")
    }
    assert set(tools) == {c.operation_id for c in receipt.tools}
    by_turn = {t.attributes[A.TURN_INDEX]: t for t in turns}
    first, second = receipt.tools[0], receipt.tools[1]
    for c in receipt.tools:
        s = tools[c.operation_id]
        assert s.name == "execute_tool lookup_order"
        assert s.attributes[A.GEN_AI_TOOL_NAME] == "lookup_order"
        assert s.attributes[A.GEN_AI_OPERATION_NAME] == "execute_tool"
        assert c.turn is not None and s.parent_span_id == by_turn[c.turn].span_id
        assert abs(s.start_ns / NS_PER_MS - (t0_ms + c.started_ms)) < 1.0
    assert first.status == "ok" and first.latency_ms is not None
    assert abs(first.latency_ms - 2000.0) < 150.0
    assert tools[first.operation_id].attributes[A.TOOL_LATENCY_MS] == first.latency_ms
    assert second.cancelled and not second.stale_write  # the barge-in cancelled it
    assert tools[second.operation_id].attributes[A.TOOL_CANCELLED] is True
    kinds = [e.name for e in call.events]
    assert "voxproxy.event confirmation" in kinds and "voxproxy.event outcome.verified" in kinds
    # Metrics went over OTLP too, durations in seconds under their convention names.
    assert {
        "voxproxy.turn.ttfs",
        "voxproxy.barge_in.stop_latency",
        "gen_ai.execute_tool.duration",
        "voxproxy.call.duration",
        "voxproxy.calls",
        "voxproxy.call.active",
    } <= got.metric_names
    assert got.metric_units["voxproxy.turn.ttfs"] == "s"
    assert got.metric_units["gen_ai.execute_tool.duration"] == "s"
    # And the receipt: one log record of it, one of its verdict, both in the call
    # span's context; the record's body is the receipt as the sinks got it.
    logs = [x for x in got.logs if x.trace_id == call.trace_id]
    by_event = {x.event_name: x for x in logs}
    assert sorted(by_event) == ["gen_ai.evaluation.result", "voxproxy.call.receipt"]
    assert len(logs) == len(got.logs) == 2
    record = by_event["voxproxy.call.receipt"]
    assert record.span_id == call.span_id
    assert record.body == receipt.model_dump(mode="json", by_alias=True)
    assert record.attributes[A.CALL_ID] == receipt.call
    assert record.attributes[A.GEN_AI_CONVERSATION_ID] == link_id
    assert record.resource["service.name"] == "voxproxy-under-test"
    verdict = by_event["gen_ai.evaluation.result"]
    assert receipt.verdict is not None and verdict.span_id == call.span_id
    assert verdict.attributes["gen_ai.evaluation.name"] == "voxproxy.verdict"
    assert verdict.attributes["gen_ai.evaluation.score.label"] == receipt.verdict.verdict
    assert verdict.attributes[A.CALL_ID] == receipt.call

    # No content anywhere: the wire's call and stream ids appear in no attribute.
    for s in got.spans:
        values = [*s.attributes.values(), *s.resource.values()]
        values += [v for e in s.events for v in e.attributes.values()]
        for value in values:
            assert call_sid not in str(value) and call_sid[2:] not in str(value)


# -- trace context into the agent --------------------------------------------------------


@asynccontextmanager
async def traced_agent(
    endpoint: str,
) -> AsyncIterator[tuple[int, list[dict[str, list[str]]], TracerProvider]]:
    """An agent that extracts the proxy's trace context and emits a span of its own."""
    provider = TracerProvider(resource=Resource.create({"service.name": "test-agent"}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint + "/v1/traces"))
    )
    tracer = provider.get_tracer("test-agent")
    propagator = TraceContextTextMapPropagator()
    seen: list[dict[str, list[str]]] = []

    async def handler(ws: ServerConnection) -> None:
        assert ws.request is not None
        headers = ws.request.headers
        seen.append({k.lower(): headers.get_all(k) for k in headers})
        carrier = {
            "traceparent": headers.get("traceparent", ""),
            "tracestate": headers.get("tracestate", ""),
        }
        ctx = propagator.extract(carrier)
        with tracer.start_as_current_span("agent.session", context=ctx, kind=trace.SpanKind.SERVER):
            with tracer.start_as_current_span("agent.reply"):
                with suppress(ConnectionClosed):
                    async for message in ws:
                        await ws.send(message)

    async with serve(handler, "127.0.0.1", 0, compression=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        try:
            yield port, seen, provider
        finally:
            await asyncio.to_thread(provider.shutdown)


async def _one_raw_call(port: int, headers: dict[str, str]) -> None:
    async with connect(
        f"ws://127.0.0.1:{port}/", additional_headers=headers, compression=None
    ) as ws:
        for _ in range(3):
            await ws.send(b"\x00\x00" * 320)
            await ws.recv()


async def test_the_agent_s_spans_land_under_the_call_span(monkeypatch: pytest.MonkeyPatch) -> None:
    receiver = await HttpReceiver().start()
    _otel_env(monkeypatch, receiver.endpoint)
    telemetry = make_telemetry(TelemetryConfig(otlp=True))
    receipts: list[Receipt] = []
    caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    caller_span = "00f067aa0ba902b7"
    try:
        async with traced_agent(receiver.endpoint) as (agent_port, seen, agent_provider):
            proxy = Proxy(
                ProxyConfig(
                    RelayConfig(f"ws://127.0.0.1:{agent_port}"), dialect="raw", secret=b"k"
                ),
                sinks=[receipts.append],
                telemetry=telemetry,
            )
            port = await proxy.start("127.0.0.1", 0)
            # 1: the caller sent a traceparent (and tracestate): the proxy continues it.
            await _one_raw_call(
                port,
                {
                    "traceparent": f"00-{caller_trace}-{caller_span}-01",
                    "tracestate": "vendor=caller",
                },
            )
            # 2: no trace context from the caller: the proxy starts the trace.
            await _one_raw_call(port, {})
            await wait_until(lambda: len(receipts) == 2, 10.0)
            await proxy.stop()
            await asyncio.to_thread(agent_provider.force_flush)
            await asyncio.to_thread(telemetry.flush)
            await receiver.wait_for(
                lambda r: len([s for s in r.spans if s.name in (A.SPAN_CALL, "agent.session")]) == 4
            )
    finally:
        await telemetry.aclose()
        await receiver.stop()

    got: Received = receiver.received
    calls = got.named(A.SPAN_CALL)
    upstreams = got.named(A.SPAN_UPSTREAM)
    sessions = got.named("agent.session")
    replies = got.named("agent.reply")
    assert len(calls) == len(upstreams) == len(sessions) == len(replies) == 2
    # The agent received exactly one traceparent per handshake (the proxy's, not the
    # caller's as well), its tracestate, and the call id header.
    for headers in seen:
        assert len(headers["traceparent"]) == 1
        assert headers[CALL_ID_HEADER.lower()]
    continued = next(c for c in calls if c.trace_id == caller_trace)
    assert continued.parent_span_id == caller_span
    started = next(c for c in calls if c.trace_id != caller_trace)
    assert started.parent_span_id == ""
    assert seen[0]["tracestate"] == ["vendor=caller"]
    # The context injected is the CLIENT span's (the agent's leg), a child of the call.
    client = next(u for u in upstreams if u.trace_id == caller_trace)
    assert client.kind == CLIENT and client.parent_span_id == continued.span_id
    assert seen[0]["traceparent"][0] == f"00-{caller_trace}-{client.span_id}-01"
    for call in (continued, started):
        upstream = next(u for u in upstreams if u.trace_id == call.trace_id)
        assert upstream.parent_span_id == call.span_id
        session = next(s for s in sessions if s.trace_id == call.trace_id)
        assert session.parent_span_id == upstream.span_id  # the agent's span nests under it
        # The conversation id is the X-Voxproxy-Call id the agent received.
        assert any(
            call.attributes[A.GEN_AI_CONVERSATION_ID] == h[CALL_ID_HEADER.lower()][0] for h in seen
        )
        assert session.resource["service.name"] == "test-agent"
        reply = next(s for s in replies if s.trace_id == call.trace_id)
        assert reply.parent_span_id == session.span_id
        # The agent's session lies within the call on the wall clock.
        assert call.start_ns <= session.start_ns and session.end_ns <= call.end_ns + 50 * NS_PER_MS


# -- a collector that is down -----------------------------------------------------------------


async def test_a_dead_collector_costs_dropped_spans_not_calls(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with refusing_port() as port:  # nothing listens there, and nothing can start to
        await _dead_collector(monkeypatch, caplog, f"http://127.0.0.1:{port}")


async def _dead_collector(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, dead: str
) -> None:
    _otel_env(monkeypatch, dead)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    telemetry = make_telemetry(TelemetryConfig(otlp=True, shutdown_timeout_s=2.0))
    assert isinstance(telemetry, OtelTelemetry)

    async def echo(ws: ServerConnection) -> None:
        with suppress(ConnectionClosed):
            async for m in ws:
                await ws.send(m)

    caplog.set_level(logging.WARNING, logger="voxproxy.telemetry")
    async with proxy_before(echo, telemetry) as (port, receipts, _):
        for _ in range(3):
            t = time.monotonic()
            await _one_raw_call(port, {})
            assert time.monotonic() - t < 2.0  # forwarding never waits on export
        await wait_until(lambda: len(receipts) == 3, 10.0)
    assert [r.terminal for r in receipts] == ["caller_closed"] * 3
    t = time.monotonic()
    await telemetry.aclose()
    assert time.monotonic() - t < 5.0  # bounded by shutdown_timeout_s
    assert telemetry.processor is not None
    written = telemetry.processor.submitted
    assert written >= 3
    assert telemetry.dropped_spans() == written
    # The receipts' log records could not leave either: counted, one per call.
    assert telemetry.log_exporter is not None
    assert telemetry.log_exporter.failed == 3 and telemetry.log_exporter.exported == 0
    assert "span(s) dropped" in caplog.text or "could not be exported" in caplog.text


# -- OTLP over gRPC ----------------------------------------------------------------------------


async def test_spans_go_over_otlp_grpc(monkeypatch: pytest.MonkeyPatch) -> None:
    receiver = GrpcReceiver().start()
    try:
        _otel_env(monkeypatch, receiver.endpoint, protocol="grpc")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
        monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
        telemetry = make_telemetry(TelemetryConfig(otlp=True))
        anchor = EpochAnchor.now()
        start = time.monotonic_ns()
        handle = telemetry.start_call(anchor, start, {})
        assert handle is not None and handle.headers[0][0] == "traceparent"
        receipt = sample_receipt()
        end = start + round(receipt.duration_ms * NS_PER_MS)
        telemetry.on_receipt(receipt, handle, CallTimes(anchor, start, end))
        await asyncio.to_thread(telemetry.flush)
        await telemetry.aclose()
        spans: list[SpanRecord] = receiver.received.spans
        names = sorted({s.name for s in spans})
        assert {"voxproxy.call", "voxproxy.turn", "execute_tool lookup_order"} <= set(names)
        (call,) = [s for s in spans if s.name == "voxproxy.call"]
        (upstream,) = [s for s in spans if s.name == "voxproxy.upstream"]
        assert call.start_ns == anchor.wall_ns_at(start)
        assert call.end_ns == anchor.wall_ns_at(end)
        assert handle.headers[0][1].startswith(f"00-{call.trace_id}-{upstream.span_id}-")
        # The receipt log records went over gRPC too.
        assert [x.event_name for x in receiver.received.logs] == [
            "voxproxy.call.receipt",
            "gen_ai.evaluation.result",
        ]
    finally:
        receiver.stop()


# -- configuration --------------------------------------------------------------------------


def test_unstable_gen_ai_names_follow_otel_semconv_stability_opt_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _otel_env(monkeypatch, "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "none")
    monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
    off = make_telemetry(TelemetryConfig(otlp=True))
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http, gen_ai_latest_experimental")
    on = make_telemetry(TelemetryConfig(otlp=True))
    forced = make_telemetry(TelemetryConfig(otlp=True, experimental_gen_ai=False))
    assert isinstance(off, OtelTelemetry) and isinstance(on, OtelTelemetry)
    assert isinstance(forced, OtelTelemetry)
    assert (off.experimental, on.experimental, forced.experimental) == (False, True, False)
    assert on.logger_provider is None  # OTEL_LOGS_EXPORTER=none: no receipt log records


def test_otel_traces_exporter_none_keeps_metrics_only(monkeypatch: pytest.MonkeyPatch) -> None:
    _otel_env(monkeypatch, "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    telemetry = make_telemetry(TelemetryConfig(otlp=True))
    assert isinstance(telemetry, OtelTelemetry)
    assert not telemetry.tracing
    assert telemetry.start_call(EpochAnchor.now(), 0, {}) is None
