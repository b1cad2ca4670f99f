"""voxproxy.proxy.livecalls: live calls found by the link id, by a wire id or by the
receipt's call id, with no wire id kept (only its keyed hash); and the Twilio ids a message
carries. The event API built on it: test_eventapi.py."""

from __future__ import annotations

import json

from voxproxy.core.ids import keyed_hash
from voxproxy.proxy.livecalls import CALL_PREFIX, LiveCalls, wire_ids

SECRET = b"livecalls-test"


class Call:
    """A live call as the registry holds it: any object."""


def test_the_twilio_ids_of_a_start_or_media_message() -> None:
    start = json.dumps({"event": "start", "start": {"streamSid": "MZ1", "callSid": "CA1"}})
    assert wire_ids(start) == ["MZ1", "CA1"]
    media = json.dumps({"event": "media", "streamSid": "MZ1", "start": {"streamSid": "MZ1"}})
    assert wire_ids(media) == ["MZ1"]  # each once
    for other in (b'{"streamSid": "MZ1"}', "{not json", "[1]", '{"streamSid": ""}', "{}"):
        assert wire_ids(other) == [], other
    deep = "[" * 5000 + "]" * 5000 + ' "Sid"'
    assert wire_ids(deep) == []  # too deep or not JSON: nothing, never a raise


def test_a_call_is_found_by_its_link_id_its_wire_ids_and_its_receipt_id() -> None:
    calls: LiveCalls[Call] = LiveCalls(SECRET)
    call = Call()
    calls.add_link(call, "link-1")
    receipt_id = keyed_hash(SECRET, "CA1", CALL_PREFIX)
    calls.add_wire(call, receipt_id, ["MZ1", "CA1"])
    assert len(calls) == 1
    for ident in ("link-1", "MZ1", "CA1", receipt_id, keyed_hash(SECRET, "link-1", CALL_PREFIX)):
        assert calls.find(ident) is call, ident
    assert calls.find("") is None and calls.find("MZ2") is None


def test_no_wire_id_is_kept_only_its_keyed_hash() -> None:
    calls: LiveCalls[Call] = LiveCalls(SECRET)
    calls.add_wire(Call(), None, ["CA-secret-call-sid"])
    held = repr(calls._by_key) + repr(calls._keys)
    assert "CA-secret-call-sid" not in held
    assert keyed_hash(SECRET, "CA-secret-call-sid", CALL_PREFIX) in held
    assert LiveCalls(b"other secret").find("CA-secret-call-sid") is None


def test_removing_a_call_forgets_every_key_but_never_another_calls() -> None:
    calls: LiveCalls[Call] = LiveCalls(SECRET)
    old, new = Call(), Call()
    calls.add_link(old, "same-link")
    calls.add_wire(old, None, ["MZ1"])
    calls.add_link(new, "same-link")  # the link id taken over by a newer call
    calls.remove(old)
    assert calls.find("same-link") is new  # the newer call's key stays
    assert calls.find("MZ1") is None
    assert len(calls) == 1
    calls.remove(new)
    assert len(calls) == 0 and calls.find("same-link") is None
    calls.remove(new)  # twice: nothing to do
