"""Every wire decoder takes any peer input without raising (bad input is an anomaly)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.realtimekit import T, decoder

from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.openai_realtime import CLIENT_EVENTS, SERVER_EVENTS
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Direction, Event

_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "payload",
                    "name",
                    "encoding",
                    "sample_rate",
                    "sampleRate",
                    "track",
                    "contentType",
                    "media_format",
                    "mediaFormat",
                    "call_sid",
                    "x",
                ]
            ),
            children,
            max_size=4,
        )
    ),
    max_leaves=10,
)
_EVENTS = st.sampled_from(
    [
        "connected",
        "start",
        "media",
        "mark",
        "dtmf",
        "stop",
        "clear",
        "error",
        "playAudio",
        "checkpoint",
        "clearAudio",
        "playedStream",
        "clearedAudio",
        "played",
        "sendDTMF",
        "websocket:connected",
        "websocket:dtmf",
        "websocket:notify",
        "websocket:cleared",
        "?",
    ]
)
_MESSAGES = st.one_of(
    st.binary(max_size=33),
    st.text(max_size=20),
    st.builds(
        lambda event, key, fields: json.dumps({key: event, **fields}),
        _EVENTS,
        st.sampled_from(["event", "action"]),
        st.dictionaries(
            st.sampled_from(
                [
                    "media",
                    "start",
                    "mark",
                    "payload",
                    "name",
                    "content-type",
                    "stream_id",
                    "streamId",
                    "stream_sid",
                    "streamSid",
                ]
            ),
            _VALUES,
            max_size=4,
        ),
    ),
)


@pytest.mark.parametrize("dialect", ["telnyx", "plivo", "vonage", "exotel", "auto"])
@settings(max_examples=120, deadline=None)
@given(
    messages=st.lists(
        st.tuples(st.sampled_from([CALLER_TO_AGENT, AGENT_TO_CALLER]), _MESSAGES), max_size=6
    )
)
def test_never_raises(dialect: str, messages: list[tuple[Direction, bytes | str]]) -> None:
    dec = make_decoder(dialect, DialectOptions(secret=b"fuzz"))
    for i, (direction, message) in enumerate(messages):
        events: list[Event] = dec.decode(direction, message, i)
        assert isinstance(events, list)


# Fields of Realtime events that the decoder reads.
_REALTIME_KEYS = [
    "audio",
    "delta",
    "item_id",
    "response_id",
    "audio_end_ms",
    "audio_start_ms",
    "response",
    "item",
    "session",
    "call_id",
    "name",
]


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=64),
        st.text(max_size=64),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
            lambda children: (
                st.lists(children, max_size=4)
                | st.dictionaries(
                    st.sampled_from(["type", *_REALTIME_KEYS]),
                    children,
                    max_size=5,
                )
            ),
            max_leaves=12,
        ).map(json.dumps),
    ),
    st.sampled_from([CALLER_TO_AGENT, AGENT_TO_CALLER]),
)
@pytest.mark.slow
def test_realtime_never_raises_on_peer_input(payload: bytes | str, direction: Direction) -> None:
    dec = decoder()
    for event in dec.decode(direction, payload, T):
        assert not isinstance(event, Exception)


_ANY = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(sorted(CLIENT_EVENTS | SERVER_EVENTS)),
    st.dictionaries(
        st.sampled_from([*_REALTIME_KEYS, "arguments", "transcript"]),
        _ANY,
        max_size=6,
    ),
    st.sampled_from([CALLER_TO_AGENT, AGENT_TO_CALLER]),
)
@pytest.mark.slow
def test_realtime_known_events_with_any_fields_never_raise(
    kind: str, fields: dict[str, object], direction: Direction
) -> None:
    dec = decoder()
    events = dec.decode(direction, json.dumps({"type": kind, **fields}), T)
    assert isinstance(events, list)
