"""Whether the caller's wire is the configured one: session/wire.py."""

from __future__ import annotations

import json

from voxproxy.core.session.wire import WireCheck

TWILIO_START = json.dumps({"event": "start", "start": {"streamSid": "MZ1", "callSid": "CA1"}})
TWILIO_MEDIA = json.dumps({"event": "media", "streamSid": "MZ1", "media": {"payload": "AAAA"}})
UNTELLING = json.dumps({"event": "media", "media": {"payload": "AAAA"}})  # no stream id key


def test_a_twilio_caller_on_a_raw_proxy_is_named() -> None:
    check = WireCheck()
    for payload in (TWILIO_START, TWILIO_MEDIA, TWILIO_MEDIA):
        check.note(payload, strict=True)
    assert check.looks_like("raw", caller_audio_ns=0) == "twilio"
    assert check.looks_like("twilio", caller_audio_ns=0) is None  # it is the configured one
    assert check.looks_like("raw", caller_audio_ns=1) is None  # audio was decoded after all


def test_too_few_messages_or_an_unchecked_dialect_name_nothing() -> None:
    check = WireCheck()
    check.note(TWILIO_START, strict=True)
    check.note(TWILIO_MEDIA, strict=True)
    check.note(UNTELLING, strict=True)
    assert check.looks_like("raw", caller_audio_ns=0) is None  # two look like it: not enough
    check.note(TWILIO_MEDIA, strict=True)
    assert check.looks_like("auto", caller_audio_ns=0) is None  # auto follows the wire
