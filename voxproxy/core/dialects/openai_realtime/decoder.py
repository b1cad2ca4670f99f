"""The ``openai-realtime`` decoder: Realtime client and server events to normalized events
(see the package docstring for what each event means to the measurement).
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Callable
from typing import Any

import orjson

from voxproxy.core import events as ev
from voxproxy.core.dialects._common import PcmDecoder, b64_audio, dumps, text_object
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.openai_realtime.formats import PCM16, parse_format
from voxproxy.core.errors import UsageError
from voxproxy.core.ids import keyed_hash, safe_name
from voxproxy.core.timebase import NS_PER_MS, NS_PER_S

NAME = "openai-realtime"


_KEEP_APPENDS = 16_384  # appends remembered for mapping server VAD positions (~5 min at 20 ms)


_KEEP_IDS = 256  # response and item ids remembered


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
        if options.secret is None:
            raise UsageError(
                "the OpenAI Realtime decoder keys its hashes with DialectOptions.secret: "
                "hand one in (voxproxy.clock.new_secret() for one call)"
            )
        self._secret = options.secret
        self._names = options.names
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

    def codec(self, direction: ev.Direction) -> str:
        """The session's audio format of that direction (input, output)."""
        return self._formats[direction].encoding

    def decode(self, direction: ev.Direction, payload: bytes | str, t_ns: int) -> list[ev.Event]:
        msg = text_object(direction, payload, t_ns)
        if isinstance(msg, ev.Anomaly):
            return [msg]
        kind = msg.get("type")
        if not isinstance(kind, str):
            return [ev.Anomaly(ev.AnomalyKind.MALFORMED, direction, t_ns)]
        if direction is ev.CALLER_TO_AGENT:
            if kind == "input_audio_buffer.append":  # the hot path first
                return self._append(msg, t_ns)
            handlers, quiet = _CLIENT, _CLIENT_QUIET
        else:
            if kind == "response.output_audio.delta" or kind == "response.audio.delta":
                return self._delta(msg, t_ns)
            handlers, quiet = _SERVER, _SERVER_QUIET
        handler = handlers.get(kind)
        if handler is None:
            return (
                [] if kind in quiet else [ev.Anomaly(ev.AnomalyKind.UNKNOWN_EVENT, direction, t_ns)]
            )
        return handler(self, msg, t_ns)

    # -- audio ------------------------------------------------------------------------------

    def _append(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        data = b64_audio(msg.get("audio"), ev.CALLER_TO_AGENT, t_ns)
        if not isinstance(data, bytes):
            return [data]
        pcm = self._pcm[ev.CALLER_TO_AGENT].decode(data)
        rate = self._formats[ev.CALLER_TO_AGENT].sample_rate_hz
        self._appended_ns += pcm.size * NS_PER_S // rate
        ends, times = self._append_end_ns, self._append_t_ns
        ends.append(self._appended_ns)
        times.append(t_ns)
        if len(ends) > 2 * _KEEP_APPENDS:
            del ends[:_KEEP_APPENDS]
            del times[:_KEEP_APPENDS]
        return [ev.Audio(ev.CALLER_TO_AGENT, pcm, rate, t_ns)]

    def _delta(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        data = b64_audio(msg.get("delta"), ev.AGENT_TO_CALLER, t_ns)
        if not isinstance(data, bytes):
            return [data]
        response_id = _str(msg.get("response_id"))
        item_id = _str(msg.get("item_id"))
        if (item_id is not None and item_id in self._truncated) or (
            response_id is not None and response_id in self._cancelled
        ):
            self.dropped_deltas += 1
            return []
        out: list[ev.Event] = []
        key = response_id or item_id
        if key is not None and self._audio_responses.add(key):
            out.append(ev.StageMark("first_audio_delta", t_ns))
        pcm = self._pcm[ev.AGENT_TO_CALLER].decode(data)
        rate = self._formats[ev.AGENT_TO_CALLER].sample_rate_hz
        out.append(ev.Audio(ev.AGENT_TO_CALLER, pcm, rate, t_ns, item_id))
        return out

    def _set_format(self, direction: ev.Direction, value: object, t_ns: int) -> ev.Event | None:
        fmt = parse_format(value)
        if fmt is None:
            return ev.Anomaly(ev.AnomalyKind.BAD_AUDIO, direction, t_ns)
        self._formats[direction] = fmt
        self._pcm[direction].set_encoding(fmt.encoding)
        return None

    def _session_formats(self, session: object, d: ev.Direction, t_ns: int) -> list[ev.Event]:
        """Apply the formats a session object sets (GA or beta); anomalies for bad ones."""
        if not isinstance(session, dict):
            return [ev.Anomaly(ev.AnomalyKind.MALFORMED, d, t_ns)]
        found: list[tuple[ev.Direction, object]] = []
        audio = session.get("audio")
        if isinstance(audio, dict):
            for side, direction in (("input", ev.CALLER_TO_AGENT), ("output", ev.AGENT_TO_CALLER)):
                cfg = audio.get(side)
                if isinstance(cfg, dict) and "format" in cfg:
                    found.append((direction, cfg["format"]))
        if "input_audio_format" in session:
            found.append((ev.CALLER_TO_AGENT, session["input_audio_format"]))
        if "output_audio_format" in session:
            found.append((ev.AGENT_TO_CALLER, session["output_audio_format"]))
        out: list[ev.Event] = []
        for direction, value in found:
            bad = self._set_format(direction, value, t_ns)
            if bad is not None:
                out.append(ev.Anomaly(ev.AnomalyKind.BAD_AUDIO, d, t_ns))
        return out

    # -- client -> server -------------------------------------------------------------------

    def _session_update(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        return self._session_formats(msg.get("session"), ev.CALLER_TO_AGENT, t_ns)

    def _truncate(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        item_id = _str(msg.get("item_id"))
        end_ms = _ms(msg.get("audio_end_ms"))
        if item_id is None or end_ms is None:
            return [ev.Anomaly(ev.AnomalyKind.MALFORMED, ev.CALLER_TO_AGENT, t_ns)]
        self._truncated.add(item_id)
        return [ev.Flush(t_ns, "conversation.item.truncate", float(end_ms), item_id)]

    def _cancel(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        response_id = _str(msg.get("response_id")) or self._current_response
        out: list[ev.Event] = [ev.Flush(t_ns, "response.cancel")]
        if response_id is not None:
            self._cancelled.add(response_id)
            out.extend(self._flag_calls(response_id, t_ns))
        return out

    def _output_clear(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        del msg
        return [ev.Flush(t_ns, "output_audio_buffer.clear")]

    def _item_create(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        item = msg.get("item")
        if not isinstance(item, dict):
            return [ev.Anomaly(ev.AnomalyKind.MALFORMED, ev.CALLER_TO_AGENT, t_ns)]
        if item.get("type") != "function_call_output":
            return []
        call_id = _str(item.get("call_id"))
        if call_id is None:
            return [ev.Anomaly(ev.AnomalyKind.MALFORMED, ev.CALLER_TO_AGENT, t_ns)]
        self._calls.pop(call_id, None)
        output = item.get("output")
        result_hash = None
        if output is not None:
            text = output if isinstance(output, str) else dumps(output)
            result_hash = keyed_hash(self._secret, text, "r_")
        return [
            ev.ToolEvent(
                "tool.finished",
                t_ns,
                source="wire",
                operation_id=call_id,
                status="ok",
                result_hash=result_hash,
            )
        ]

    # -- server -> client -------------------------------------------------------------------

    def _session_created(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        session = msg.get("session")
        out = self._session_formats(session, ev.AGENT_TO_CALLER, t_ns)
        if isinstance(session, dict):
            fmt = self._formats[ev.CALLER_TO_AGENT]
            out.append(
                ev.StreamStart(_str(session.get("id")), fmt.sample_rate_hz, fmt.encoding, t_ns)
            )
        return out

    def _session_updated(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        return self._session_formats(msg.get("session"), ev.AGENT_TO_CALLER, t_ns)

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

    def _vad(self, msg: dict[str, Any], t_ns: int, key: str, stage: str) -> list[ev.Event]:
        position = _ms(msg.get(key))
        if position is None:
            return [ev.Anomaly(ev.AnomalyKind.MALFORMED, ev.AGENT_TO_CALLER, t_ns)]
        return [ev.StageMark(stage, t_ns, self._at_ns(position))]

    def _speech_started(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        return self._vad(msg, t_ns, "audio_start_ms", "server_speech_started")

    def _speech_stopped(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        return self._vad(msg, t_ns, "audio_end_ms", "server_speech_stopped")

    def _response_created(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        response = msg.get("response")
        if not isinstance(response, dict):
            return [ev.Anomaly(ev.AnomalyKind.MALFORMED, ev.AGENT_TO_CALLER, t_ns)]
        self._current_response = _str(response.get("id"))
        return [ev.StageMark("response_created", t_ns)]

    def _response_done(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        response = msg.get("response")
        if not isinstance(response, dict):
            return [ev.Anomaly(ev.AnomalyKind.MALFORMED, ev.AGENT_TO_CALLER, t_ns)]
        response_id = _str(response.get("id"))
        status = response.get("status")
        details = response.get("status_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        detail = status if status in _STATUSES else "other"
        if reason in _REASONS:
            detail = f"{detail}/{reason}"
        out: list[ev.Event] = [ev.StageMark("response_done", t_ns, detail=detail)]
        if response_id is not None and response_id == self._current_response:
            self._current_response = None
        if status == "cancelled" and response_id is not None:
            self._cancelled.add(response_id)
            out.extend(self._flag_calls(response_id, t_ns))
        return out

    def _call_done(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        call_id = _str(msg.get("call_id"))
        name = _str(msg.get("name"))
        arguments = msg.get("arguments")
        if call_id is None or name is None:
            return [ev.Anomaly(ev.AnomalyKind.MALFORMED, ev.AGENT_TO_CALLER, t_ns)]
        response_id = _str(msg.get("response_id"))
        self._calls[call_id] = response_id
        if len(self._calls) > _KEEP_IDS:
            del self._calls[next(iter(self._calls))]
        out: list[ev.Event] = [
            ev.ToolEvent(
                "tool.started",
                t_ns,
                source="wire",
                operation_id=call_id,
                tool=safe_name(self._secret, name, self._names),
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

    def _flag_calls(self, response_id: str, t_ns: int) -> list[ev.Event]:
        out: list[ev.Event] = []
        for call_id, owner in self._calls.items():
            if owner == response_id and self._flagged.add(call_id):
                out.append(
                    ev.ToolEvent(
                        ev.RESPONSE_CANCELLED_WITH_TOOL, t_ns, source="wire", operation_id=call_id
                    )
                )
        return out

    def _user_transcript(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        text = msg.get("transcript")
        if not isinstance(text, str):
            return [ev.Anomaly(ev.AnomalyKind.MALFORMED, ev.AGENT_TO_CALLER, t_ns)]
        return [ev.Transcript("user", text, True, t_ns)]

    def _agent_transcript(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        text = msg.get("transcript")
        if not isinstance(text, str):
            return [ev.Anomaly(ev.AnomalyKind.MALFORMED, ev.AGENT_TO_CALLER, t_ns)]
        return [ev.Transcript("assistant", text, True, t_ns)]

    def _dtmf(self, msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        del msg
        return [ev.Dtmf(t_ns)]


_Handler = Callable[[OpenAIRealtimeDecoder, dict[str, Any], int], list[ev.Event]]


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


def new_decoder(options: DialectOptions) -> OpenAIRealtimeDecoder:
    return OpenAIRealtimeDecoder(options)
