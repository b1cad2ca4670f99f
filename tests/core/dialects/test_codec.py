"""What each decoder says about the encoding its audio crossed the wire in
(``dialects.base.codec_of``): the session gives it to the speech detectors, and G.711
widens a quiet talker's edge ambiguity (``audio.g711.quantization_band_db``)."""

from __future__ import annotations

import pytest

from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions, codec_of
from voxproxy.core.dialects.telnyx import TelnyxCallerWire
from voxproxy.core.dialects.twilio import TwilioCallerWire
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT

OPTIONS = DialectOptions(secret=b"codec")  # what a shell hands a decoder that may hash


def test_twilio_is_mu_law_both_ways() -> None:
    decoder = make_decoder("twilio")
    assert codec_of(decoder, CALLER_TO_AGENT) == codec_of(decoder, AGENT_TO_CALLER) == "ulaw"


@pytest.mark.parametrize(("encoding", "codec"), [("PCMU", "ulaw"), ("PCMA", "alaw")])
def test_telnyx_says_what_its_start_declared(encoding: str, codec: str) -> None:
    decoder = make_decoder("telnyx")
    wire = TelnyxCallerWire("stream-1", "call-1", encoding=encoding)
    decoder.decode(CALLER_TO_AGENT, wire.start(), 0)
    assert codec_of(decoder, CALLER_TO_AGENT) == codec_of(decoder, AGENT_TO_CALLER) == codec


def test_a_codec_the_core_cannot_decode_is_none() -> None:
    decoder = make_decoder("telnyx")
    decoder.decode(CALLER_TO_AGENT, TelnyxCallerWire("s", "c", encoding="OPUS").start(), 0)
    assert codec_of(decoder, CALLER_TO_AGENT) is None


def test_the_auto_dialect_says_nothing_until_it_has_decided() -> None:
    decoder = make_decoder("auto", OPTIONS)
    assert codec_of(decoder, CALLER_TO_AGENT) is None
    decoder.decode(CALLER_TO_AGENT, TwilioCallerWire("MZ1", "CA1").start(), 0)
    assert codec_of(decoder, CALLER_TO_AGENT) == "ulaw"


def test_linear_wires_and_decoders_that_do_not_say() -> None:
    assert codec_of(make_decoder("openai-realtime", OPTIONS), AGENT_TO_CALLER) == "pcm_s16le"
    assert codec_of(make_decoder("raw"), CALLER_TO_AGENT) is None  # (linear PCM)
    assert codec_of(object(), CALLER_TO_AGENT) is None
