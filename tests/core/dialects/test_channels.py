"""A WebRTC call's data channel messages (``voxproxy/core/dialects/channels.py``): which
channels are read as OpenAI Realtime events under each channel dialect, and the name the
session reports once one was."""

from __future__ import annotations

import json

import pytest

from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.channels import CHANNEL_DIALECTS, OAI_EVENTS, ChannelDecoder
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Flush, StageMark

T = 123_456_789
SPEECH_STARTED = json.dumps(
    {"type": "input_audio_buffer.speech_started", "audio_start_ms": 100, "item_id": "i"}
)
TRUNCATE = json.dumps(
    {"type": "conversation.item.truncate", "item_id": "i", "content_index": 0, "audio_end_ms": 500}
)


def _decoder(dialect: str) -> ChannelDecoder:
    return ChannelDecoder(dialect, DialectOptions(secret=b"s" * 32))


def test_auto_reads_only_the_oai_events_channel() -> None:
    d = _decoder("auto")
    d.label = "chat"
    assert d.decode(AGENT_TO_CALLER, SPEECH_STARTED, T) == []
    assert d.name == "webrtc"  # nothing read as Realtime yet
    d.label = OAI_EVENTS
    (stage,) = d.decode(AGENT_TO_CALLER, SPEECH_STARTED, T)
    assert isinstance(stage, StageMark) and stage.name == "server_speech_started"
    (flush,) = d.decode(CALLER_TO_AGENT, TRUNCATE, T)
    assert isinstance(flush, Flush) and flush.claimed_played_ms == 500.0 and flush.t_ns == T
    assert d.name == "openai-realtime"
    d.label = "chat"
    assert d.decode(CALLER_TO_AGENT, TRUNCATE, T) == []  # per message, by its channel


def test_openai_realtime_reads_every_channel() -> None:
    d = _decoder("openai-realtime")
    for label in ("", "chat", OAI_EVENTS):
        d.label = label
        (flush,) = d.decode(CALLER_TO_AGENT, TRUNCATE, T)
        assert isinstance(flush, Flush)


@pytest.mark.parametrize("label", ["", "chat", OAI_EVENTS])
def test_none_reads_no_channel(label: str) -> None:
    d = _decoder("none")
    d.label = label
    assert d.decode(CALLER_TO_AGENT, TRUNCATE, T) == [] and d.name == "webrtc"


def test_the_channel_dialects_are_the_three() -> None:
    assert CHANNEL_DIALECTS == ("auto", "openai-realtime", "none")
    for dialect in CHANNEL_DIALECTS:
        assert _decoder(dialect).name == "webrtc"
