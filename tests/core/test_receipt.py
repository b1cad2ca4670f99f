"""The receipt is content-free by construction (MEASUREMENT.md section 6)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError
from support.privacy import assert_content_free
from support.scripted import CallPlan, TurnPlan, render

from voxproxy.clips import load_clips
from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.raw import RawWire
from voxproxy.core.dialects.twilio import TwilioCallerWire
from voxproxy.core.events import AGENT_TO_CALLER, Direction
from voxproxy.core.ids import keyed_hash
from voxproxy.core.receipt import SCHEMA, CloseInfo, Receipt
from voxproxy.core.session import CallSession

FORBIDDEN = ("text", "transcript", "audio_b64", "payload", "phone", "number", "args")
PHONE = "+14155550123"
SECRET = b"deployment-secret"


def property_names(schema: Any) -> Iterator[str]:
    """Every property name anywhere in a JSON Schema (nested objects and $defs included)."""
    if isinstance(schema, dict):
        props = schema.get("properties")
        if isinstance(props, dict):
            yield from props
        for value in schema.values():
            yield from property_names(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from property_names(item)


def test_no_field_name_suggests_content() -> None:
    schema = Receipt.model_json_schema(by_alias=True)
    names = list(property_names(schema))
    assert len(names) > 50  # the walk reaches the nested models
    assert {"call", "turns", "ttfs_ms", "stop_latency_ms", "anomalies"} <= set(names)
    # Keyed hashes of content are allowed (MEASUREMENT.md 5): "args_hash", "value_hash".
    bad = sorted(
        {n for n in names for word in FORBIDDEN if word in n.lower() and not n.endswith("_hash")}
    )
    assert bad == []
    assert all(n.endswith("_hash") for n in names if "args" in n or "value" in n)


def test_the_walk_would_catch_a_nested_content_field() -> None:
    sample = {"$defs": {"X": {"properties": {"caller_phone_number": {}}}}}
    assert list(property_names(sample)) == ["caller_phone_number"]


def test_unknown_fields_are_refused() -> None:
    session = CallSession(make_decoder("raw"), 0, secret=SECRET, link_id="x")
    data = json.loads(session.close(1, "completed", CloseInfo(initiator="caller")).to_json_line())
    data["transcript"] = "hello"
    with pytest.raises(ValidationError, match="transcript"):
        Receipt.model_validate(data)


def _twilio_call_with_custom_parameters() -> tuple[
    list[tuple[int, Direction, bytes | str]], int, str
]:
    clips = load_clips()
    plan = CallPlan(
        dialect="twilio",
        send_mode="burst",
        turns=(
            TurnPlan(clips["caller_order_number"], clips["agent_confirm"], 600.0),
            TurnPlan(clips["caller_yes"], clips["agent_hours"], 400.0),
        ),
        seed=11,
    )
    call = render(plan)
    assert call.wire_call_id is not None
    stream_sid = f"MZsim{plan.seed}"
    wire = TwilioCallerWire(stream_sid, call.wire_call_id)
    start = wire.start({"From": PHONE, "caller_number": PHONE, "name": "Jane Doe"})
    messages: list[tuple[int, Direction, bytes | str]] = []
    replaced = 0
    for t, d, p in call.messages:
        if isinstance(p, str) and json.loads(p).get("event") == "start":
            p = start
            replaced += 1
        messages.append((t, d, p))
    assert replaced == 1
    return messages, call.end_ns, call.wire_call_id


def test_a_receipt_carries_no_phone_number_and_no_call_sid() -> None:
    messages, end_ns, call_sid = _twilio_call_with_custom_parameters()
    session = CallSession(make_decoder("twilio"), 0, secret=SECRET, link_id="link-1")
    for t, d, p in messages:
        session.on_message(d, p, t)
    receipt = session.close(end_ns, "completed", CloseInfo(initiator="caller"))
    line = receipt.to_json_line()
    assert json.loads(line)["schema"] == SCHEMA
    assert receipt.summary.responses == 2  # the call was really measured
    assert_content_free(line, [PHONE, PHONE[1:], "Jane Doe", call_sid, "MZsim11"])
    assert receipt.call == keyed_hash(SECRET, call_sid, "c_")
    assert receipt.call != call_sid
    assert receipt.call_id_source == "wire"


def test_the_call_hash_depends_on_the_secret_not_the_link() -> None:
    messages, end_ns, call_sid = _twilio_call_with_custom_parameters()
    calls = []
    for secret, link in ((SECRET, "a"), (SECRET, "b"), (b"other", "a")):
        session = CallSession(make_decoder("twilio"), 0, secret=secret, link_id=link)
        for t, d, p in messages[:5]:  # the start is among the first messages
            session.on_message(d, p, t)
        calls.append(session.close(end_ns, "completed", CloseInfo(initiator="caller")).call)
    assert calls[0] == calls[1] != calls[2]
    assert calls[0] == keyed_hash(SECRET, call_sid, "c_")
    assert calls[2] == keyed_hash(b"other", call_sid, "c_")


def test_without_a_wire_id_the_call_is_a_hash_of_the_proxy_link() -> None:
    session = CallSession(make_decoder("raw"), 0, secret=SECRET, link_id="proxy-link-42")
    r = session.close(1000, "caller_closed", CloseInfo(initiator="caller"))
    assert r.call_id_source == "proxy"
    assert r.call == keyed_hash(SECRET, "proxy-link-42", "c_")
    assert "proxy-link-42" not in r.to_json_line()


def test_transcripts_never_reach_the_receipt() -> None:
    session = CallSession(make_decoder("raw"), 0, secret=SECRET, link_id="x")
    said = "my card number is 4111 1111 1111 1111"
    session.on_message(AGENT_TO_CALLER, RawWire.transcript(said), 1_000_000)
    session.on_message(
        AGENT_TO_CALLER, RawWire.transcript("sí, señor", role="assistant"), 2_000_000
    )
    line = session.close(3_000_000, "completed", CloseInfo(initiator="caller")).to_json_line()
    assert session.transcripts == 2
    assert_content_free(line, [said, "4111 1111", "card number", "señor", "se\\u00f1or"])


def test_the_tool_event_has_one_schema_in_the_core_the_receipt_and_the_flows() -> None:
    from dataclasses import fields

    from support.scripted.flows import FlowEvent

    from voxproxy.core.events import ToolEvent
    from voxproxy.core.receipt import EventRecord, ToolEventFields

    tool_fields = list(ToolEventFields.model_fields)
    assert [f.name for f in fields(ToolEvent)] == ["kind", "t_ns", "source", *tool_fields]
    # The receipt's JSON keeps its order: the head first.
    assert list(EventRecord.model_fields) == ["kind", "t_ms", "source", *tool_fields]
    assert list(FlowEvent.model_fields)[4:] == tool_fields


def test_receipts_from_before_the_source_field_still_read_as_the_proxys() -> None:
    """Fields added to the receipt carry defaults, so a receipt written before them still
    validates (the schema stays voxproxy.receipt/1): source, vantage and recording came
    with voxproxy analyze."""
    from support.receipt_samples import sample_receipt

    data = json.loads(sample_receipt().to_json_line())
    for added in ("source", "vantage", "recording"):
        data.pop(added)
    old = Receipt.model_validate(data)
    assert (old.source, old.vantage, old.recording) == ("proxy", "proxy", None)
    assert old.schema_ == SCHEMA == "voxproxy.receipt/1"
    with pytest.raises(ValidationError, match="source"):
        Receipt.model_validate({**data, "source": "hearsay"})
