"""Privacy under load: no caller id, phone number or transcript word leaves the wire.

A load (the load generator's scripted callers against the mock agent, through one
proxy per dialect, with OTLP export on and logging at DEBUG) uses:

* Twilio: ``callSid``/``streamSid`` per call and ``customParameters`` carrying a
  phone number and a caller name;
* raw: the ``start`` message's ``call_id``;
* OpenAI Realtime and raw: transcripts (the agent reports what it heard).

What is searched, and for what:

* every receipt (the JSON-lines files, byte for byte, and the SQLite store file),
  every exported span (names, attributes, events, resource), every OTLP log record
  (the receipts sent to the collector) and every log line of the run: no call id,
  stream id, phone number, caller name or transcript word;
* the load generator's results files (``results.json``, ``summary.json``,
  ``report.html``): no call id, stream id, phone number or caller name. Transcript
  words may appear there: scoring what the agent heard is the user's own output.

Positive controls make sure each marker really was on the wire.

Tool names a caller chooses (OpenAI Realtime's ``session.update`` names the tools the
model calls) reach no receipt, span, OTLP log record or ``/metrics`` label verbatim:
only a declared name, or one with the shape of a name, is kept (the event API's rule).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.otlp_receiver import HttpReceiver
from support.privacy import HOSTILE_TOOL_NAMES as WIRE_TOOL_NAMES
from support.privacy import content_leaks
from support.waiting import wait_until
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from voxproxy.core.dialects import twilio as twilio_dialect
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.openai_realtime import OpenAIRealtimeAgentWire, OpenAIRealtimeCallerWire
from voxproxy.core.receipt import Receipt
from voxproxy.loadgen import wires as wires_module
from voxproxy.loadgen.runner import (
    LoadPlan,
    call_id,
    outcomes,
    receipts_by_call,
    write_results,
)
from voxproxy.loadgen.scenario import load_scenario
from voxproxy.loadgen.shard import play
from voxproxy.mockagent import MockAgent, MockAgentConfig
from voxproxy.proxy.websocket import Proxy, ProxyConfig
from voxproxy.receipts.policy import load_policy
from voxproxy.receipts.store import ReceiptStore
from voxproxy.receipts.verdict import judged
from voxproxy.receipts.writer import ReceiptWriter
from voxproxy.telemetry import TelemetryConfig, make_telemetry
from voxproxy.telemetry.otel import OtelTelemetry
from voxproxy.transports.websocket import RelayConfig

SECRET = b"privacy-secret"
PHONE = "+14155550123"
PHONE_DIGITS = "4155550123"
CALLER_NAME = "Zebulon Quixote"
WORDS = ["xylophone", "quagmire", "marzipan"]
CALLS_PER_DIALECT = 2

SCENARIO = """
name: one_question
steps:
  - say: caller_where_is_order
  - wait: agent_end
"""


class _WireWithCustomParameters(twilio_dialect.TwilioCallerWire):
    """The Twilio wire of the load generator, with customParameters as real calls carry."""

    def start(self, custom: dict[str, str] | None = None) -> str:
        return super().start({"From": PHONE, "callerName": CALLER_NAME, **(custom or {})})


def _heard(turn: int) -> str:
    return f"please send the {WORDS[0]} to {WORDS[1]} street with {WORDS[2]} turn {turn}"


def _otel_env(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    for name in ("OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "300")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")


def _spans_text(receiver: HttpReceiver) -> str:
    out = []
    for s in receiver.received.spans:
        out.append(
            json.dumps(
                {
                    "name": s.name,
                    "attributes": s.attributes,
                    "events": [(e.name, e.attributes) for e in s.events],
                    "resource": s.resource,
                    "scope": s.scope,
                },
                default=str,
            )
        )
    return "\n".join(out)


@pytest.mark.slow
async def test_no_caller_id_phone_number_or_transcript_leaves_the_wire(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(wires_module, "TwilioCallerWire", _WireWithCustomParameters)
    caplog.set_level(logging.DEBUG)
    logging.getLogger("websockets").setLevel(logging.WARNING)  # as `voxproxy proxy` sets it
    receiver = await HttpReceiver().start()
    _otel_env(monkeypatch, receiver.endpoint)
    telemetry = make_telemetry(TelemetryConfig(otlp=True))
    assert isinstance(telemetry, OtelTelemetry) and telemetry.tracing
    policy = load_policy(None)
    scenario_file = tmp_path / "one_question.yaml"
    scenario_file.write_text(SCENARIO)
    scenario = load_scenario(scenario_file)
    store = ReceiptStore(tmp_path / "receipts.db")
    runs: dict[str, Any] = {}
    agents: dict[str, MockAgent] = {}
    proxies: list[Proxy] = []
    writers: list[ReceiptWriter] = []
    ended: list[Receipt] = []  # every receipt, as its call ends
    try:
        for dialect in ("twilio", "raw", "openai-realtime"):
            agent = MockAgent(
                MockAgentConfig(
                    dialect=dialect,  # type: ignore[arg-type]
                    delay_ms=300.0,
                    responses=("agent_confirm",),
                    transcripts=dialect != "twilio",
                    transcript_text=_heard,
                )
            )
            await agent.start()
            agents[dialect] = agent
            writer = ReceiptWriter(tmp_path / f"receipts-{dialect}.jsonl", fsync=False)
            writers.append(writer)
            proxy = Proxy(
                ProxyConfig(RelayConfig(agent.url), dialect=dialect, secret=SECRET),
                sinks=[writer.write, store.write, ended.append],
                telemetry=telemetry,
                judge=lambda r: judged(r, policy),
            )
            port = await proxy.start("127.0.0.1", 0)
            proxies.append(proxy)
            plan = LoadPlan(
                target=f"ws://127.0.0.1:{port}/",
                dialect=dialect,
                scenarios=((scenario, scenario_file.parent),),
                calls=CALLS_PER_DIALECT,
                concurrency=CALLS_PER_DIALECT,
            )
            runs[dialect] = plan
        records = await asyncio.gather(*(play(plan) for plan in runs.values()))
        await wait_until(lambda: len(ended) == 3 * CALLS_PER_DIALECT, what="every receipt")
    finally:
        for proxy in proxies:
            await proxy.stop()
        for agent in agents.values():
            await agent.stop()
    for w in writers:
        w.close()
    store.close()
    await asyncio.to_thread(telemetry.flush)
    await receiver.wait_for(
        lambda r: (
            sum(1 for s in r.spans if s.name == "voxproxy.call") >= 6
            and sum(1 for x in r.logs if x.event_name == "voxproxy.call.receipt") >= 6
        )
    )
    await telemetry.aclose()
    await receiver.stop()

    ids: list[str] = []
    for dialect, plan in runs.items():
        receipts = receipts_by_call(tmp_path / f"receipts-{dialect}.jsonl", SECRET)
        calls = outcomes(plan, dict(zip(runs, records, strict=True))[dialect], receipts, SECRET)
        write_results(tmp_path / f"results-{dialect}", plan, calls)
        for i in range(plan.calls):
            cid = call_id(plan, i)
            ids += [cid, "MZ" + cid[2:]]
    # Positive controls: every marker was on the wire, and the proxy saw the ids.
    heard = [
        m
        for a in agents.values()
        for c in a.calls
        for _, m in c.caller_messages
        if isinstance(m, str)
    ]
    assert any(PHONE in m and CALLER_NAME in m for m in heard)
    assert sum(1 for cid in ids if any(cid in m for m in heard)) >= 2 * CALLS_PER_DIALECT
    said = [
        m
        for a in agents.values()
        for c in a.calls
        for _, m in c.sent_messages
        if isinstance(m, str)
    ]
    assert sum(1 for m in said if WORDS[0] in m) >= 2 * CALLS_PER_DIALECT  # raw and realtime
    receipt_files = sorted(tmp_path.glob("receipts-*.jsonl"))
    all_receipts = [json.loads(line) for f in receipt_files for line in f.read_text().splitlines()]
    assert len(all_receipts) == 3 * CALLS_PER_DIALECT
    assert sum(1 for r in all_receipts if r["call_id_source"] == "wire") >= 2 * CALLS_PER_DIALECT
    with sqlite3.connect(tmp_path / "receipts.db") as db:
        assert db.execute("select count(*) from receipts").fetchone()[0] == len(all_receipts)

    ids_and_numbers = [*ids, PHONE, PHONE_DIGITS, CALLER_NAME, "Zebulon"]
    everything = [*ids_and_numbers, *WORDS]

    def leaks(text: str, needles: list[str]) -> list[str]:
        low = text.lower()
        return [n for n in needles if n.lower() in low]

    for f in receipt_files:
        assert not leaks(f.read_text(), everything), f
    db_bytes = (tmp_path / "receipts.db").read_bytes().decode("latin-1")
    assert not leaks(db_bytes, everything)
    spans = _spans_text(receiver)
    assert spans.count('"name": "voxproxy.call"') >= 6
    assert not leaks(spans, everything)
    # The receipts sent as OTLP log records (body and attributes) are as clean.
    records = "\n".join(
        json.dumps([r.event_name, r.body, r.attributes, r.resource], default=str)
        for r in receiver.received.logs
    )
    assert records.count('"voxproxy.call.receipt"') >= 6
    assert not leaks(records, everything)
    logs = "\n".join(
        f"{r.name} {caplog.handler.format(r)}"
        for r in caplog.records
        if not r.name.startswith("voxproxy.mockagent")  # the stand-in agent, not under test
    )
    assert not leaks(logs, everything)
    for d in runs:
        for name in ("results.json", "summary.json", "report.html"):
            text = (tmp_path / f"results-{d}" / name).read_text()
            assert not leaks(text, ids_and_numbers), (d, name)


HOSTILE_TOOL_NAMES = (
    *WIRE_TOOL_NAMES,
    'x"} injected_total 1',
    "lookup_order",  # name-shaped, but a vocabulary is declared: hashed too
)
DECLARED_TOOL = "get_weather_v2"  # a digit: kept only because it is declared


def _hostile_in(text: str) -> list[str]:
    return [h for h in HOSTILE_TOOL_NAMES if h in text]


def _span_strings(receiver: HttpReceiver) -> list[str]:
    """Every span's name and every string of its attributes and events, as exported."""
    out: list[str] = []
    for s in receiver.received.spans:
        out.append(s.name)
        for attrs in [s.attributes, *(e.attributes for e in s.events)]:
            out += [str(v) for v in attrs.values()]
        out += [e.name for e in s.events]
    return out


async def test_caller_chosen_tool_names_reach_no_receipt_span_or_metric_label(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = (*HOSTILE_TOOL_NAMES, DECLARED_TOOL)
    vocabulary = frozenset({DECLARED_TOOL})
    receiver = await HttpReceiver().start()
    _otel_env(monkeypatch, receiver.endpoint)
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")  # /metrics is the one read here
    telemetry = make_telemetry(
        TelemetryConfig(otlp=True, metrics_listen=("127.0.0.1", 0), tool_names=vocabulary)
    )
    assert isinstance(telemetry, OtelTelemetry)
    await telemetry.start()
    server = OpenAIRealtimeAgentWire()
    client = OpenAIRealtimeCallerWire()

    async def agent(ws: ServerConnection) -> None:
        # The model calls every tool the caller's session.update declared.
        for i, name in enumerate(names):
            args = '{"card": "4111111111111111"}'
            call = server.function_call_arguments_done("r1", f"i{i}", f"call_{i}", name, args)
            await ws.send(call)
        with contextlib.suppress(ConnectionClosed):
            async for _ in ws:
                pass

    ended: list[Receipt] = []
    writer = ReceiptWriter(tmp_path / "receipts.jsonl", fsync=False)
    async with serve(agent, "127.0.0.1", 0) as upstream:
        agent_port = upstream.sockets[0].getsockname()[1]
        proxy = Proxy(
            ProxyConfig(
                RelayConfig(f"ws://127.0.0.1:{agent_port}/"),
                dialect="openai-realtime",
                dialect_options=DialectOptions(names=vocabulary),
                secret=SECRET,
            ),
            sinks=[writer.write, ended.append],
            telemetry=telemetry,
        )
        port = await proxy.start("127.0.0.1", 0)
        try:
            async with connect(f"ws://127.0.0.1:{port}/") as ws:
                heard = [await ws.recv() for _ in names]
                for i in range(len(names)):
                    await ws.send(client.function_call_output(f"call_{i}", "done"))
            await wait_until(lambda: len(ended) == 1, what="the receipt")
        finally:
            await proxy.stop()
    writer.close()
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{telemetry.metrics_port}/metrics") as answer,
    ):
        metrics = await answer.text()
    await asyncio.to_thread(telemetry.flush)
    await receiver.wait_for(
        lambda r: (
            any(s.name == "voxproxy.call" for s in r.spans)
            and any(x.event_name == "voxproxy.call.receipt" for x in r.logs)
        )
    )
    await telemetry.aclose()
    await receiver.stop()

    # Positive controls: every name crossed the proxy, and every call was measured.
    assert all(name in json.loads(m)["name"] for m, name in zip(heard, names, strict=True))
    (receipt,) = ended
    assert len(receipt.tools) == len(names)
    assert all(c.latency_ms is not None and c.source == "wire" for c in receipt.tools)
    kept = [c.tool for c in receipt.tools]
    assert kept[-1] == DECLARED_TOOL
    assert all(t is not None and t.startswith("n_") for t in kept[:-1])
    assert len(set(kept)) == len(names)  # distinct names stay distinct
    # The receipt, as written and as sent over OTLP: no hostile name.
    line = (tmp_path / "receipts.jsonl").read_text()
    assert content_leaks(line, HOSTILE_TOOL_NAMES) == []
    bodies = [json.dumps(x.body, ensure_ascii=False) for x in receiver.received.logs]
    assert bodies and not any(_hostile_in(b) for b in bodies)
    # The spans: one execute_tool span per call, named by what the receipt kept.
    strings = _span_strings(receiver)
    assert sum(1 for s in strings if s.startswith("execute_tool ")) == len(names)
    assert f"execute_tool {DECLARED_TOOL}" in strings
    assert not [s for s in strings if _hostile_in(s)]
    # /metrics: the declared name as it is, every other under _OTHER.
    assert not _hostile_in(metrics)
    tools = {
        s.labels["gen_ai_tool_name"]: s.value
        for f in text_string_to_metric_families(metrics)
        for s in f.samples
        if s.name == "gen_ai_execute_tool_duration_seconds_count"
    }
    assert tools == {DECLARED_TOOL: 1.0, "_OTHER": float(len(HOSTILE_TOOL_NAMES))}


def test_the_structural_check_finds_leaks_and_ignores_chance_in_hashes() -> None:
    # The check the receipt tests rely on must be able to fail.
    clean = {
        "call": "c_4281abcdef012345",  # a hash that happens to hold "4281"
        "started_at": "2031-07-04T12:00:00.000Z",
        "events": [{"kind": "confirmation", "field": "order", "value_hash": "v_00428100aa"}],
        "verdict": {"reason": "passed 5 gate(s): reachability, turn_timing"},
    }
    assert content_leaks(clean, ["4281", "12 High Street"]) == []
    leaky = {**clean, "events": [{"kind": "confirmation", "field": "order", "value": "4281"}]}
    assert content_leaks(leaky, ["4281"]) == [
        ".events[0].value: holds a value of the caller's: '4281'"
    ]
    prose = {**clean, "note": "the caller lives at 12 High Street"}
    assert len(content_leaks(prose, ["High Street"])) == 2  # free text, and it holds the value
    assert content_leaks({**clean, "started_at": "yesterday"}) == [
        ".started_at: not an ISO-8601 time: 'yesterday'"
    ]
    token = {**clean, "events": [{"kind": "confirmation", "operation_id": "op-4281-x"}]}
    assert content_leaks(token, ["4281"]) == [".events[0].operation_id: contains '4281'"]
