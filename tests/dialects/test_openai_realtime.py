"""Dialect ``openai-realtime``: the OpenAI Realtime API on a websocket (PROTOCOLS.md 2)."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.eventview import views

from voxproxy.audio.g711 import alaw_to_pcm, pcm_to_alaw, pcm_to_ulaw, ulaw_to_pcm
from voxproxy.audio.pcm import bytes_to_pcm, pcm_to_bytes
from voxproxy.dialects import make_decoder
from voxproxy.dialects.base import DialectOptions
from voxproxy.dialects.openai_realtime import (
    CLIENT_EVENTS,
    PCM16,
    PCMA,
    PCMU,
    SERVER_EVENTS,
    OpenAIRealtimeAgentWire,
    OpenAIRealtimeCallerWire,
    OpenAIRealtimeDecoder,
    parse_format,
)
from voxproxy.events import (
    AGENT_TO_CALLER as AGENT,
)
from voxproxy.events import (
    CALLER_TO_AGENT as CALLER,
)
from voxproxy.events import (
    RESPONSE_CANCELLED_WITH_TOOL,
    Anomaly,
    AnomalyKind,
    Audio,
    Direction,
    Dtmf,
    Event,
    Flush,
    StageMark,
    StreamStart,
    ToolEvent,
    Transcript,
)
from voxproxy.ids import keyed_hash

T = 5_000_000_000
SECRET = b"deployment-secret"
PCM = np.array([0, 1000, -1000, 8000, -32000, 32767], dtype=np.int16)
B64_PCM16 = base64.b64encode(pcm_to_bytes(PCM)).decode()


def msg(**fields: object) -> str:
    return json.dumps(fields)


def decoder() -> OpenAIRealtimeDecoder:
    return OpenAIRealtimeDecoder(DialectOptions(secret=SECRET))


def audio(d: Direction, pcm: np.ndarray = PCM, rate: int = 24000) -> Audio:
    return Audio(d, pcm.astype(np.int16), rate, T)


def anomaly(kind: AnomalyKind, d: Direction) -> Anomaly:
    return Anomaly(kind, d, T)


def delta(kind: str = "response.output_audio.delta", **extra: object) -> str:
    fields: dict[str, object] = {
        "type": kind,
        "event_id": "event_1",
        "response_id": "resp_1",
        "item_id": "item_1",
        "output_index": 0,
        "content_index": 0,
        "delta": B64_PCM16,
    }
    fields.update(extra)
    return json.dumps(fields)


def ga_update(input_type: str, output_type: str) -> str:
    return msg(
        type="session.update",
        session={
            "type": "realtime",
            "audio": {
                "input": {"format": {"type": input_type}, "turn_detection": {"type": "server_vad"}},
                "output": {"format": {"type": output_type}, "voice": "marin"},
            },
        },
    )


def beta_update(input_format: str, output_format: str) -> str:
    return msg(
        type="session.update",
        session={"input_audio_format": input_format, "output_audio_format": output_format},
    )


# Each case runs on a fresh decoder: (name, direction, message, expected events).
CASES: list[tuple[str, Direction, str, list[Event]]] = [
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
        [
            ToolEvent(
                "tool.finished",
                T,
                source="wire",
                operation_id="call_1",
                status="ok",
                result_hash=keyed_hash(SECRET, '{"temp":57}', "r_"),
            )
        ],
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
        [
            ToolEvent(
                "tool.started",
                T,
                source="wire",
                operation_id="call_1",
                tool="get_weather",
                args_hash=keyed_hash(SECRET, '{"city":"Paris"}', "a_"),
            )
        ],
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
    (
        "response.done completed",
        AGENT,
        msg(type="response.done", response={"id": "resp_1", "status": "completed"}),
        [StageMark("response_done", T, detail="completed")],
    ),
    (
        "response.done cancelled by the server VAD",
        AGENT,
        msg(
            type="response.done",
            response={
                "id": "resp_1",
                "status": "cancelled",
                "status_details": {"type": "cancelled", "reason": "turn_detected"},
            },
        ),
        [StageMark("response_done", T, detail="cancelled/turn_detected")],
    ),
    (
        "response.done with an unknown status keeps no content",
        AGENT,
        msg(type="response.done", response={"id": "r", "status": "Paris is sunny"}),
        [StageMark("response_done", T, detail="other")],
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
        [anomaly(AnomalyKind.UNKNOWN_EVENT, AGENT)],
    ),
    ("delta from the client", CALLER, delta(), [anomaly(AnomalyKind.UNKNOWN_EVENT, CALLER)]),
    (
        "unknown client event",
        CALLER,
        msg(type="session.hangup"),
        [anomaly(AnomalyKind.UNKNOWN_EVENT, CALLER)],
    ),
    (
        "unknown server event",
        AGENT,
        msg(type="response.audio.teleported"),
        [anomaly(AnomalyKind.UNKNOWN_EVENT, AGENT)],
    ),
]

BAD: list[tuple[str, Direction, bytes | str, AnomalyKind]] = [
    (
        "malformed JSON",
        CALLER,
        '{"type": "input_audio_buffer.append", "audio": "',
        AnomalyKind.MALFORMED,
    ),
    ("not JSON", AGENT, "response.done", AnomalyKind.MALFORMED),
    ("empty text", CALLER, "", AnomalyKind.MALFORMED),
    ("JSON array", AGENT, "[]", AnomalyKind.MALFORMED),
    ("no type", CALLER, msg(event="media"), AnomalyKind.MALFORMED),
    ("type not a string", AGENT, msg(type=7), AnomalyKind.MALFORMED),
    ("binary from the client", CALLER, pcm_to_bytes(PCM), AnomalyKind.UNEXPECTED_BINARY),
    ("binary from the server", AGENT, b"\x00", AnomalyKind.UNEXPECTED_BINARY),
    (
        "invalid base64 append",
        CALLER,
        msg(type="input_audio_buffer.append", audio="AAA*"),
        AnomalyKind.INVALID_BASE64,
    ),
    ("bad padding in a delta", AGENT, delta(delta="AAA"), AnomalyKind.INVALID_BASE64),
    ("append without audio", CALLER, msg(type="input_audio_buffer.append"), AnomalyKind.MALFORMED),
    ("delta not a string", AGENT, delta(delta=12), AnomalyKind.MALFORMED),
    (
        "truncate without audio_end_ms",
        CALLER,
        msg(type="conversation.item.truncate", item_id="i"),
        AnomalyKind.MALFORMED,
    ),
    (
        "truncate with a negative position",
        CALLER,
        msg(type="conversation.item.truncate", item_id="i", audio_end_ms=-5),
        AnomalyKind.MALFORMED,
    ),
    (
        "truncate without an item",
        CALLER,
        msg(type="conversation.item.truncate", audio_end_ms=5),
        AnomalyKind.MALFORMED,
    ),
    (
        "speech_stopped with a string position",
        AGENT,
        msg(type="input_audio_buffer.speech_stopped", audio_end_ms="900"),
        AnomalyKind.MALFORMED,
    ),
    (
        "response.created without a response",
        AGENT,
        msg(type="response.created"),
        AnomalyKind.MALFORMED,
    ),
    (
        "response.done with a list",
        AGENT,
        msg(type="response.done", response=[]),
        AnomalyKind.MALFORMED,
    ),
    (
        "function call without a call id",
        AGENT,
        msg(type="response.function_call_arguments.done", name="f", arguments="{}"),
        AnomalyKind.MALFORMED,
    ),
    (
        "function call output without a call id",
        CALLER,
        msg(type="conversation.item.create", item={"type": "function_call_output", "output": "x"}),
        AnomalyKind.MALFORMED,
    ),
    (
        "item not an object",
        CALLER,
        msg(type="conversation.item.create", item="x"),
        AnomalyKind.MALFORMED,
    ),
    (
        "session not an object",
        CALLER,
        msg(type="session.update", session=None),
        AnomalyKind.MALFORMED,
    ),
    ("unknown GA format", CALLER, ga_update("audio/opus", "audio/pcm"), AnomalyKind.BAD_AUDIO),
    (
        "unknown beta format",
        AGENT,
        msg(type="session.updated", session={"output_audio_format": "mp3"}),
        AnomalyKind.BAD_AUDIO,
    ),
    (
        "a 24 kHz-only format at a silly rate",
        CALLER,
        msg(
            type="session.update",
            session={"audio": {"input": {"format": {"type": "audio/pcm", "rate": 3}}}},
        ),
        AnomalyKind.BAD_AUDIO,
    ),
    (
        "transcript not a string",
        AGENT,
        msg(type="response.audio_transcript.done", transcript=None),
        AnomalyKind.MALFORMED,
    ),
]


@pytest.mark.parametrize(
    ("name", "direction", "message", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_decode(name: str, direction: Direction, message: str, expected: list[Event]) -> None:
    del name
    assert views(decoder().decode(direction, message, T)) == views(expected)


@pytest.mark.parametrize(("name", "direction", "message", "kind"), BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_an_anomaly(
    name: str, direction: Direction, message: bytes | str, kind: AnomalyKind
) -> None:
    del name
    assert decoder().decode(direction, message, T) == [anomaly(kind, direction)]


# -- formats: GA and beta names, all three encodings, both directions --------------------

FORMAT_UPDATES = [
    ("GA pcm", ga_update("audio/pcm", "audio/pcm"), PCM16, PCM16),
    ("GA pcmu/pcma", ga_update("audio/pcmu", "audio/pcma"), PCMU, PCMA),
    ("GA pcma/pcmu", ga_update("audio/pcma", "audio/pcmu"), PCMA, PCMU),
    ("beta pcm16", beta_update("pcm16", "pcm16"), PCM16, PCM16),
    ("beta ulaw/alaw", beta_update("g711_ulaw", "g711_alaw"), PCMU, PCMA),
    ("beta alaw/ulaw", beta_update("g711_alaw", "g711_ulaw"), PCMA, PCMU),
]


def _encoded(fmt: object, pcm: np.ndarray) -> tuple[str, np.ndarray]:
    if fmt is PCMU:
        data = pcm_to_ulaw(pcm)
        return base64.b64encode(data).decode(), ulaw_to_pcm(data)
    if fmt is PCMA:
        data = pcm_to_alaw(pcm)
        return base64.b64encode(data).decode(), alaw_to_pcm(data)
    return base64.b64encode(pcm_to_bytes(pcm)).decode(), pcm


@pytest.mark.parametrize(
    ("name", "update", "fmt_in", "fmt_out"), FORMAT_UPDATES, ids=[f[0] for f in FORMAT_UPDATES]
)
@pytest.mark.parametrize("announced_by", ["client", "server"])
def test_formats_follow_the_session(
    name: str, update: str, fmt_in: object, fmt_out: object, announced_by: str
) -> None:
    del name
    dec = decoder()
    if announced_by == "client":
        assert dec.decode(CALLER, update, T) == []
    else:
        server = json.loads(update)
        server["type"] = "session.updated"
        assert dec.decode(AGENT, json.dumps(server), T) == []
    b64_in, pcm_in = _encoded(fmt_in, PCM)
    b64_out, pcm_out = _encoded(fmt_out, PCM)
    (a,) = dec.decode(CALLER, msg(type="input_audio_buffer.append", audio=b64_in), T)
    assert isinstance(a, Audio)
    assert a.sample_rate_hz == fmt_in.sample_rate_hz  # type: ignore[attr-defined]
    np.testing.assert_array_equal(a.pcm, pcm_in)
    _, b = dec.decode(AGENT, delta(delta=b64_out), T)
    assert isinstance(b, Audio)
    assert b.sample_rate_hz == fmt_out.sample_rate_hz  # type: ignore[attr-defined]
    np.testing.assert_array_equal(b.pcm, pcm_out)


def test_a_partial_session_update_keeps_the_formats() -> None:
    dec = decoder()
    dec.decode(CALLER, beta_update("g711_ulaw", "g711_ulaw"), T)
    assert (
        dec.decode(CALLER, msg(type="session.update", session={"instructions": "be brief"}), T)
        == []
    )
    (a,) = dec.decode(CALLER, msg(type="input_audio_buffer.append", audio="//8="), T)
    assert isinstance(a, Audio) and a.sample_rate_hz == 8000 and a.pcm.size == 2


def test_parse_format() -> None:
    assert parse_format({"type": "audio/pcm", "rate": 24000}) is PCM16
    assert parse_format({"type": "audio/pcm"}) is PCM16
    assert parse_format({"type": "audio/pcmu"}) is PCMU
    assert parse_format("g711_alaw") is PCMA
    odd = parse_format({"type": "audio/pcm", "rate": 16000})
    assert odd is not None and odd.sample_rate_hz == 16000
    for bad in ({"type": "audio/pcm", "rate": True}, {}, None, 3, "opus", {"type": None}):
        assert parse_format(bad) is None


def test_pcm16_odd_bytes_carry_over() -> None:
    dec = decoder()
    data = pcm_to_bytes(PCM)
    first, second = data[:5], data[5:]
    (a,) = dec.decode(CALLER, OpenAIRealtimeCallerWire.append(first), T)
    (b,) = dec.decode(CALLER, OpenAIRealtimeCallerWire.append(second), T)
    assert isinstance(a, Audio) and isinstance(b, Audio)
    np.testing.assert_array_equal(np.concatenate([a.pcm, b.pcm]), PCM)


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


def test_without_a_secret_hashes_still_compare_within_the_call() -> None:
    dec = make_decoder("openai-realtime")
    wire = OpenAIRealtimeAgentWire()
    (a,) = dec.decode(AGENT, wire.function_call_arguments_done("r", "i", "c1", "f", '{"x":1}'), 1)
    (b,) = dec.decode(AGENT, wire.function_call_arguments_done("r", "i", "c2", "f", '{"x":1}'), 2)
    assert isinstance(a, ToolEvent) and isinstance(b, ToolEvent)
    assert a.args_hash == b.args_hash and a.args_hash is not None
    assert a.args_hash != keyed_hash(SECRET, '{"x":1}', "a_")


# -- message builders, both directions, GA and beta ----------------------------------------


@pytest.mark.parametrize("beta", [False, True])
def test_builders_round_trip(beta: bool) -> None:
    client = OpenAIRealtimeCallerWire(beta=beta)
    server = OpenAIRealtimeAgentWire(beta=beta)
    dec = decoder()
    pcm = np.arange(-2400, 2400, 10, dtype=np.int16)
    ulaw = pcm_to_ulaw(pcm)
    steps: list[tuple[Direction, str, list[Event]]] = [
        (AGENT, server.session_created("sess_9"), [StreamStart("sess_9", 24000, "pcm_s16le", T)]),
        (CALLER, client.session_update(PCMU, PCM16), []),
        (AGENT, server.session_updated("sess_9", PCMU, PCM16), []),
        (CALLER, client.append(ulaw), [Audio(CALLER, ulaw_to_pcm(ulaw), 8000, T)]),
        (CALLER, client.commit(), []),
        (
            AGENT,
            server.speech_started(0, "item_u"),
            [StageMark("server_speech_started", T, T - 60_000_000)],
        ),
        (AGENT, server.speech_stopped(60, "item_u"), [StageMark("server_speech_stopped", T, T)]),
        (AGENT, server.committed("item_u"), []),
        (AGENT, server.response_created("resp_1"), [StageMark("response_created", T)]),
        (
            AGENT,
            server.audio_delta("resp_1", "item_a", PCM16.encode(pcm)),
            [StageMark("first_audio_delta", T), Audio(AGENT, pcm, 24000, T)],
        ),
        (AGENT, server.audio_done("resp_1", "item_a"), []),
        (
            CALLER,
            client.truncate("item_a", 15),
            [Flush(T, "conversation.item.truncate", 15.0, "item_a")],
        ),
        (AGENT, server.item_truncated("item_a", 15), []),
        (CALLER, client.response_cancel("resp_1"), [Flush(T, "response.cancel")]),
        (CALLER, client.output_audio_buffer_clear(), [Flush(T, "output_audio_buffer.clear")]),
        (
            AGENT,
            server.response_done("resp_1", "cancelled", "client_cancelled"),
            [StageMark("response_done", T, detail="cancelled/client_cancelled")],
        ),
        (AGENT, server.error("bad", "nope"), []),
        (CALLER, client.response_create(), []),
    ]
    for direction, message, expected in steps:
        assert views(dec.decode(direction, message, T)) == views(expected), message


def test_builder_messages_follow_the_protocol() -> None:
    ga = json.loads(OpenAIRealtimeCallerWire().session_update(PCMU, PCMA))
    assert ga == {
        "type": "session.update",
        "session": {
            "type": "realtime",
            "audio": {
                "input": {
                    "format": {"type": "audio/pcmu"},
                    "turn_detection": {"type": "server_vad"},
                },
                "output": {"format": {"type": "audio/pcma"}},
            },
        },
    }
    pcm = json.loads(OpenAIRealtimeCallerWire().session_update())
    assert pcm["session"]["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
    beta = json.loads(OpenAIRealtimeCallerWire(beta=True).session_update(PCM16, PCMU))
    assert beta["session"]["input_audio_format"] == "pcm16"
    assert beta["session"]["output_audio_format"] == "g711_ulaw"
    truncate = json.loads(OpenAIRealtimeCallerWire.truncate("item_1", 1730))
    assert truncate == {
        "type": "conversation.item.truncate",
        "item_id": "item_1",
        "content_index": 0,
        "audio_end_ms": 1730,
    }
    server = OpenAIRealtimeAgentWire()
    d = json.loads(server.audio_delta("r", "i", b"\x01\x00"))
    assert (
        d["type"] == "response.output_audio.delta" and base64.b64decode(d["delta"]) == b"\x01\x00"
    )
    assert bytes_to_pcm(base64.b64decode(d["delta"])).tolist() == [1]
    assert json.loads(OpenAIRealtimeAgentWire(beta=True).audio_delta("r", "i", b""))["type"] == (
        "response.audio.delta"
    )
    done = json.loads(server.response_done("r", "cancelled", "turn_detected"))
    assert done["response"]["status_details"]["reason"] == "turn_detected"
    assert done["event_id"] != d["event_id"]


def test_registered_name() -> None:
    assert make_decoder("openai-realtime").name == "openai-realtime"


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
                    st.sampled_from(
                        [
                            "type",
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
                    ),
                    children,
                    max_size=5,
                )
            ),
            max_leaves=12,
        ).map(json.dumps),
    ),
    st.sampled_from([CALLER, AGENT]),
)
@pytest.mark.slow
def test_never_raises_on_peer_input(payload: bytes | str, direction: Direction) -> None:
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
        st.sampled_from(
            [
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
                "arguments",
                "transcript",
            ]
        ),
        _ANY,
        max_size=6,
    ),
    st.sampled_from([CALLER, AGENT]),
)
@pytest.mark.slow
def test_known_events_with_any_fields_never_raise(
    kind: str, fields: dict[str, object], direction: Direction
) -> None:
    dec = decoder()
    events = dec.decode(direction, json.dumps({"type": kind, **fields}), T)
    assert isinstance(events, list)
