"""voxproxy.core.dialects.base: a decoder's options, and the codec a decoder says a
direction's audio crosses the wire in (an optional method: None when it does not say)."""

from __future__ import annotations

from voxproxy.core.dialects.base import DialectOptions, codec_of
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Direction


class Says:
    def codec(self, direction: Direction) -> object:
        return "ulaw" if direction is CALLER_TO_AGENT else None


class Odd:
    codec = "pcm_s16le"  # an attribute, not a method

    def __init__(self) -> None:
        pass


class Wrong:
    def codec(self, direction: Direction) -> object:
        return 8000  # not a name


def test_a_decoder_that_names_its_codec_is_read_per_direction() -> None:
    assert codec_of(Says(), CALLER_TO_AGENT) == "ulaw"
    assert codec_of(Says(), AGENT_TO_CALLER) is None


def test_a_decoder_that_does_not_say_gives_none() -> None:
    assert codec_of(object(), CALLER_TO_AGENT) is None
    assert codec_of(Odd(), CALLER_TO_AGENT) is None
    assert codec_of(Wrong(), CALLER_TO_AGENT) is None


def test_the_secret_never_shows_in_the_options_repr() -> None:
    options = DialectOptions(secret=b"do-not-print")
    assert "do-not-print" not in repr(options)
    assert DialectOptions().sample_rate_hz == 16000 and DialectOptions().secret is None
