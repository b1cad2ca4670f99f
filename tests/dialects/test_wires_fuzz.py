"""Every new wire decoder takes any peer input without raising (bad input is an anomaly)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxproxy.dialects import make_decoder
from voxproxy.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Direction, Event

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
    dec = make_decoder(dialect)
    for i, (direction, message) in enumerate(messages):
        events: list[Event] = dec.decode(direction, message, i)
        assert isinstance(events, list)
