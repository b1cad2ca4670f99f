"""Builders of Realtime messages, for the load generator, the mock agent and tests (the
proxy never builds a message).
"""

from __future__ import annotations

from voxproxy.core.dialects._common import b64encode, dumps
from voxproxy.core.dialects.openai_realtime.formats import PCM16, AudioFormat


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

    def _event(self, kind: str, /, **fields: object) -> str:
        """A server event: its ``type``, then a fresh ``event_id``, then ``fields``."""
        self._events += 1
        return dumps({"type": kind, "event_id": f"event_{self._events:06d}", **fields})

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
        return self._event("session.created", session=session)

    def session_updated(
        self, session_id: str, input_format: AudioFormat, output_format: AudioFormat
    ) -> str:
        session = self._session(session_id, input_format, output_format)
        return self._event("session.updated", session=session)

    def speech_started(self, audio_start_ms: int, item_id: str) -> str:
        return self._event(
            "input_audio_buffer.speech_started", audio_start_ms=audio_start_ms, item_id=item_id
        )

    def speech_stopped(self, audio_end_ms: int, item_id: str) -> str:
        return self._event(
            "input_audio_buffer.speech_stopped", audio_end_ms=audio_end_ms, item_id=item_id
        )

    def committed(self, item_id: str, previous_item_id: str | None = None) -> str:
        return self._event(
            "input_audio_buffer.committed", previous_item_id=previous_item_id, item_id=item_id
        )

    @staticmethod
    def _response(response_id: str, status: str, details: object) -> dict[str, object]:
        return {
            "id": response_id,
            "object": "realtime.response",
            "status": status,
            "status_details": details,
            "output": [],
        }

    def response_created(self, response_id: str) -> str:
        return self._event(
            "response.created", response=self._response(response_id, "in_progress", None)
        )

    def _audio(self, kind: str, response_id: str, item_id: str, **delta: object) -> str:
        """An audio event of one response's first output item: beta or GA ``kind``."""
        return self._event(
            f"response.{kind}" if self.beta else f"response.output_{kind}",
            response_id=response_id,
            item_id=item_id,
            output_index=0,
            content_index=0,
            **delta,
        )

    def audio_delta(self, response_id: str, item_id: str, audio: bytes) -> str:
        return self._audio("audio.delta", response_id, item_id, delta=b64encode(audio))

    def audio_done(self, response_id: str, item_id: str) -> str:
        return self._audio("audio.done", response_id, item_id)

    def function_call_arguments_done(
        self, response_id: str, item_id: str, call_id: str, name: str, arguments: str
    ) -> str:
        return self._event(
            "response.function_call_arguments.done",
            response_id=response_id,
            item_id=item_id,
            output_index=0,
            call_id=call_id,
            name=name,
            arguments=arguments,
        )

    def response_done(
        self, response_id: str, status: str = "completed", reason: str | None = None
    ) -> str:
        details = None if reason is None else {"type": status, "reason": reason}
        return self._event("response.done", response=self._response(response_id, status, details))

    def input_transcription_completed(self, item_id: str, transcript: str) -> str:
        """What the server's transcription model heard in a user item."""
        heard = {"item_id": item_id, "content_index": 0, "transcript": transcript}
        return self._event("conversation.item.input_audio_transcription.completed", **heard)

    def item_truncated(self, item_id: str, audio_end_ms: int) -> str:
        cut = {"item_id": item_id, "content_index": 0, "audio_end_ms": audio_end_ms}
        return self._event("conversation.item.truncated", **cut)

    def error(self, code: str, message: str) -> str:
        error = {"type": "invalid_request_error", "code": code, "message": message}
        return self._event("error", error=error)
