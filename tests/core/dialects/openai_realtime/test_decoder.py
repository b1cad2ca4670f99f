"""Dialect ``openai-realtime``: the OpenAI Realtime API on a websocket (docs/protocols.md
section 5).

Its decoder's tables, the appended-audio timeline, responses, truncation, cancellation
and tool calls. Formats: test_formats.py; builders: test_wire.py;
any input: ../test_wires_fuzz.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import dialectkit as kit
from support.dialectkit import AGENT, CALLER, Kind, msg
from support.privacy import HOSTILE_TOOL_NAMES
from support.realtimekit import (
    B64_PCM16,
    PCM,
    SECRET,
    T,
    audio,
    beta_update,
    decoder,
    delta,
    ga_update,
)

from voxproxy.core.audio.pcm import pcm_to_bytes
from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.openai_realtime import OpenAIRealtimeAgentWire, OpenAIRealtimeCallerWire
from voxproxy.core.errors import UsageError
from voxproxy.core.events import (
    RESPONSE_CANCELLED_WITH_TOOL,
    Audio,
    Dtmf,
    Flush,
    StageMark,
    StreamStart,
    ToolEvent,
    Transcript,
)
from voxproxy.core.ids import keyed_hash, name_digest

anomaly = kit.anomaly_at(T)
unknown = kit.unknown_at(T)


def done(status: str, details: dict[str, str] | None = None) -> str:
    """A server's ``response.done`` with ``status`` (and ``status_details``)."""
    response: dict[str, object] = {"id": "resp_1", "status": status}
    if details is not None:
        response["status_details"] = details
    return msg(type="response.done", response=response)


def done_mark(detail: str) -> StageMark:
    return StageMark("response_done", T, detail=detail)


def started(call_id: str, tool: str, arguments: str) -> ToolEvent:
    """``tool.started`` as the decoder reports it: the arguments only as a keyed hash."""
    args_hash = keyed_hash(SECRET, arguments, "a_")
    return ToolEvent(
        "tool.started", T, source="wire", operation_id=call_id, tool=tool, args_hash=args_hash
    )


def finished(call_id: str, output: str) -> ToolEvent:
    """``tool.finished`` as the decoder reports it: the output only as a keyed hash."""
    result_hash = keyed_hash(SECRET, output, "r_")
    return ToolEvent(
        "tool.finished",
        T,
        source="wire",
        operation_id=call_id,
        status="ok",
        result_hash=result_hash,
    )


CASES = [
    (
        "append (pcm16 at 24 kHz by default)",
        CALLER,
        msg(type="input_audio_buffer.append", audio=B64_PCM16),
        [audio(CALLER)],
    ),
    (
        "GA output delta: first of its response",
        AGENT,
        delta(),
        [StageMark("first_audio_delta", T), audio(AGENT)],
    ),
    (
        "beta output delta",
        AGENT,
        delta("response.audio.delta"),
        [StageMark("first_audio_delta", T), audio(AGENT)],
    ),
    (
        "delta without ids",
        AGENT,
        msg(type="response.output_audio.delta", delta=B64_PCM16),
        [audio(AGENT)],
    ),
    (
        "truncate",
        CALLER,
        msg(
            type="conversation.item.truncate", item_id="item_1", content_index=0, audio_end_ms=1730
        ),
        [Flush(T, "conversation.item.truncate", 1730.0, "item_1")],
    ),
    ("response.cancel", CALLER, msg(type="response.cancel"), [Flush(T, "response.cancel")]),
    (
        "response.cancel with an id",
        CALLER,
        msg(type="response.cancel", response_id="resp_9"),
        [Flush(T, "response.cancel")],
    ),
    (
        "output_audio_buffer.clear",
        CALLER,
        msg(type="output_audio_buffer.clear"),
        [Flush(T, "output_audio_buffer.clear")],
    ),
    ("commit", CALLER, msg(type="input_audio_buffer.commit"), []),
    ("input clear", CALLER, msg(type="input_audio_buffer.clear"), []),
    ("response.create", CALLER, msg(type="response.create"), []),
    (
        "a user message item",
        CALLER,
        msg(type="conversation.item.create", item={"type": "message", "role": "user"}),
        [],
    ),
    (
        "function call output",
        CALLER,
        msg(
            type="conversation.item.create",
            item={"type": "function_call_output", "call_id": "call_1", "output": '{"temp":57}'},
        ),
        [finished("call_1", '{"temp":57}')],
    ),
    (
        "function call arguments done",
        AGENT,
        msg(
            type="response.function_call_arguments.done",
            response_id="resp_1",
            item_id="item_2",
            output_index=0,
            call_id="call_1",
            name="get_weather",
            arguments='{"city":"Paris"}',
        ),
        [started("call_1", "get_weather", '{"city":"Paris"}')],
    ),
    (
        "speech_started before any append: arrival time only",
        AGENT,
        msg(type="input_audio_buffer.speech_started", audio_start_ms=8420, item_id="item_0"),
        [StageMark("server_speech_started", T)],
    ),
    (
        "response.created",
        AGENT,
        msg(type="response.created", response={"id": "resp_1", "status": "in_progress"}),
        [StageMark("response_created", T)],
    ),
    ("response.done completed", AGENT, done("completed"), [done_mark("completed")]),
    (
        "response.done cancelled by the server VAD",
        AGENT,
        done("cancelled", {"type": "cancelled", "reason": "turn_detected"}),
        [done_mark("cancelled/turn_detected")],
    ),
    (
        "response.done with an unknown status keeps no content",
        AGENT,
        done("Paris is sunny"),
        [done_mark("other")],
    ),
    (
        "session.created gives the wire's session id",
        AGENT,
        msg(type="session.created", session={"id": "sess_1", "type": "realtime"}),
        [StreamStart("sess_1", 24000, "pcm_s16le", T)],
    ),
    (
        "user transcript",
        AGENT,
        msg(
            type="conversation.item.input_audio_transcription.completed",
            item_id="i",
            content_index=0,
            transcript="where is my order",
        ),
        [Transcript("user", "where is my order", True, T)],
    ),
    (
        "GA agent transcript",
        AGENT,
        msg(type="response.output_audio_transcript.done", transcript="on its way"),
        [Transcript("assistant", "on its way", True, T)],
    ),
    (
        "beta agent transcript",
        AGENT,
        msg(type="response.audio_transcript.done", transcript="on its way"),
        [Transcript("assistant", "on its way", True, T)],
    ),
    (
        "SIP dtmf",
        AGENT,
        msg(type="input_audio_buffer.dtmf_event_received", event="5", received_at=1),
        [Dtmf(T)],
    ),
    ("committed", AGENT, msg(type="input_audio_buffer.committed", item_id="i"), []),
    ("audio done (GA)", AGENT, msg(type="response.output_audio.done", item_id="i"), []),
    ("audio done (beta)", AGENT, msg(type="response.audio.done", item_id="i"), []),
    ("rate limits", AGENT, msg(type="rate_limits.updated", rate_limits=[]), []),
    ("error", AGENT, msg(type="error", error={"message": "x"}), []),
    ("item truncated", AGENT, msg(type="conversation.item.truncated", item_id="i"), []),
    ("WebRTC buffer started", AGENT, msg(type="output_audio_buffer.started"), []),
    # Wrong direction and unknown names.
    (
        "append from the server",
        AGENT,
        msg(type="input_audio_buffer.append", audio=B64_PCM16),
        unknown(AGENT),
    ),
    ("delta from the client", CALLER, delta(), unknown(CALLER)),
    ("unknown client event", CALLER, msg(type="session.hangup"), unknown(CALLER)),
    ("unknown server event", AGENT, msg(type="response.audio.teleported"), unknown(AGENT)),
]

BAD = [  # (name, direction, message, anomaly kind): support.dialectkit.Bad
    ("malformed JSON", CALLER, '{"type": "input_audio_buffer.append", "audio": "', Kind.MALFORMED),
    ("not JSON", AGENT, "response.done", Kind.MALFORMED),
    ("empty text", CALLER, "", Kind.MALFORMED),
    ("JSON array", AGENT, "[]", Kind.MALFORMED),
    ("no type", CALLER, msg(event="media"), Kind.MALFORMED),
    ("type not a string", AGENT, msg(type=7), Kind.MALFORMED),
    ("binary from the client", CALLER, pcm_to_bytes(PCM), Kind.UNEXPECTED_BINARY),
    ("binary from the server", AGENT, b"\x00", Kind.UNEXPECTED_BINARY),
    (
        "invalid base64 append",
        CALLER,
        msg(type="input_audio_buffer.append", audio="AAA*"),
        Kind.INVALID_BASE64,
    ),
    ("bad padding in a delta", AGENT, delta(delta="AAA"), Kind.INVALID_BASE64),
    ("append without audio", CALLER, msg(type="input_audio_buffer.append"), Kind.MALFORMED),
    ("delta not a string", AGENT, delta(delta=12), Kind.MALFORMED),
    (
        "truncate without audio_end_ms",
        CALLER,
        msg(type="conversation.item.truncate", item_id="i"),
        Kind.MALFORMED,
    ),
    (
        "truncate with a negative position",
        CALLER,
        msg(type="conversation.item.truncate", item_id="i", audio_end_ms=-5),
        Kind.MALFORMED,
    ),
    (
        "truncate without an item",
        CALLER,
        msg(type="conversation.item.truncate", audio_end_ms=5),
        Kind.MALFORMED,
    ),
    (
        "speech_stopped with a string position",
        AGENT,
        msg(type="input_audio_buffer.speech_stopped", audio_end_ms="900"),
        Kind.MALFORMED,
    ),
    ("response.created without a response", AGENT, msg(type="response.created"), Kind.MALFORMED),
    ("response.done with a list", AGENT, msg(type="response.done", response=[]), Kind.MALFORMED),
    (
        "function call without a call id",
        AGENT,
        msg(type="response.function_call_arguments.done", name="f", arguments="{}"),
        Kind.MALFORMED,
    ),
    (
        "function call output without a call id",
        CALLER,
        msg(type="conversation.item.create", item={"type": "function_call_output", "output": "x"}),
        Kind.MALFORMED,
    ),
    ("item not an object", CALLER, msg(type="conversation.item.create", item="x"), Kind.MALFORMED),
    ("session not an object", CALLER, msg(type="session.update", session=None), Kind.MALFORMED),
    ("unknown GA format", CALLER, ga_update("audio/opus", "audio/pcm"), Kind.BAD_AUDIO),
    (
        "unknown beta format",
        AGENT,
        msg(type="session.updated", session={"output_audio_format": "mp3"}),
        Kind.BAD_AUDIO,
    ),
    (
        "a 24 kHz-only format at a silly rate",
        CALLER,
        msg(
            type="session.update",
            session={"audio": {"input": {"format": {"type": "audio/pcm", "rate": 3}}}},
        ),
        Kind.BAD_AUDIO,
    ),
    (
        "transcript not a string",
        AGENT,
        msg(type="response.audio_transcript.done", transcript=None),
        Kind.MALFORMED,
    ),
]


test_decode, test_bad_input_is_an_anomaly, test_registered_name = kit.table_tests(
    "openai-realtime", decoder, T, CASES, BAD
)


# -- the appended-audio timeline ----------------------------------------------------------


def test_server_vad_positions_map_onto_the_proxy_clock() -> None:
    dec = decoder()
    frame = np.zeros(480, dtype=np.int16)  # 20 ms at 24 kHz
    ms = 1_000_000
    # Frames sent at the end of their interval, with a 3 ms late one and a pause.
    arrivals = [1000 * ms + k * 20 * ms for k in range(10)]
    arrivals[4] += 3 * ms
    arrivals += [arrivals[-1] + 500 * ms + k * 20 * ms for k in range(1, 6)]
    for t in arrivals:
        dec.decode(CALLER, OpenAIRealtimeCallerWire.append(pcm_to_bytes(frame)), t)
    wire = OpenAIRealtimeAgentWire()

    def at(kind: str, position_ms: int) -> int | None:
        text = (
            wire.speech_started(position_ms, "item_1")
            if kind == "start"
            else wire.speech_stopped(position_ms, "item_1")
        )
        (mark,) = dec.decode(AGENT, text, 9 * 10**9)
        assert isinstance(mark, StageMark)
        assert mark.name == (
            "server_speech_started" if kind == "start" else "server_speech_stopped"
        )
        assert mark.t_ns == 9 * 10**9
        return mark.at_ns

    # Position p inside frame k (covering [20k, 20k+20) ms of appended audio) maps to
    # arrival_k - (20(k+1) - p) ms: a frame of duration d arriving at t covers [t-d, t].
    assert at("start", 0) == arrivals[0] - 20 * ms
    assert at("start", 30) == arrivals[1] - 10 * ms
    assert at("stop", 90) == arrivals[4] - 10 * ms  # the late frame
    assert at("stop", 100) == arrivals[4]  # a frame boundary belongs to the frame before
    assert at("stop", 210) == arrivals[10] - 10 * ms  # after the pause: the new anchor
    assert at("stop", 400) == arrivals[-1] + 100 * ms  # beyond the audio: extrapolated


def test_the_timeline_counts_duration_at_each_format() -> None:
    dec = decoder()
    dec.decode(CALLER, OpenAIRealtimeCallerWire.append(b"\x00" * 960), 100_000_000)  # 20 ms pcm16
    dec.decode(CALLER, beta_update("g711_ulaw", "pcm16"), 100_000_001)
    dec.decode(CALLER, OpenAIRealtimeCallerWire.append(b"\xff" * 160), 120_000_000)  # 20 ms ulaw
    (mark,) = dec.decode(AGENT, OpenAIRealtimeAgentWire().speech_stopped(30, "i"), 200_000_000)
    assert isinstance(mark, StageMark) and mark.at_ns == 110_000_000


# -- responses, truncation and cancellation -----------------------------------------------


def test_first_audio_delta_once_per_response_and_item_ids_on_audio() -> None:
    dec = decoder()
    wire = OpenAIRealtimeAgentWire()
    a = dec.decode(AGENT, wire.audio_delta("resp_1", "item_1", pcm_to_bytes(PCM)), T)
    b = dec.decode(AGENT, wire.audio_delta("resp_1", "item_1", pcm_to_bytes(PCM)), T + 1)
    c = dec.decode(AGENT, wire.audio_delta("resp_2", "item_2", pcm_to_bytes(PCM)), T + 2)
    assert [type(e).__name__ for e in a] == ["StageMark", "Audio"]
    assert [type(e).__name__ for e in b] == ["Audio"]
    assert [type(e).__name__ for e in c] == ["StageMark", "Audio"]
    assert isinstance(a[1], Audio) and a[1].item_id == "item_1"
    assert isinstance(c[1], Audio) and c[1].item_id == "item_2"


def test_audio_of_a_truncated_item_or_cancelled_response_is_not_played() -> None:
    dec = decoder()
    wire = OpenAIRealtimeAgentWire()
    client = OpenAIRealtimeCallerWire()
    data = pcm_to_bytes(PCM)
    dec.decode(AGENT, wire.response_created("resp_1"), T)
    assert len(dec.decode(AGENT, wire.audio_delta("resp_1", "item_1", data), T)) == 2
    (flush,) = dec.decode(CALLER, client.truncate("item_1", 120), T)
    assert flush == Flush(T, "conversation.item.truncate", 120.0, "item_1")
    assert dec.decode(AGENT, wire.audio_delta("resp_1", "item_1", data), T) == []
    # Another item of the same response still plays until the response is cancelled.
    assert len(dec.decode(AGENT, wire.audio_delta("resp_1", "item_9", data), T)) == 1
    assert dec.decode(CALLER, client.response_cancel(), T) == [Flush(T, "response.cancel")]
    assert dec.decode(AGENT, wire.audio_delta("resp_1", "item_9", data), T) == []
    assert dec.dropped_deltas == 2
    # A new response plays.
    assert len(dec.decode(AGENT, wire.audio_delta("resp_2", "item_3", data), T)) == 2


def test_tool_calls_and_a_cancel_with_a_call_in_flight() -> None:
    dec = decoder()
    wire = OpenAIRealtimeAgentWire()
    client = OpenAIRealtimeCallerWire()
    dec.decode(AGENT, wire.response_created("resp_1"), 1)
    (started,) = dec.decode(
        AGENT,
        wire.function_call_arguments_done("resp_1", "it", "call_1", "lookup", '{"b":2,"a":1}'),
        2,
    )
    assert isinstance(started, ToolEvent)
    # Arguments are hashed in canonical form (key order does not matter) and never kept.
    assert started.args_hash == keyed_hash(SECRET, '{"a":1,"b":2}', "a_")
    assert started.tool == "lookup" and started.operation_id == "call_1"
    events = dec.decode(CALLER, client.response_cancel(), 3)
    assert events == [
        Flush(3, "response.cancel"),
        ToolEvent(RESPONSE_CANCELLED_WITH_TOOL, 3, source="wire", operation_id="call_1"),
    ]
    # The server's response.done(cancelled) does not flag the same call twice.
    done = dec.decode(AGENT, wire.response_done("resp_1", "cancelled", "client_cancelled"), 4)
    assert done == [StageMark("response_done", 4, detail="cancelled/client_cancelled")]
    (finished,) = dec.decode(CALLER, client.function_call_output("call_1", '{"ok":true}'), 5)
    assert isinstance(finished, ToolEvent) and finished.kind == "tool.finished"


def test_a_cancelled_response_done_flags_calls_still_in_flight() -> None:
    dec = decoder()
    wire = OpenAIRealtimeAgentWire()
    client = OpenAIRealtimeCallerWire()
    dec.decode(AGENT, wire.function_call_arguments_done("resp_1", "i1", "call_a", "f", "{}"), 1)
    dec.decode(AGENT, wire.function_call_arguments_done("resp_1", "i2", "call_b", "g", "{}"), 2)
    dec.decode(CALLER, client.function_call_output("call_a", "done"), 3)  # call_a returned
    out = dec.decode(AGENT, wire.response_done("resp_1", "cancelled", "turn_detected"), 4)
    assert out[1:] == [
        ToolEvent(RESPONSE_CANCELLED_WITH_TOOL, 4, source="wire", operation_id="call_b")
    ]
    # A completed response flags nothing.
    dec.decode(AGENT, wire.function_call_arguments_done("resp_2", "i3", "call_c", "f", "{}"), 5)
    assert dec.decode(AGENT, wire.response_done("resp_2"), 6) == [
        StageMark("response_done", 6, detail="completed")
    ]


def test_a_call_finished_in_a_response_already_cancelled_is_flagged() -> None:
    dec = decoder()
    wire = OpenAIRealtimeAgentWire()
    dec.decode(AGENT, wire.response_created("resp_1"), 1)
    dec.decode(CALLER, OpenAIRealtimeCallerWire.response_cancel(), 2)
    out = dec.decode(AGENT, wire.function_call_arguments_done("resp_1", "i", "call_1", "f", "x"), 3)
    assert [e.kind for e in out if isinstance(e, ToolEvent)] == [
        "tool.started",
        RESPONSE_CANCELLED_WITH_TOOL,
    ]


def _started_tool(dec: object, name: str, t: int = 1) -> str | None:
    wire = OpenAIRealtimeAgentWire()
    call = wire.function_call_arguments_done("r", "i", f"call_{t}", name, "{}")
    (started,) = dec.decode(AGENT, call, t)  # type: ignore[attr-defined]
    assert isinstance(started, ToolEvent) and started.kind == "tool.started"
    return started.tool


def test_tool_names_from_the_wire_follow_the_event_api_s_rule() -> None:
    dec = decoder()
    for t, name in enumerate(HOSTILE_TOOL_NAMES, start=1):
        tool = _started_tool(dec, name, t)
        assert tool == name_digest(SECRET, name)  # the same n_ hash the event API gives
        assert tool is not None and tool.startswith("n_") and len(tool) == 18
    # A name-shaped name is kept; equal names hash alike, so retries still pair up.
    assert _started_tool(dec, "lookup_order") == "lookup_order"
    assert _started_tool(decoder(), HOSTILE_TOOL_NAMES[0]) == name_digest(
        SECRET, HOSTILE_TOOL_NAMES[0]
    )


def test_a_declared_vocabulary_keeps_its_names_and_only_them() -> None:
    options = DialectOptions(secret=SECRET, names=frozenset({"get_weather_v2"}))
    dec = make_decoder("openai-realtime", options)
    assert _started_tool(dec, "get_weather_v2") == "get_weather_v2"  # a digit, but declared
    assert _started_tool(dec, "lookup_order", 2) == name_digest(SECRET, "lookup_order")


def test_the_secret_comes_from_the_shell() -> None:
    """The core draws no random number: a decoder that keys hashes, or may turn out to
    (auto), refuses to be made without the secret; with one, its hashes are keyed by it."""
    for name in ("openai-realtime", "auto"):
        with pytest.raises(UsageError, match=r"DialectOptions\.secret"):
            make_decoder(name)
    dec = make_decoder("openai-realtime", DialectOptions(secret=b"given"))
    wire = OpenAIRealtimeAgentWire()
    (a,) = dec.decode(AGENT, wire.function_call_arguments_done("r", "i", "c1", "f", '{"x":1}'), 1)
    (b,) = dec.decode(AGENT, wire.function_call_arguments_done("r", "i", "c2", "f", '{"x":1}'), 2)
    assert isinstance(a, ToolEvent) and isinstance(b, ToolEvent)
    assert a.args_hash == b.args_hash == keyed_hash(b"given", '{"x":1}', "a_")
