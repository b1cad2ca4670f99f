"""The session on OpenAI Realtime calls: truncates against the playout model, tool flags."""

from __future__ import annotations

import numpy as np
from support.privacy import assert_content_free

from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.openai_realtime import (
    PCM16,
    OpenAIRealtimeAgentWire,
    OpenAIRealtimeCallerWire,
)
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT
from voxproxy.core.receipt import CloseInfo, Receipt
from voxproxy.core.session import CallSession, SessionConfig

MS = 1_000_000
SECRET = b"s"
CLIENT = OpenAIRealtimeCallerWire()
SILENCE_100MS = PCM16.encode(np.zeros(2400, dtype=np.int16))


def session(downstream_offset_ms: float = 0.0) -> CallSession:
    decoder = make_decoder("openai-realtime", DialectOptions(secret=SECRET))
    return CallSession(
        decoder,
        0,
        secret=SECRET,
        link_id="rt",
        config=SessionConfig(downstream_offset_ms=downstream_offset_ms),
    )


def close(s: CallSession, end_ms: int = 10_000) -> Receipt:
    return s.close(end_ms * MS, "completed", CloseInfo(initiator="caller"))


def test_a_burst_truncated_mid_item() -> None:
    s = session()
    server = OpenAIRealtimeAgentWire()
    s.on_message(AGENT_TO_CALLER, server.response_created("r1"), 90 * MS)
    for k in range(10):  # 1 s of audio, all of it within 10 ms
        s.on_message(AGENT_TO_CALLER, server.audio_delta("r1", "i1", SILENCE_100MS), (100 + k) * MS)
    # 450 ms after playout began the client says it played 430 ms.
    s.on_message(CALLER_TO_AGENT, CLIENT.truncate("i1", 430), 550 * MS)
    s.on_message(CALLER_TO_AGENT, CLIENT.response_cancel(), 550 * MS + 1)
    # A delta already on its way is not played.
    s.on_message(AGENT_TO_CALLER, server.audio_delta("r1", "i1", SILENCE_100MS), 560 * MS)
    r = close(s)
    (t,) = r.truncations
    assert (t.t_ms, t.claimed_played_ms, t.modelled_played_ms, t.diff_ms) == (
        550.0,
        430.0,
        450.0,
        -20.0,
    )
    assert r.summary.flushes == 2
    assert r.traffic.agent_audio_ms == 1000.0  # the late delta never reached the model
    assert r.traffic.agent_audio_dropped_ms == 550.0


def test_an_item_that_came_slower_than_real_time() -> None:
    s = session(downstream_offset_ms=40.0)
    server = OpenAIRealtimeAgentWire()
    # 100 ms chunks every 150 ms: playout idles 50 ms between them.
    for k in range(4):
        s.on_message(AGENT_TO_CALLER, server.audio_delta("r1", "i1", SILENCE_100MS), k * 150 * MS)
    # Without the offset, 330 ms would have played by 480 ms (the fourth chunk from 450).
    s.on_message(CALLER_TO_AGENT, CLIENT.truncate("i1", 330), 480 * MS)
    (t,) = close(s).truncations
    # The 40 ms downstream offset puts the chunks at 40, 190, 340 and 490 ms on the
    # playout timeline; the client's truncate is its own act, at 480: 300 ms had played.
    assert t.modelled_played_ms == 300.0 and t.diff_ms == 30.0


def test_truncates_the_model_cannot_place() -> None:
    s = session()
    s.on_message(CALLER_TO_AGENT, CLIENT.truncate("never-seen", 100), 10 * MS)
    server = OpenAIRealtimeAgentWire()
    s.on_message(AGENT_TO_CALLER, server.audio_delta("r1", "i1", SILENCE_100MS), 20 * MS)
    s.on_message(CALLER_TO_AGENT, CLIENT.truncate("other", 50), 30 * MS)
    first, second = close(s).truncations
    assert first.modelled_played_ms is None and first.diff_ms is None
    assert second.modelled_played_ms is None and second.claimed_played_ms == 50.0


def test_a_response_cancelled_with_a_call_in_flight_is_flagged_on_the_call() -> None:
    s = session()
    server = OpenAIRealtimeAgentWire()
    s.on_message(AGENT_TO_CALLER, server.response_created("r1"), 10 * MS)
    s.on_message(
        AGENT_TO_CALLER,
        server.function_call_arguments_done("r1", "fc1", "call_1", "transfer_money", '{"eur":5}'),
        20 * MS,
    )
    s.on_message(CALLER_TO_AGENT, CLIENT.response_cancel(), 30 * MS)
    s.on_message(CALLER_TO_AGENT, CLIENT.function_call_output("call_1", "done"), 400 * MS)
    r = close(s)
    (tool,) = r.tools
    assert tool.source == "wire" and tool.tool == "transfer_money"
    assert tool.response_cancelled_in_flight and not tool.cancelled
    assert tool.latency_ms == 380.0 and tool.status == "ok"
    assert r.effects is not None and r.effects.responses_cancelled_with_tool_in_flight == 1
    kinds = [e.kind for e in r.events]
    assert kinds == ["tool.started", "tool.response_cancelled", "tool.finished"]
    assert_content_free(r.to_json_line(), ["eur", "done"])  # no content kept
