"""The receipt: one JSON object per call (MEASUREMENT.md section 6).

Content-free by construction: pseudonymous ids (keyed hashes), times relative
to call start in milliseconds, counts, booleans and enumerations. No audio, no
transcript, no tool argument, no caller number has a field to go into.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA = "voxproxy.receipt/1"

Terminal = Literal[
    "completed",  # the wire said the stream ended (e.g. Twilio stop), then the sockets closed
    "caller_closed",  # the caller closed the websocket
    "agent_closed",  # the agent closed the websocket
    "caller_vanished",  # the caller's connection dropped without a close
    "agent_vanished",  # the agent's connection dropped without a close
    "upstream_refused",  # the agent answered the handshake with an HTTP error
    "upstream_unreachable",  # no connection to the agent could be made
    "upstream_timeout",  # the agent did not answer the handshake in time
    "message_too_big",  # a message exceeded the configured maximum
    "idle_timeout",  # nothing moved for longer than the idle timeout
    "proxy_shutdown",  # the proxy shut down while the call was up
    "proxy_error",  # the proxy failed (a bug); the call was closed
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BargeInRecord(_Model):
    onset_ms: float = Field(description="Caller speech onset that talked over agent audio.")
    stop_ms: float | None = Field(description="End of audible agent audio after the onset.")
    stop_latency_ms: float | None = Field(description="stop_ms - onset_ms.")
    outcome: Literal["stopped", "not_stopped", "no_agent_audio"]
    evidence: Literal["flush", "ceased"]
    ambiguous: bool = Field(
        description="True when the audio merely ceased: it may have been the natural end of "
        "the agent's utterance rather than a reaction."
    )
    in_pause: bool = Field(description="The caller started in a pause of the agent's utterance.")


class TurnRecord(_Model):
    index: int
    kind: Literal["response", "no_response", "agent_initiated"]
    caller_onset_ms: float | None = None
    caller_offset_ms: float | None = None
    agent_onset_ms: float | None = None
    agent_offset_ms: float | None = None
    ttfs_ms: float | None = Field(
        default=None, description="Caller speech end -> agent audio audible (playout timeline)."
    )
    reason: str | None = Field(default=None, description="Why ttfs_ms is null.")
    talk_over_ms: float | None = None
    reprompt_ms: float | None = None
    barge_in: BargeInRecord | None = None
    flushes: int = 0
    yielded_without_caller_speech: int = 0


class CloseInfo(_Model):
    initiator: Literal["caller", "agent", "proxy", "none"]
    caller_code: int | None = Field(default=None, description="Close code seen on the caller leg.")
    agent_code: int | None = Field(default=None, description="Close code seen on the agent leg.")
    upstream_status: int | None = Field(
        default=None, description="HTTP status of the agent's handshake answer (101 = accepted)."
    )


class MarkCheck(_Model):
    checked: int = Field(description="Mark echoes compared with the playout model.")
    cleared: int = Field(description="Echoes that followed a flush (played nothing).")
    mean_error_ms: float | None = None
    max_abs_error_ms: float | None = None


class Traffic(_Model):
    caller_to_agent_messages: int
    agent_to_caller_messages: int
    caller_to_agent_bytes: int
    agent_to_caller_bytes: int
    caller_audio_ms: float
    agent_audio_ms: float
    agent_audio_dropped_ms: float = Field(description="Queued agent audio that flushes discarded.")


class Settings(_Model):
    caller_frame_ms: float | None = Field(
        description="Median duration of the caller's audio messages (each covers [t - d, t])."
    )
    vad_frame_ms: int
    vad_mode: int
    merge_gap_ms: float
    min_speech_ms: float
    response_timeout_ms: float
    barge_in_window_ms: float
    agent_turn_gap_ms: float
    downstream_offset_ms: float = Field(
        description="Constant added to agent playout times for what the proxy cannot see."
    )


class Summary(_Model):
    turns: int
    responses: int
    no_responses: int
    ttfs_ms_median: float | None
    ttfs_ms_max: float | None
    barge_ins: int
    barge_ins_stopped: int
    stop_latency_ms_max: float | None
    flushes: int
    yielded_without_caller_speech: int


class Receipt(_Model):
    schema_: str = Field(default=SCHEMA, alias="schema")
    call: str = Field(description="Pseudonymous call id: a keyed hash of the wire's call id.")
    call_id_source: Literal["wire", "proxy"]
    dialect: str
    transport: Literal["websocket", "webrtc", "offline"]
    started_at: str = Field(description="Wall-clock time of call start (UTC, ISO 8601).")
    duration_ms: float
    terminal: Terminal
    close: CloseInfo
    upstream_connect_ms: float | None = None
    settings: Settings
    summary: Summary
    turns: list[TurnRecord]
    marks: MarkCheck
    traffic: Traffic
    anomalies: dict[str, int] = Field(
        description="Counts of malformed or unknown messages and of measurement errors."
    )
    measurement_disabled: bool = Field(
        default=False, description="Measurement gave up after repeated internal errors."
    )
    policy: str | None = Field(default=None, description="Hash of the verdict policy in force.")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def to_json_line(self) -> str:
        return self.model_dump_json(by_alias=True) + "\n"
