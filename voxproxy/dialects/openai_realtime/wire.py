"""Builders of Realtime messages, for the load generator, the mock agent and tests (the
proxy never builds a message).
"""

from __future__ import annotations

from voxproxy.dialects._common import b64encode, dumps
from voxproxy.dialects.openai_realtime.formats import PCM16, AudioFormat


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
