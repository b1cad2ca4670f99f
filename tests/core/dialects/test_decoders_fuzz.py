"""Property-based: every dialect decoder, over random bytes and text and over JSON built
from the wires' own vocabulary with random values, never raises and returns events.
Bounded (``support.fuzzing.bounded``); ``VOXPROXY_FUZZ_SCALE=20`` searches deeper."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.fuzzing import DIALECTS, DIRECTIONS, EVENT_TYPES, MS, bounded

from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.events import Direction

_WIRE_WORDS = [
    "connected", "start", "media", "mark", "dtmf", "stop", "clear", "playAudio", "checkpoint",
    "clearAudio", "playedStream", "clearedAudio", "websocket:connected", "websocket:dtmf",
    "websocket:cleared", "input_audio_buffer.append", "response.output_audio.delta",
    "response.audio.delta", "conversation.item.truncate", "response.cancel", "session.update",
    "session.created", "response.created", "response.done", "conversation.item.create",
    "response.function_call_arguments.done", "input_audio_buffer.speech_stopped", "transcript",
]  # fmt: skip
_KEYS = [
    "event", "type", "action", "media", "start", "mark", "payload", "audio", "delta", "name",
    "sample_rate", "sampleRate", "mediaFormat", "media_format", "encoding", "session",
    "item_id", "response_id", "audio_end_ms", "call_id", "streamSid", "content-type", "track",
    "response", "item", "arguments", "transcript", "text",
]  # fmt: skip
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.sampled_from(_WIRE_WORDS)
    | st.sampled_from(["//8=", "AAAA", "audio/x-mulaw", "PCMU", "L16", "pcm16", "g711_ulaw"])
)
_JSONISH = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner),
    max_leaves=12,
)
_RANDOM_MESSAGE = st.one_of(
    st.binary(max_size=700),
    st.text(max_size=200),
    _JSONISH.map(json.dumps),
    st.dictionaries(st.sampled_from(_KEYS), _JSONISH, max_size=5).map(json.dumps),
)


@pytest.mark.parametrize("dialect", DIALECTS)
@bounded(60)
@given(messages=st.lists(st.tuples(DIRECTIONS, _RANDOM_MESSAGE), max_size=12))
def test_every_decoder_takes_random_input(
    dialect: str, messages: list[tuple[Direction, bytes | str]]
) -> None:
    dec = make_decoder(dialect, DialectOptions(secret=b"fuzz"))
    for i, (direction, message) in enumerate(messages):
        events = dec.decode(direction, message, i * 20 * MS)
        assert isinstance(events, list)
        assert all(isinstance(ev, EVENT_TYPES) for ev in events)
