"""Dialect ``openai-realtime``: the OpenAI Realtime API over a websocket (PROTOCOLS.md section 2).

The proxy sits between a Realtime *client* (the caller side: it appends the
caller's audio and plays the model's audio) and the Realtime *server* (the
agent side). Every message is JSON text with a ``type``; GA and beta event
names are both understood (openai-python ``types/realtime`` and
``types/beta/realtime``).

Audio

* Caller audio: ``input_audio_buffer.append`` ``audio`` (base64). Agent audio:
  ``response.output_audio.delta`` (beta ``response.audio.delta``) ``delta``.
  Formats (PROTOCOLS.md 2, "Audio formats"): pcm16 = 16-bit little-endian mono at
  24 kHz (48 bytes/ms) by default, or G.711 μ-law / A-law at 8 kHz, as
  ``session.update`` sets them (GA ``session.audio.input|output.format.type`` =
  ``audio/pcm|audio/pcmu|audio/pcma``; beta ``input_audio_format`` /
  ``output_audio_format`` = ``pcm16|g711_ulaw|g711_alaw``). The server's
  ``session.created`` / ``session.updated`` set them too.
* The server "will produce audio faster than realtime" (truncate docstring):
  agent audio goes through the session's playout model like Twilio bursts.

Flushes (the client drops audio it has not played; MEASUREMENT.md 3)

* ``conversation.item.truncate``: ``audio_end_ms`` is the client's claimed
  playout position in the item's audio, an *estimate* (PROTOCOLS.md 2,
  "Proxy implications"); it rides on the :class:`~voxproxy.events.Flush` so the
  session can compare it with the playout model.
* ``response.cancel`` (``response_id`` optional: the response in progress) and
  ``output_audio_buffer.clear`` (WebRTC/SIP only, but harmless here).
* After a truncate of an item or a cancel of a response, later deltas of that
  item or response are not played by the client (the point of truncating is to
  "synchronize the server's understanding of the audio with the client's
  playback"), so they are dropped here and never reach the playout model.

Stages (``StageMark``; MEASUREMENT.md 4, "Stage breakdown")

* ``input_audio_buffer.speech_started`` / ``speech_stopped`` become
  ``server_speech_started`` / ``server_speech_stopped``, placed on the proxy clock
  from ``audio_start_ms`` / ``audio_end_ms``, which count ms "from the start of all
  audio written to the buffer during the session" (they include
  ``prefix_padding_ms`` and the silence duration the server VAD waited). Each
  append's arrival time and cumulative duration are recorded; an append of
  duration d arriving at t covers [t - d, t] (MEASUREMENT.md 1).
* ``response.created`` -> ``response_created``; the first audio delta of each
  response -> ``first_audio_delta``; ``response.done`` -> ``response_done`` with
  ``detail`` = ``status`` or ``status/status_details.reason`` (enumerations only).

Tool calls (MEASUREMENT.md 5)

* ``response.function_call_arguments.done`` -> ``tool.started`` (``operation_id`` =
  ``call_id``, ``tool`` = ``name``, ``args_hash`` = keyed hash of the canonical
  arguments); ``conversation.item.create`` with a ``function_call_output`` item ->
  ``tool.finished`` (``ok``, ``result_hash``). Argument and output text is hashed
  and dropped at once: it is never kept.
* A response cancelled (client ``response.cancel``, or ``response.done`` with
  status ``cancelled``) while one of its calls is in flight gives a
  ``tool.response_cancelled`` event for that call: the tool was *not* cancelled.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from voxproxy.audio.g711 import pcm_to_alaw, pcm_to_ulaw
from voxproxy.audio.pcm import pcm_to_bytes
from voxproxy.dialects._common import PcmDecoder, b64decode, b64encode, dumps, loads_object
from voxproxy.dialects.base import DialectOptions, register
from voxproxy.events import (
    AGENT_TO_CALLER,
    CALLER_TO_AGENT,
    RESPONSE_CANCELLED_WITH_TOOL,
    Anomaly,
    AnomalyKind,
    Audio,
    Direction,
    Dtmf,
    Event,
    Flush,
    Pcm,
    StageMark,
    StreamStart,
    ToolEvent,
    Transcript,
)
from voxproxy.ids import keyed_hash, new_secret
from voxproxy.timebase import NS_PER_MS, NS_PER_S

NAME = "openai-realtime"
_KEEP_APPENDS = 16_384  # appends remembered for mapping server VAD positions (~5 min at 20 ms)
_KEEP_IDS = 256  # response and item ids remembered


@dataclass(frozen=True, slots=True)
class AudioFormat:
    """One of the Realtime audio formats, by its GA and beta names."""

    encoding: str  # voxproxy's name: pcm_s16le, ulaw or alaw
    sample_rate_hz: int
    ga: str
    beta: str

    def encode(self, pcm: Pcm) -> bytes:
        if self.encoding == "ulaw":
            return pcm_to_ulaw(pcm)
        if self.encoding == "alaw":
            return pcm_to_alaw(pcm)
        return pcm_to_bytes(pcm)

    def ga_object(self) -> dict[str, object]:
        if self.encoding == "pcm_s16le":
            return {"type": self.ga, "rate": self.sample_rate_hz}
        return {"type": self.ga}


PCM16 = AudioFormat("pcm_s16le", 24000, "audio/pcm", "pcm16")
PCMU = AudioFormat("ulaw", 8000, "audio/pcmu", "g711_ulaw")
PCMA = AudioFormat("alaw", 8000, "audio/pcma", "g711_alaw")
FORMATS = (PCM16, PCMU, PCMA)
_BY_NAME = {name: f for f in FORMATS for name in (f.ga, f.beta)}


def parse_format(value: object) -> AudioFormat | None:
    """A GA format object (``{"type": "audio/pcm", "rate": 24000}``) or a beta name."""
    if isinstance(value, str):
        return _BY_NAME.get(value)
    if not isinstance(value, dict):
        return None
    fmt = _BY_NAME.get(value.get("type"))  # type: ignore[arg-type]
    if fmt is not PCM16:
        return fmt
    rate = value.get("rate")
    if rate is None or rate == PCM16.sample_rate_hz:
        return PCM16
    # GA documents 24 kHz only; take another plausible rate at its word.
    if isinstance(rate, int) and not isinstance(rate, bool) and 8000 <= rate <= 48000:
        return AudioFormat("pcm_s16le", rate, PCM16.ga, PCM16.beta)
    return None


_STATUSES = frozenset({"completed", "cancelled", "failed", "incomplete", "in_progress"})
_REASONS = frozenset({"turn_detected", "client_cancelled", "max_output_tokens", "content_filter"})

# Events understood and deliberately not measured, per direction.
_CLIENT_QUIET = frozenset(
    {
        "input_audio_buffer.commit",
        "input_audio_buffer.clear",
        "response.create",
        "conversation.item.retrieve",
        "conversation.item.delete",
    }
)
_SERVER_QUIET = frozenset(
    {
        "error",
        "conversation.created",
        "conversation.item.created",
        "conversation.item.added",
        "conversation.item.done",
        "conversation.item.deleted",
        "conversation.item.retrieved",
        "conversation.item.truncated",
        "conversation.item.input_audio_transcription.delta",
        "conversation.item.input_audio_transcription.failed",
        "conversation.item.input_audio_transcription.segment",
        "input_audio_buffer.committed",
        "input_audio_buffer.cleared",
        "input_audio_buffer.timeout_triggered",
        "output_audio_buffer.started",
        "output_audio_buffer.stopped",
        "output_audio_buffer.cleared",
        "rate_limits.updated",
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_audio.done",
        "response.audio.done",
        "response.output_audio_transcript.delta",
        "response.audio_transcript.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.text.delta",
        "response.text.done",
        "response.function_call_arguments.delta",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.mcp_call.failed",
        "mcp_list_tools.in_progress",
        "mcp_list_tools.completed",
        "mcp_list_tools.failed",
        "transcription_session.updated",
    }
)


class _Recent:
    """A bounded set of recent ids (insertion order; the oldest go first)."""

    __slots__ = ("_ids", "_limit")

    def __init__(self, limit: int = _KEEP_IDS) -> None:
        self._ids: dict[str, None] = {}
        self._limit = limit

    def add(self, key: str) -> bool:
        """Add ``key``; False when it was already there."""
        if key in self._ids:
            return False
        if len(self._ids) >= self._limit:
            del self._ids[next(iter(self._ids))]
        self._ids[key] = None
        return True

    def __contains__(self, key: object) -> bool:
        return key in self._ids


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _ms(value: object) -> int | None:
    """A non-negative whole number of ms (JSON int, or a float without a fraction)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


class OpenAIRealtimeDecoder:
    name = NAME

    def __init__(self, options: DialectOptions) -> None:
        self._secret = options.secret if options.secret is not None else new_secret()
        self._formats = [PCM16, PCM16]
        self._pcm = [PcmDecoder(PCM16.encoding), PcmDecoder(PCM16.encoding)]
        # The appended-audio timeline: cumulative duration after each append, and its arrival.
        self._append_end_ns: list[int] = []
        self._append_t_ns: list[int] = []
        self._appended_ns = 0
        self._current_response: str | None = None
        self._audio_responses = _Recent()
        self._cancelled = _Recent()
        self._truncated = _Recent()
        self._calls: dict[str, str | None] = {}  # call in flight -> the response that issued it
        self._flagged = _Recent()
        self.dropped_deltas = 0  # deltas of a truncated item or cancelled response

    # -- entry ------------------------------------------------------------------------------

    def decode(self, direction: Direction, payload: bytes | str, t_ns: int) -> list[Event]:
        if not isinstance(payload, str):
            return [Anomaly(AnomalyKind.UNEXPECTED_BINARY, direction, t_ns)]
        msg = loads_object(payload)
        if msg is None:
            return [Anomaly(AnomalyKind.MALFORMED, direction, t_ns)]
        kind = msg.get("type")
        if not isinstance(kind, str):
            return [Anomaly(AnomalyKind.MALFORMED, direction, t_ns)]
        if direction is CALLER_TO_AGENT:
            if kind == "input_audio_buffer.append":  # the hot path first
                return self._append(msg, t_ns)
            handler = _CLIENT.get(kind)
            if handler is None:
                if kind in _CLIENT_QUIET:
                    return []
                return [Anomaly(AnomalyKind.UNKNOWN_EVENT, direction, t_ns)]
        else:
            if kind == "response.output_audio.delta" or kind == "response.audio.delta":
                return self._delta(msg, t_ns)
            handler = _SERVER.get(kind)
            if handler is None:
                if kind in _SERVER_QUIET:
                    return []
                return [Anomaly(AnomalyKind.UNKNOWN_EVENT, direction, t_ns)]
        return handler(self, msg, t_ns)

    # -- audio ------------------------------------------------------------------------------

    def _audio_bytes(self, msg: dict[str, Any], key: str, d: Direction, t_ns: int) -> bytes | Event:
        value = msg.get(key)
        data = b64decode(value)
        if data is None:
            kind = AnomalyKind.INVALID_BASE64 if isinstance(value, str) else AnomalyKind.MALFORMED
            return Anomaly(kind, d, t_ns)
        return data

    def _append(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        data = self._audio_bytes(msg, "audio", CALLER_TO_AGENT, t_ns)
        if not isinstance(data, bytes):
            return [data]
        pcm = self._pcm[CALLER_TO_AGENT].decode(data)
        rate = self._formats[CALLER_TO_AGENT].sample_rate_hz
        self._appended_ns += pcm.size * NS_PER_S // rate
        ends, times = self._append_end_ns, self._append_t_ns
        ends.append(self._appended_ns)
        times.append(t_ns)
        if len(ends) > 2 * _KEEP_APPENDS:
            del ends[:_KEEP_APPENDS]
            del times[:_KEEP_APPENDS]
        return [Audio(CALLER_TO_AGENT, pcm, rate, t_ns)]

    def _delta(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        data = self._audio_bytes(msg, "delta", AGENT_TO_CALLER, t_ns)
        if not isinstance(data, bytes):
            return [data]
        response_id = _str(msg.get("response_id"))
        item_id = _str(msg.get("item_id"))
        if (item_id is not None and item_id in self._truncated) or (
            response_id is not None and response_id in self._cancelled
        ):
            self.dropped_deltas += 1
            return []
        out: list[Event] = []
        key = response_id or item_id
        if key is not None and self._audio_responses.add(key):
            out.append(StageMark("first_audio_delta", t_ns))
        pcm = self._pcm[AGENT_TO_CALLER].decode(data)
        rate = self._formats[AGENT_TO_CALLER].sample_rate_hz
        out.append(Audio(AGENT_TO_CALLER, pcm, rate, t_ns, item_id))
        return out

    def _set_format(self, direction: Direction, value: object, t_ns: int) -> Event | None:
        fmt = parse_format(value)
        if fmt is None:
            return Anomaly(AnomalyKind.BAD_AUDIO, direction, t_ns)
        self._formats[direction] = fmt
        self._pcm[direction].set_encoding(fmt.encoding)
        return None

    def _session_formats(self, session: object, d: Direction, t_ns: int) -> list[Event]:
        """Apply the formats a session object sets (GA or beta); anomalies for bad ones."""
        if not isinstance(session, dict):
            return [Anomaly(AnomalyKind.MALFORMED, d, t_ns)]
        found: list[tuple[Direction, object]] = []
        audio = session.get("audio")
        if isinstance(audio, dict):
            for side, direction in (("input", CALLER_TO_AGENT), ("output", AGENT_TO_CALLER)):
                cfg = audio.get(side)
                if isinstance(cfg, dict) and "format" in cfg:
                    found.append((direction, cfg["format"]))
        if "input_audio_format" in session:
            found.append((CALLER_TO_AGENT, session["input_audio_format"]))
        if "output_audio_format" in session:
            found.append((AGENT_TO_CALLER, session["output_audio_format"]))
        out: list[Event] = []
        for direction, value in found:
            bad = self._set_format(direction, value, t_ns)
            if bad is not None:
                out.append(Anomaly(AnomalyKind.BAD_AUDIO, d, t_ns))
        return out

    # -- client -> server -------------------------------------------------------------------

    def _session_update(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        return self._session_formats(msg.get("session"), CALLER_TO_AGENT, t_ns)

    def _truncate(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        item_id = _str(msg.get("item_id"))
        end_ms = _ms(msg.get("audio_end_ms"))
        if item_id is None or end_ms is None:
            return [Anomaly(AnomalyKind.MALFORMED, CALLER_TO_AGENT, t_ns)]
        self._truncated.add(item_id)
        return [Flush(t_ns, "conversation.item.truncate", float(end_ms), item_id)]

    def _cancel(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        response_id = _str(msg.get("response_id")) or self._current_response
        out: list[Event] = [Flush(t_ns, "response.cancel")]
        if response_id is not None:
            self._cancelled.add(response_id)
            out.extend(self._flag_calls(response_id, t_ns))
        return out

    def _output_clear(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        del msg
        return [Flush(t_ns, "output_audio_buffer.clear")]

    def _item_create(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        item = msg.get("item")
        if not isinstance(item, dict):
            return [Anomaly(AnomalyKind.MALFORMED, CALLER_TO_AGENT, t_ns)]
        if item.get("type") != "function_call_output":
            return []
        call_id = _str(item.get("call_id"))
        if call_id is None:
            return [Anomaly(AnomalyKind.MALFORMED, CALLER_TO_AGENT, t_ns)]
        self._calls.pop(call_id, None)
        output = item.get("output")
        result_hash = None
        if output is not None:
            text = output if isinstance(output, str) else dumps(output)
            result_hash = keyed_hash(self._secret, text, "r_")
        return [
            ToolEvent(
                "tool.finished",
                t_ns,
                source="wire",
                operation_id=call_id,
                status="ok",
                result_hash=result_hash,
            )
        ]

    # -- server -> client -------------------------------------------------------------------

    def _session_created(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        session = msg.get("session")
        out = self._session_formats(session, AGENT_TO_CALLER, t_ns)
        if isinstance(session, dict):
            fmt = self._formats[CALLER_TO_AGENT]
            out.append(StreamStart(_str(session.get("id")), fmt.sample_rate_hz, fmt.encoding, t_ns))
        return out

    def _session_updated(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        return self._session_formats(msg.get("session"), AGENT_TO_CALLER, t_ns)

    def _at_ns(self, position_ms: int) -> int | None:
        """Proxy-clock time of a position on the appended-audio timeline."""
        ends = self._append_end_ns
        if not ends:
            return None
        p = position_ms * NS_PER_MS
        i = bisect.bisect_left(ends, p)
        if i == len(ends):
            return self._append_t_ns[-1] + (p - ends[-1])
        return self._append_t_ns[i] - (ends[i] - p)

    def _vad(self, msg: dict[str, Any], t_ns: int, key: str, stage: str) -> list[Event]:
        position = _ms(msg.get(key))
        if position is None:
            return [Anomaly(AnomalyKind.MALFORMED, AGENT_TO_CALLER, t_ns)]
        return [StageMark(stage, t_ns, self._at_ns(position))]

    def _speech_started(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        return self._vad(msg, t_ns, "audio_start_ms", "server_speech_started")

    def _speech_stopped(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        return self._vad(msg, t_ns, "audio_end_ms", "server_speech_stopped")

    def _response_created(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        response = msg.get("response")
        if not isinstance(response, dict):
            return [Anomaly(AnomalyKind.MALFORMED, AGENT_TO_CALLER, t_ns)]
        self._current_response = _str(response.get("id"))
        return [StageMark("response_created", t_ns)]

    def _response_done(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        response = msg.get("response")
        if not isinstance(response, dict):
            return [Anomaly(AnomalyKind.MALFORMED, AGENT_TO_CALLER, t_ns)]
        response_id = _str(response.get("id"))
        status = response.get("status")
        details = response.get("status_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        detail = status if status in _STATUSES else "other"
        if reason in _REASONS:
            detail = f"{detail}/{reason}"
        out: list[Event] = [StageMark("response_done", t_ns, detail=detail)]
        if response_id is not None and response_id == self._current_response:
            self._current_response = None
        if status == "cancelled" and response_id is not None:
            self._cancelled.add(response_id)
            out.extend(self._flag_calls(response_id, t_ns))
        return out

    def _call_done(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        call_id = _str(msg.get("call_id"))
        name = _str(msg.get("name"))
        arguments = msg.get("arguments")
        if call_id is None or name is None:
            return [Anomaly(AnomalyKind.MALFORMED, AGENT_TO_CALLER, t_ns)]
        response_id = _str(msg.get("response_id"))
        self._calls[call_id] = response_id
        if len(self._calls) > _KEEP_IDS:
            del self._calls[next(iter(self._calls))]
        out: list[Event] = [
            ToolEvent(
                "tool.started",
                t_ns,
                source="wire",
                operation_id=call_id,
                tool=name,
                args_hash=self._args_hash(arguments),
            )
        ]
        if response_id is not None and response_id in self._cancelled:
            # ".done is also emitted when a response is interrupted or cancelled".
            out.extend(self._flag_calls(response_id, t_ns))
        return out

    def _args_hash(self, arguments: object) -> str | None:
        """Keyed hash of the arguments, canonical when they are JSON (key order ignored)."""
        if arguments is None:
            return None
        text = arguments if isinstance(arguments, str) else dumps(arguments)
        with contextlib.suppress(ValueError, TypeError):
            text = orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS).decode("utf-8")
        return keyed_hash(self._secret, text, "a_")

    def _flag_calls(self, response_id: str, t_ns: int) -> list[Event]:
        out: list[Event] = []
        for call_id, owner in self._calls.items():
            if owner == response_id and self._flagged.add(call_id):
                out.append(
                    ToolEvent(
                        RESPONSE_CANCELLED_WITH_TOOL, t_ns, source="wire", operation_id=call_id
                    )
                )
        return out

    def _user_transcript(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        text = msg.get("transcript")
        if not isinstance(text, str):
            return [Anomaly(AnomalyKind.MALFORMED, AGENT_TO_CALLER, t_ns)]
        return [Transcript("user", text, True, t_ns)]

    def _agent_transcript(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        text = msg.get("transcript")
        if not isinstance(text, str):
            return [Anomaly(AnomalyKind.MALFORMED, AGENT_TO_CALLER, t_ns)]
        return [Transcript("assistant", text, True, t_ns)]

    def _dtmf(self, msg: dict[str, Any], t_ns: int) -> list[Event]:
        del msg
        return [Dtmf(t_ns)]


_Handler = Callable[[OpenAIRealtimeDecoder, dict[str, Any], int], list[Event]]

_CLIENT: dict[str, _Handler] = {
    "session.update": OpenAIRealtimeDecoder._session_update,
    "transcription_session.update": OpenAIRealtimeDecoder._session_update,
    "conversation.item.truncate": OpenAIRealtimeDecoder._truncate,
    "response.cancel": OpenAIRealtimeDecoder._cancel,
    "output_audio_buffer.clear": OpenAIRealtimeDecoder._output_clear,
    "conversation.item.create": OpenAIRealtimeDecoder._item_create,
}

_SERVER: dict[str, _Handler] = {
    "session.created": OpenAIRealtimeDecoder._session_created,
    "session.updated": OpenAIRealtimeDecoder._session_updated,
    "input_audio_buffer.speech_started": OpenAIRealtimeDecoder._speech_started,
    "input_audio_buffer.speech_stopped": OpenAIRealtimeDecoder._speech_stopped,
    "response.created": OpenAIRealtimeDecoder._response_created,
    "response.done": OpenAIRealtimeDecoder._response_done,
    "response.function_call_arguments.done": OpenAIRealtimeDecoder._call_done,
    "conversation.item.input_audio_transcription.completed": (
        OpenAIRealtimeDecoder._user_transcript
    ),
    "response.output_audio_transcript.done": OpenAIRealtimeDecoder._agent_transcript,
    "response.audio_transcript.done": OpenAIRealtimeDecoder._agent_transcript,
    "input_audio_buffer.dtmf_event_received": OpenAIRealtimeDecoder._dtmf,
}

CLIENT_EVENTS = frozenset({"input_audio_buffer.append", *_CLIENT, *_CLIENT_QUIET})
SERVER_EVENTS = frozenset(
    {"response.output_audio.delta", "response.audio.delta", *_SERVER, *_SERVER_QUIET}
)
"""Every event type the decoder knows, per direction (used by dialect detection)."""


@register(NAME)
def _make(options: DialectOptions) -> OpenAIRealtimeDecoder:
    return OpenAIRealtimeDecoder(options)


# -- message builders (the load generator, the mock agent and tests) ---------------------------


class OpenAIRealtimeCallerWire:
    """Builds the messages a Realtime client sends (GA names; ``beta`` for beta sessions)."""

    def __init__(self, beta: bool = False) -> None:
        self.beta = beta

    def session_update(
        self,
        input_format: AudioFormat = PCM16,
        output_format: AudioFormat = PCM16,
        *,
        server_vad: bool = True,
        tools: list[dict[str, object]] | None = None,
    ) -> str:
        turn: dict[str, object] | None = {"type": "server_vad"} if server_vad else None
        session: dict[str, object]
        if self.beta:
            session = {
                "input_audio_format": input_format.beta,
                "output_audio_format": output_format.beta,
                "turn_detection": turn,
            }
        else:
            session = {
                "type": "realtime",
                "audio": {
                    "input": {"format": input_format.ga_object(), "turn_detection": turn},
                    "output": {"format": output_format.ga_object()},
                },
            }
        if tools is not None:
            session["tools"] = tools
        return dumps({"type": "session.update", "session": session})

    @staticmethod
    def append(audio: bytes) -> str:
        return dumps({"type": "input_audio_buffer.append", "audio": b64encode(audio)})

    @staticmethod
    def commit() -> str:
        return '{"type":"input_audio_buffer.commit"}'

    @staticmethod
    def truncate(item_id: str, audio_end_ms: int, content_index: int = 0) -> str:
        return dumps(
            {
                "type": "conversation.item.truncate",
                "item_id": item_id,
                "content_index": content_index,
                "audio_end_ms": audio_end_ms,
            }
        )

    @staticmethod
    def response_cancel(response_id: str | None = None) -> str:
        if response_id is None:
            return '{"type":"response.cancel"}'
        return dumps({"type": "response.cancel", "response_id": response_id})

    @staticmethod
    def response_create() -> str:
        return '{"type":"response.create"}'

    @staticmethod
    def function_call_output(call_id: str, output: str) -> str:
        return dumps(
            {
                "type": "conversation.item.create",
                "item": {"type": "function_call_output", "call_id": call_id, "output": output},
            }
        )

    @staticmethod
    def output_audio_buffer_clear() -> str:
        return '{"type":"output_audio_buffer.clear"}'


class OpenAIRealtimeAgentWire:
    """Builds the messages a Realtime server sends (GA names; ``beta`` for beta names)."""

    def __init__(self, beta: bool = False) -> None:
        self.beta = beta
        self._events = 0

    def _eid(self) -> str:
        self._events += 1
        return f"event_{self._events:06d}"

    def _session(
        self, session_id: str, input_format: AudioFormat, output_format: AudioFormat
    ) -> dict[str, object]:
        if self.beta:
            return {
                "id": session_id,
                "object": "realtime.session",
                "input_audio_format": input_format.beta,
                "output_audio_format": output_format.beta,
            }
        return {
            "type": "realtime",
            "id": session_id,
            "object": "realtime.session",
            "audio": {
                "input": {"format": input_format.ga_object()},
                "output": {"format": output_format.ga_object()},
            },
        }

    def session_created(
        self, session_id: str, input_format: AudioFormat = PCM16, output_format: AudioFormat = PCM16
    ) -> str:
        session = self._session(session_id, input_format, output_format)
        return dumps({"type": "session.created", "event_id": self._eid(), "session": session})

    def session_updated(
        self, session_id: str, input_format: AudioFormat, output_format: AudioFormat
    ) -> str:
        session = self._session(session_id, input_format, output_format)
        return dumps({"type": "session.updated", "event_id": self._eid(), "session": session})

    def speech_started(self, audio_start_ms: int, item_id: str) -> str:
        return dumps(
            {
                "type": "input_audio_buffer.speech_started",
                "event_id": self._eid(),
                "audio_start_ms": audio_start_ms,
                "item_id": item_id,
            }
        )

    def speech_stopped(self, audio_end_ms: int, item_id: str) -> str:
        return dumps(
            {
                "type": "input_audio_buffer.speech_stopped",
                "event_id": self._eid(),
                "audio_end_ms": audio_end_ms,
                "item_id": item_id,
            }
        )

    def committed(self, item_id: str, previous_item_id: str | None = None) -> str:
        return dumps(
            {
                "type": "input_audio_buffer.committed",
                "event_id": self._eid(),
                "previous_item_id": previous_item_id,
                "item_id": item_id,
            }
        )

    def response_created(self, response_id: str) -> str:
        return dumps(
            {
                "type": "response.created",
                "event_id": self._eid(),
                "response": {
                    "id": response_id,
                    "object": "realtime.response",
                    "status": "in_progress",
                    "status_details": None,
                    "output": [],
                },
            }
        )

    def audio_delta(self, response_id: str, item_id: str, audio: bytes) -> str:
        return dumps(
            {
                "type": "response.audio.delta" if self.beta else "response.output_audio.delta",
                "event_id": self._eid(),
                "response_id": response_id,
                "item_id": item_id,
                "output_index": 0,
                "content_index": 0,
                "delta": b64encode(audio),
            }
        )

    def audio_done(self, response_id: str, item_id: str) -> str:
        return dumps(
            {
                "type": "response.audio.done" if self.beta else "response.output_audio.done",
                "event_id": self._eid(),
                "response_id": response_id,
                "item_id": item_id,
                "output_index": 0,
                "content_index": 0,
            }
        )

    def function_call_arguments_done(
        self, response_id: str, item_id: str, call_id: str, name: str, arguments: str
    ) -> str:
        return dumps(
            {
                "type": "response.function_call_arguments.done",
                "event_id": self._eid(),
                "response_id": response_id,
                "item_id": item_id,
                "output_index": 0,
                "call_id": call_id,
                "name": name,
                "arguments": arguments,
            }
        )

    def response_done(
        self, response_id: str, status: str = "completed", reason: str | None = None
    ) -> str:
        details = None if reason is None else {"type": status, "reason": reason}
        return dumps(
            {
                "type": "response.done",
                "event_id": self._eid(),
                "response": {
                    "id": response_id,
                    "object": "realtime.response",
                    "status": status,
                    "status_details": details,
                    "output": [],
                },
            }
        )

    def input_transcription_completed(self, item_id: str, transcript: str) -> str:
        """What the server's transcription model heard in a user item."""
        return dumps(
            {
                "type": "conversation.item.input_audio_transcription.completed",
                "event_id": self._eid(),
                "item_id": item_id,
                "content_index": 0,
                "transcript": transcript,
            }
        )

    def item_truncated(self, item_id: str, audio_end_ms: int) -> str:
        return dumps(
            {
                "type": "conversation.item.truncated",
                "event_id": self._eid(),
                "item_id": item_id,
                "content_index": 0,
                "audio_end_ms": audio_end_ms,
            }
        )

    def error(self, code: str, message: str) -> str:
        return dumps(
            {
                "type": "error",
                "event_id": self._eid(),
                "error": {"type": "invalid_request_error", "code": code, "message": message},
            }
        )
