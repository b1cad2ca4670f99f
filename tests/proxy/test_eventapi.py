"""The event API: auth, validation, call lookup, hashing, and a live call whose receipt
carries the posted events and the checks derived from them."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from support.livecall import hello_then_barge_in
from support.privacy import assert_content_free
from support.waiting import wait_until

from voxproxy.cli import build_parser
from voxproxy.commands.proxy import serve_config
from voxproxy.core.errors import ConfigError
from voxproxy.core.events import TOOL_EVENT_KINDS, ToolEvent
from voxproxy.core.ids import keyed_hash, name_digest, plain_name
from voxproxy.core.receipt import Receipt
from voxproxy.core.timebase import NS_PER_MS
from voxproxy.loadgen.caller import CallerConfig, ScriptedCaller
from voxproxy.mockagent import MockAgent, MockAgentConfig
from voxproxy.proxy.eventapi import (
    API_EVENT_TYPES,
    EventApi,
    operation_digest,
    value_digest,
)
from voxproxy.proxy.lifecycle import CALL_ID_HEADER
from voxproxy.proxy.livecalls import LiveCalls, wire_ids
from voxproxy.proxy.websocket import Proxy, ProxyConfig
from voxproxy.transports.websocket import RelayConfig

TOKEN = "s3cret-token-for-tests-0123"
SECRET = b"event-api-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Target:
    def __init__(self) -> None:
        self.events: list[ToolEvent] = []

    def on_event(self, ev: ToolEvent) -> None:
        self.events.append(ev)


@asynccontextmanager
async def api_with(
    calls: LiveCalls[Any], clock: Any = time.monotonic_ns
) -> AsyncIterator[tuple[str, aiohttp.ClientSession, EventApi]]:
    api = EventApi(calls, SECRET, TOKEN, clock=clock)
    port = await api.start("127.0.0.1", 0)
    async with aiohttp.ClientSession() as http:
        try:
            yield f"http://127.0.0.1:{port}", http, api
        finally:
            await api.stop()


async def post(
    http: aiohttp.ClientSession, url: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with http.post(url, data=data, headers=AUTH if headers is None else headers) as resp:
        return resp.status, await resp.json(content_type=None)


def test_the_api_knows_every_event_of_the_contract() -> None:
    tags = {m.model_fields["type"].annotation.__args__[0] for m in API_EVENT_TYPES}  # type: ignore[union-attr]
    assert tags == set(TOOL_EVENT_KINDS)


async def test_a_bearer_token_is_required() -> None:
    calls: LiveCalls[Target] = LiveCalls(SECRET)
    calls.add_link(Target(), "link-1")
    async with api_with(calls) as (base, http, api):
        url = f"{base}/v1/calls/link-1/events"
        body = {"type": "outcome.verified", "verified": True}
        for headers in (
            {},
            {"Authorization": "Bearer wrong-token-wrong-token"},
            {"Authorization": f"Basic {TOKEN}"},
            {"Authorization": TOKEN},
            {"Authorization": f"Bearer {TOKEN}x"},
        ):
            async with http.post(url, json=body, headers=headers) as resp:
                assert resp.status == 401, headers
                assert resp.headers["WWW-Authenticate"].startswith("Bearer")
                assert (await resp.json())["error"] == "unauthorized"
        status, answer = await post(http, url, body)
        assert (status, answer) == (202, {"accepted": 1})
        assert api.rejected == 5 and api.accepted == 1


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({"type": "tool.finished", "operation_id": "op", "status": "done"}, "status", "'ok'"),
        ({"type": "tool.started", "tool": "book"}, "operation_id", "Field required"),
        ({"type": "confirmation", "field": "slot"}, "(body)", "value_hash (or the raw value"),
        (
            {"type": "confirmation", "field": "slot", "value": "9", "value_hash": "h_1"},
            "(body)",
            "either value or value_hash",
        ),
        (
            {"type": "state.updated", "field": "slot", "version": -1, "value": 1},
            "version",
            "greater than or equal to 0",
        ),
        ({"type": "state.updated", "field": "slot", "version": "2", "value": 1}, "version", "int"),
        ({"type": "outcome.verified", "verified": "yes"}, "verified", "boolean"),
        ({"type": "outcome.verified", "verified": True, "transcript": "hi"}, "transcript", "Extra"),
        ({"type": "tool.started", "operation_id": "op", "tool": "a tool"}, "tool", "pattern"),
        ({"type": "party.started"}, "(body)", "does not match any of the expected tags"),
        ({"verified": True}, "(body)", "discriminator 'type'"),
        (
            [{"type": "tool.cancelled", "operation_id": "op"}, {"type": "tool.cancelled"}],
            "events[1].operation_id",
            "Field required",
        ),
    ],
)
async def test_a_bad_event_is_refused_with_the_field_and_the_reason(
    body: Any, field: str, reason: str
) -> None:
    target = Target()
    calls: LiveCalls[Target] = LiveCalls(SECRET)
    calls.add_link(target, "link-1")
    async with api_with(calls) as (base, http, _):
        status, answer = await post(http, f"{base}/v1/calls/link-1/events", body)
    assert status == 422, answer
    assert answer["error"] == "invalid event"
    problems = answer["problems"]
    assert any(p["field"] == field and reason in p["reason"] for p in problems), problems
    assert "hi" not in json.dumps(answer)  # the input is never echoed
    assert target.events == []  # nothing of a refused request is applied


async def test_bodies_that_are_not_events() -> None:
    calls: LiveCalls[Target] = LiveCalls(SECRET)
    calls.add_link(Target(), "link-1")
    async with api_with(calls) as (base, http, _):
        url = f"{base}/v1/calls/link-1/events"
        assert (await post(http, url, b"{not json"))[0] == 400
        assert (await post(http, url, b"[]"))[0] == 400
        assert (await post(http, url, b'"text"'))[0] == 400
        status, answer = await post(http, url, b"[" + b"1," * 200_000 + b"1]")
        assert status == 413, answer
        many = [{"type": "tool.cancelled", "operation_id": "op"}] * 300
        assert (await post(http, url, many))[0] == 413
        async with http.get(f"{base}/healthz") as resp:
            assert resp.status == 200


async def test_an_unknown_or_finished_call_is_404() -> None:
    target = Target()
    calls: LiveCalls[Target] = LiveCalls(SECRET)
    calls.add_link(target, "link-1")
    body = {"type": "outcome.verified", "verified": True}
    async with api_with(calls) as (base, http, _):
        assert (await post(http, f"{base}/v1/calls/link-2/events", body))[0] == 404
        assert (await post(http, f"{base}/v1/calls/link-1/events", body))[0] == 202
        calls.remove(target)
        status, answer = await post(http, f"{base}/v1/calls/link-1/events", body)
    assert status == 404 and answer["error"] == "unknown call"
    assert "link-1" not in json.dumps(answer)
    assert len(target.events) == 1


async def test_raw_values_are_hashed_on_arrival_and_events_stamped() -> None:
    target = Target()
    calls: LiveCalls[Target] = LiveCalls(SECRET)
    calls.add_link(target, "link-1")
    stamps = iter([111, 222])
    async with api_with(calls, clock=lambda: next(stamps)) as (base, http, _):
        url = f"{base}/v1/calls/link-1/events"
        body = [
            {
                "type": "tool.started",
                "operation_id": "op-1",
                "tool": "book_table",
                "attempt": 2,
                "state_version": 3,
                "args": {"party": 4, "name": "Ada Lovelace"},
                "idempotency_key": "order-555-1234",
            },
            {"type": "tool.finished", "operation_id": "op-1", "status": "ok", "result": [1, 2]},
            {"type": "state.updated", "field": "party", "version": 4, "value": 5},
            {"type": "backend.verified", "field": "party", "value_hash": "h_abc"},
            {"type": "confirmation", "field": "party", "value": 5},
        ]
        assert (await post(http, url, body))[0] == 202
        assert (await post(http, url, {"type": "tool.cancelled", "operation_id": "op-1"}))[0] == 202
    started, finished, state, backend, confirmation, cancelled = target.events
    assert [e.t_ns for e in target.events] == [111] * 5 + [222]
    assert all(e.source == "api" for e in target.events)
    assert started.args_hash == value_digest(SECRET, "args", {"name": "Ada Lovelace", "party": 4})
    assert started.idempotency_key == value_digest(SECRET, "idempotency", "order-555-1234")
    assert (started.tool, started.attempt, started.state_version) == ("book_table", 2, 3)
    assert finished.result_hash == value_digest(SECRET, "result", [1, 2])
    assert finished.status == "ok"
    assert state.value_hash == confirmation.value_hash == value_digest(SECRET, "value", 5)
    assert backend.value_hash == value_digest(SECRET, "posted-hash", "h_abc")  # not hash-like
    assert cancelled.kind == "tool.cancelled"
    text = repr(target.events)
    assert "Lovelace" not in text and "order-555-1234" not in text


def test_calls_are_found_by_link_wire_and_receipt_ids_never_stored_raw() -> None:
    calls: LiveCalls[Target] = LiveCalls(SECRET)
    a, b = Target(), Target()
    calls.add_link(a, "link-a")
    calls.add_link(b, "link-b")
    start = json.dumps(
        {
            "event": "start",
            "streamSid": "MZ123",
            "start": {"streamSid": "MZ123", "callSid": "CA456", "accountSid": "AC1"},
        }
    )
    assert wire_ids(start) == ["MZ123", "CA456"]
    assert wire_ids(b"binary") == [] and wire_ids("{not json") == []
    calls.add_wire(a, keyed_hash(SECRET, "CA456", "c_"), wire_ids(start))
    for ident in ("link-a", "MZ123", "CA456", keyed_hash(SECRET, "CA456", "c_")):
        assert calls.find(ident) is a, ident
    assert calls.find(keyed_hash(SECRET, "link-b", "c_")) is b
    assert calls.find("CA999") is None and calls.find("") is None
    assert "CA456" not in repr(vars(calls)) and "MZ123" not in repr(vars(calls))
    calls.remove(a)
    assert calls.find("MZ123") is None and calls.find("link-a") is None and len(calls) == 1


def test_the_event_api_never_runs_without_a_token() -> None:
    parser = build_parser()
    base = ["proxy", "--upstream", "ws://127.0.0.1:1"]
    assert serve_config(parser.parse_args(base)).events is None
    with pytest.raises(ConfigError, match="needs --events-token"):
        serve_config(parser.parse_args([*base, "--events-listen", "127.0.0.1:9"]))
    with pytest.raises(ConfigError, match="at least 16"):
        serve_config(parser.parse_args([*base, "--events-token", "short"]))
    args = parser.parse_args([*base, "--events-token", TOKEN])
    assert serve_config(args).events.listen == ("127.0.0.1", 8767)
    args = parser.parse_args([*base, "--events-token", TOKEN, "--events-listen", ":9100"])
    assert serve_config(args).events.listen == ("127.0.0.1", 9100)
    with pytest.raises(ValueError, match="at least 16"):
        EventApi(LiveCalls(SECRET), SECRET, "short")


# -- a live call -------------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_live_call_s_receipt_carries_the_posted_events_and_their_checks() -> None:
    agent = MockAgent(
        MockAgentConfig(
            dialect="twilio",
            delay_ms=400.0,
            barge_in="flush",
            responses=("agent_confirm", "agent_hours", "agent_confirm"),
        )
    )
    await agent.start()
    receipts: list[Receipt] = []
    proxy = Proxy(
        ProxyConfig(RelayConfig(agent.url), dialect="twilio", secret=SECRET),
        sinks=[receipts.append],
    )
    port = await proxy.start("127.0.0.1", 0)
    call_sid = "CA" + "5" * 32
    stream_sid = "MZ" + "5" * 32
    caller = ScriptedCaller(
        CallerConfig(url=f"ws://127.0.0.1:{port}/", dialect="twilio", call_id=call_sid),
        hello_then_barge_in(),
    )
    statuses: list[int] = []
    async with api_with(proxy.live) as (base, http, api):

        async def send(ident: str, body: Any) -> tuple[int, int]:
            """Post ``body``; the proxy stamped it between the two times returned."""
            before = time.monotonic_ns()
            status, answer = await post(http, f"{base}/v1/calls/{ident}/events", body)
            assert status == 202, answer
            statuses.append(status)
            return before, time.monotonic_ns()

        task = asyncio.create_task(caller.run())
        # The agent's first answer has started: turn 0 is under way.
        await wait_until(lambda: bool(agent.calls) and bool(agent.calls[0].responses), 15.0)
        link = agent.calls[0].headers[CALL_ID_HEADER.lower()]
        # A booking in flight across the coming barge-in (by the proxy's link id) ...
        await send(
            link,
            {
                "type": "tool.started",
                "operation_id": "book-1",
                "tool": "book",
                "state_version": 1,
                "args": {"slot": "9am"},
                "idempotency_key": "k-book-1",
            },
        )
        # ... confirmed to the caller before it finished (by Twilio's callSid) ...
        await send(call_sid, {"type": "confirmation", "field": "slot", "value": "9am"})
        # ... and a payment that times out, retried under a new id without a key (streamSid).
        pay1_started = await send(
            stream_sid, {"type": "tool.started", "operation_id": "pay-1", "tool": "pay"}
        )
        await asyncio.sleep(0.2)  # the payment runs 200 ms
        pay1_finished = await send(
            stream_sid, {"type": "tool.finished", "operation_id": "pay-1", "status": "timeout"}
        )
        await send(
            stream_sid,
            {"type": "tool.started", "operation_id": "pay-2", "tool": "pay", "attempt": 2},
        )
        await send(stream_sid, {"type": "tool.finished", "operation_id": "pay-2", "status": "ok"})
        # The caller barges in on the second answer; the booking then finishes "ok" with no
        # cancel (a stale write), and the backend holds another value than was confirmed.
        await wait_until(lambda: len(agent.calls[0].responses) >= 2, 15.0)
        await wait_until(lambda: agent.calls[0].responses[1].interrupted_ns is not None, 15.0)
        # The booking ends after the proxy's own barge-in onset too (its VAD may place the
        # onset later than the agent's): once the barge-in has ended at the agent, every
        # frame of it has passed the proxy.
        answered_ns = agent.calls[0].responses[1].caller_offset_ns  # the turn it answers
        assert answered_ns is not None
        await wait_until(
            lambda: any(s.onset_ns > answered_ns for s in agent.calls[0].caller_spurts),
            15.0,
            "the barge-in ended at the agent",
        )
        await send(link, {"type": "tool.finished", "operation_id": "book-1", "status": "ok"})
        await send(
            link,
            {
                "type": "backend.verified",
                "operation_id": "book-1",
                "field": "slot",
                "value": "10am",
            },
        )
        await send(link, [{"type": "outcome.verified", "verified": False}])
        record = await task
        assert record.error is None, record.error
        await wait_until(lambda: bool(receipts), 15.0)
        # The call is over: its ids are refused now.
        for ident in (link, call_sid, stream_sid):
            status, _ = await post(
                http,
                f"{base}/v1/calls/{ident}/events",
                {"type": "outcome.verified", "verified": True},
            )
            assert status == 404
        assert api.accepted == 9
    await proxy.stop()
    await agent.stop()

    r = receipts[0]
    assert r.call == keyed_hash(SECRET, call_sid, "c_")
    assert [e.kind for e in r.events] == [
        "tool.started",
        "confirmation",
        "tool.started",
        "tool.finished",
        "tool.started",
        "tool.finished",
        "tool.finished",
        "backend.verified",
        "outcome.verified",
    ]
    assert all(e.source == "api" for e in r.events)
    tools = {c.operation_id: c for c in r.tools}
    book, pay1, pay2 = (tools[operation_digest(SECRET, op)] for op in ("book-1", "pay-1", "pay-2"))
    barged = [t for t in r.turns if t.barge_in is not None]
    assert len(barged) == 1
    # Placed in the turn they fell in.
    assert book.turn == pay1.turn == 0
    # Tool latency, as the proxy's clock saw the events arrive: within what this test saw of
    # the two posts (each stamped between its send and its answer; 0.1 ms for rounding).
    low_ms = (pay1_finished[0] - pay1_started[1]) / NS_PER_MS - 0.1
    high_ms = (pay1_finished[1] - pay1_started[0]) / NS_PER_MS + 0.1
    assert pay1.latency_ms is not None and low_ms <= pay1.latency_ms <= high_ms
    assert pay1.status == "timeout"
    # A stale write across the barge-in, an unsafe retry.
    assert book.stale_write and book.stale_cause == "barge_in" and book.idempotent
    assert pay2.unsafe_retry and not pay1.unsafe_retry
    e = r.effects
    assert e is not None
    assert (e.tool_calls, e.unfinished, e.stale_writes, e.unsafe_retries) == (3, 0, 1, 1)
    assert e.confirmations == 1 and e.confirmations_before_finish == 1
    assert e.confirmation_mismatches == 1 and e.backend_verified == 1
    assert e.outcome_verified is False
    # Raw values never reach the receipt: only their keyed hashes.
    assert_content_free(r.to_json_line(), ["9am", "10am", "k-book-1", call_sid, stream_sid])
    confirm = next(ev for ev in r.events if ev.kind == "confirmation")
    assert confirm.value_hash == value_digest(SECRET, "value", "9am")


async def test_names_and_ids_from_outside_never_reach_a_receipt_verbatim() -> None:
    """An operation_id, a tool and a field that are really a phone number and an SSN:
    hashed. Name-shaped names stay; a declared vocabulary decides when there is one."""
    phone, ssn = "15558675309", "123-45-6789"
    target = Target()
    calls: LiveCalls[Target] = LiveCalls(SECRET)
    calls.add_link(target, "link-1")
    body = [
        {"type": "tool.started", "operation_id": f"+{phone}", "tool": f"call_{phone}"},
        {"type": "tool.finished", "operation_id": f"+{phone}", "status": "ok"},
        {"type": "confirmation", "field": f"ssn_{ssn}", "value_hash": f"+{phone}"},
        {"type": "state.updated", "field": "party_size", "version": 1, "value_hash": "ab" * 8},
        {"type": "tool.started", "operation_id": "op-2", "tool": "book_table"},
    ]
    async with api_with(calls) as (base, http, _):
        assert (await post(http, f"{base}/v1/calls/link-1/events", body))[0] == 202
    started, finished, confirmation, state, book = target.events
    assert started.operation_id == finished.operation_id == operation_digest(SECRET, f"+{phone}")
    assert started.tool == name_digest(SECRET, f"call_{phone}")
    assert confirmation.field == name_digest(SECRET, f"ssn_{ssn}")
    assert confirmation.value_hash is not None and phone not in confirmation.value_hash
    assert (state.field, state.value_hash) == ("party_size", "ab" * 8)  # kept as they are
    assert book.tool == "book_table" and book.operation_id == operation_digest(SECRET, "op-2")
    text = repr(target.events)
    assert phone not in text and ssn not in text
    # With a declared vocabulary, only its names are kept.
    assert plain_name("book_table", frozenset({"book_table"}))
    assert not plain_name("party_size", frozenset({"book_table"}))


async def test_events_per_call_are_bounded_and_the_excess_counted() -> None:
    from voxproxy.core.dialects import make_decoder
    from voxproxy.core.receipt import CloseInfo
    from voxproxy.core.session import MAX_TOOL_EVENTS, CallSession

    session = CallSession(make_decoder("twilio"), 0, secret=SECRET, link_id="link-1")
    calls: LiveCalls[CallSession] = LiveCalls(SECRET)
    calls.add_link(session, "link-1")
    sent = MAX_TOOL_EVENTS + 280
    async with api_with(calls) as (base, http, _):
        url = f"{base}/v1/calls/link-1/events"
        for i in range(0, sent, 256):
            batch = [
                {"type": "tool.cancelled", "operation_id": f"op-{j}"}
                for j in range(i, min(sent, i + 256))
            ]
            assert (await post(http, url, batch))[0] == 202
    r = session.close(1_000_000_000, "caller_closed", CloseInfo(initiator="caller"))
    assert len(r.events) == MAX_TOOL_EVENTS
    assert r.anomalies == {"events_over_limit": 280}
    assert len(r.to_json_line()) < 400_000  # (10,000 events made a 2.9 MB line)
