"""The recipes of ``docs/telemetry.md``, run as the page prints them.

The Pipecat helper (``attach_voxproxy_context``) runs in an agent behind a live proxy:
a span the agent starts next (as Pipecat starts its ``conversation`` span, under the
current context) lands under voxproxy's ``voxproxy.upstream`` CLIENT span, and the
conversation id it returns is voxproxy's ``gen_ai.conversation.id``. The LiveKit
helper (``link_to_voxproxy``) links a span of the agent's own trace to that same
upstream span. Pipecat and LiveKit themselves are not installed: only the
OpenTelemetry part of each recipe is exercised.
"""

from __future__ import annotations

import asyncio
import re
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import context, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support.faultkit import proxy_before
from support.otlp_receiver import HttpReceiver
from support.waiting import wait_until
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from voxproxy.telemetry import TelemetryConfig, make_telemetry
from voxproxy.telemetry import attributes as A

DOC = Path(__file__).resolve().parents[1] / "docs" / "telemetry.md"


def _recipe(name: str) -> dict[str, Any]:
    """Run the page's python block that defines ``name``; return what it defined."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    (block,) = [b for b in blocks if f"def {name}(" in b]
    namespace: dict[str, Any] = {}
    exec(compile(block, f"{DOC}:{name}", "exec"), namespace)
    return namespace


async def test_the_pipecat_and_livekit_recipes_put_the_agent_under_or_next_to_voxproxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    attach = _recipe("attach_voxproxy_context")["attach_voxproxy_context"]
    link = _recipe("link_to_voxproxy")["link_to_voxproxy"]
    receiver = await HttpReceiver().start()
    for name in ("OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_LOGS_EXPORTER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    telemetry = make_telemetry(TelemetryConfig(otlp=True))
    agent_spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(agent_spans))
    tracer = provider.get_tracer("agent")
    seen: list[dict[str, str]] = []
    conversation_ids: list[str | None] = []

    async def bot(ws: ServerConnection) -> None:
        assert ws.request is not None
        headers = ws.request.headers
        seen.append({k.lower(): v for k, v in headers.raw_items()})
        token, conversation_id = attach(headers)
        conversation_ids.append(conversation_id)
        try:
            span = tracer.start_span("conversation")  # as Pipecat starts it
            with suppress(ConnectionClosed):
                async for message in ws:
                    await ws.send(message)
            span.end()
        finally:
            context.detach(token)

    try:
        async with proxy_before(bot, telemetry) as (listen, receipts, _):
            async with connect(f"ws://127.0.0.1:{listen}/", compression=None) as ws:
                for _ in range(3):
                    await ws.send(b"\x00\x00" * 320)
                    await ws.recv()
            await wait_until(lambda: bool(receipts), 10.0)
        await asyncio.to_thread(telemetry.flush)  # type: ignore[attr-defined]
        await receiver.wait_for(lambda r: bool(r.named(A.SPAN_CALL)))
    finally:
        await telemetry.aclose()
        await receiver.stop()

    (call,) = receiver.received.named(A.SPAN_CALL)
    (upstream,) = receiver.received.named(A.SPAN_UPSTREAM)
    # Pipecat: the bot's conversation span is a child of voxproxy's upstream span, and its
    # conversation id is voxproxy's.
    (conversation,) = agent_spans.get_finished_spans()
    assert conversation.parent is not None
    assert format(conversation.parent.span_id, "016x") == upstream.span_id
    assert format(conversation.context.trace_id, "032x") == call.trace_id
    assert conversation_ids == [call.attributes[A.GEN_AI_CONVERSATION_ID]]

    # LiveKit: a span of the agent's own trace (its job_entrypoint), linked to voxproxy's
    # upstream span through the participant attributes a bridge filled from the headers.
    attributes = {
        "voxproxy.traceparent": seen[0]["traceparent"],
        "voxproxy.call": seen[0]["x-voxproxy-call"],
    }
    with tracer.start_as_current_span("job_entrypoint") as root:
        link(attributes)
    assert root.parent is None  # not under voxproxy: linked to it
    (found,) = root.links
    assert format(found.context.span_id, "016x") == upstream.span_id
    assert format(found.context.trace_id, "032x") == upstream.trace_id
    assert root.attributes["gen_ai.conversation.id"] == call.attributes[A.GEN_AI_CONVERSATION_ID]  # type: ignore[index]
    # No voxproxy context in the attributes: no link, nothing raised.
    with tracer.start_as_current_span("job_entrypoint") as other:
        link({})
    assert not other.links
    assert trace.get_current_span() is trace.INVALID_SPAN
    provider.shutdown()
