"""The receipt: one JSON object per call (MEASUREMENT.md section 6).

Content-free by construction: pseudonymous ids (keyed hashes), times relative
to call start in milliseconds, counts, booleans and enumerations. No audio, no
transcript, no tool argument, no caller number has a field to go into.
"""

from __future__ import annotations

from typing import Literal, get_args

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
    "protocol_error",  # a peer broke the websocket protocol (close.initiator says which)
    "idle_timeout",  # nothing moved for longer than the idle timeout
    "proxy_shutdown",  # the proxy shut down while the call was up
    "proxy_error",  # the proxy failed (a bug); the call was closed
    "bad_offer",  # webrtc: the caller's SDP offer was malformed or unusable (answered 4xx)
    "ice_failed",  # webrtc: the caller's media path (ICE/DTLS) never connected
    "proxy_crashed",  # the proxy died mid-call (kill -9): written at its next start
]
TERMINALS: frozenset[str] = frozenset(get_args(Terminal))


def terminal_of(cause: str) -> Terminal:
    """The receipt's terminal for a transport's end cause
    (:class:`voxproxy.transports.ends.EndCause`, a string): the terminal of the same
    name, else ``proxy_error`` (a cause that never makes a receipt, such as a health
    check, is not a terminal)."""
    return cause if cause in TERMINALS else "proxy_error"  # type: ignore[return-value]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BargeInRecord(_Model):
    onset_ms: float = Field(description="Caller speech onset that talked over agent audio.")
    stop_ms: float | None = Field(
        description="End of audible agent audio after the onset (also where a withheld "
        "stop_latency_ms still bounds the truth: see stop_bounded)."
    )
    stop_latency_ms: float | None = Field(description="stop_ms - onset_ms.")
    stop_uncertainty_ms: float | None = Field(
        default=None,
        description="How far stop_latency_ms may be off: the detector's base for two edges plus "
        "the proxy's clock lag near both edges plus what noise may hide of them "
        "(MEASUREMENT.md 2).",
    )
    outcome: Literal["stopped", "not_stopped", "no_agent_audio", "unknown"] = Field(
        description="unknown: the figure is withheld (see reason)."
    )
    reason: str | None = Field(
        default=None,
        description="Why stop_ms is withheld: caller_never_quiet, agent_never_quiet, "
        "caller_unanalysed or agent_unanalysed (an edge beside audio that ran too far ahead "
        "of real time to be analysed), clock_lag, caller_noise and agent_noise (the "
        "uncertainty exceeds the policy's bound because noise may hide that much of an "
        "edge), caller_edge_ambiguous and agent_edge_ambiguous (an edge that moves that "
        "much with the talker's level read 0.5 dB off), or measurement_shed (the proxy's "
        "measurement fell behind under load and shed "
        "audio near the figure: see the measurement_shed anomaly).",
    )
    stop_bounded: bool | None = Field(
        default=None,
        description="For a withheld stop_latency_ms: whether the truth still lies within "
        "stop_ms - onset_ms less and plus stop_uncertainty_ms (withheld only as too "
        "uncertain, or for noise read over a bed that stayed steady; MEASUREMENT.md 6). "
        "Null where the figure is published.",
    )
    evidence: Literal["flush", "ceased"]
    ambiguous: bool = Field(
        description="True when the audio merely ceased: it may have been the natural end of "
        "the agent's utterance rather than a reaction."
    )
    in_pause: bool = Field(description="The caller started in a pause of the agent's utterance.")


class TurnStages(_Model):
    """Stages of a turn that the wire shows, in ms from call start (MEASUREMENT.md 4)."""

    marks: dict[str, float] = Field(
        default_factory=dict, description="Stage name -> time (ms from call start)."
    )
    server_vad_offset_diff_ms: float | None = Field(
        default=None,
        description="Server VAD speech end minus the proxy VAD's caller offset, when both exist.",
    )
    details: dict[str, str] = Field(
        default_factory=dict,
        description="Stage name -> a content-free qualifier the wire gave (a status, a reason).",
    )
    breakdown_ms: dict[str, float] = Field(
        default_factory=dict,
        description="ttfs_ms split at the stages of the chain caller speech end (proxy VAD) -> "
        "server_speech_stopped -> response_created -> first_audio_delta -> audible (agent "
        "onset): each stage present -> ms since the previous one present. The values add "
        "up to ttfs_ms.",
    )


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
    ttfs_uncertainty_ms: float | None = Field(
        default=None,
        description="How far ttfs_ms may be off: the detector's base for two edges plus the "
        "proxy's clock lag near both edges plus what noise may hide of them "
        "(MEASUREMENT.md 2), plus (WebRTC) how much later than the declared "
        "downstream_offset_ms the caller's jitter buffer may have played the agent's edge.",
    )
    reason: str | None = Field(
        default=None,
        description="Why ttfs_ms is null: no_response, call_ended, caller_never_quiet and "
        "agent_never_quiet (a direction that never went quiet: babble, music), "
        "caller_unanalysed and agent_unanalysed (an edge beside audio that ran too far "
        "ahead of real time to be analysed), clock_lag (the proxy's clock readings ran too "
        "late to trust), caller_noise and agent_noise (noise may hide more of an edge than "
        "the policy's bound; on an agent_initiated turn, a bed near the caller's level "
        "under which they could have spoken unheard), caller_edge_ambiguous and "
        "agent_edge_ambiguous (an edge that moves more than the bound with the talker's "
        "level read 0.5 dB off: a breath or a slow release near the truth's threshold), "
        "downstream_jitter (WebRTC: the caller's jitter reports or the relay's late packets"
        " say its jitter buffer may have grown more than the bound), measurement_shed (the "
        "proxy's measurement fell behind under load and shed audio near the figure or where"
        " the answer may lie), ...",
    )
    ttfs_bounded: bool | None = Field(
        default=None,
        description="For a withheld ttfs whose edges stand: true when it still lies "
        "within caller_offset_ms to agent_onset_ms less and plus ttfs_uncertainty_ms (an "
        "edge too uncertain to publish, or read over a steady bed), false when that span "
        "is no bound (noise that swells). Null: published, or no edges.",
    )
    talk_over_ms: float | None = None
    reprompt_ms: float | None = None
    barge_in: BargeInRecord | None = None
    barge_in_unheard: Literal["caller_noise"] | None = Field(
        default=None,
        description="Why a barge-in on this turn's answer could have gone unheard, when "
        "none was heard: caller_noise (a bed within 8 dB of the caller's level stood under "
        "at least half of the answer; a caller could have talked over it unheard). Null: any "
        "barge-in would have been heard.",
    )
    flushes: int = 0
    yielded_without_caller_speech: int = 0
    stages: TurnStages | None = None
    tool_calls: int = 0


class ToolEventFields(_Model):
    """The content-free fields of a tool, state or outcome event (MEASUREMENT.md
    section 5), each optional: which ones a kind carries is the event API's and the
    flows' to check. The one schema of the fields of :class:`voxproxy.core.events.ToolEvent`
    (the core's), :class:`EventRecord` (the receipt's) and the call flows' events."""

    operation_id: str | None = None
    tool: str | None = None
    attempt: int | None = None
    state_version: int | None = None
    args_hash: str | None = None
    idempotency_key: str | None = None
    status: str | None = None
    result_hash: str | None = None
    field: str | None = None
    version: int | None = None
    value_hash: str | None = None
    verified: bool | None = None


TOOL_EVENT_FIELDS = frozenset(ToolEventFields.model_fields)


class _EventHead(_Model):
    kind: str
    t_ms: float
    source: Literal["api", "wire"] = "api"


# The head's fields first (pydantic puts the fields of the last base first): the
# receipt's JSON keeps its order.
class EventRecord(ToolEventFields, _EventHead):
    """One tool, state or outcome event: the minimal, content-free fields."""


class ToolCallRecord(_Model):
    operation_id: str
    tool: str | None
    attempt: int | None
    turn: int | None = Field(description="Index of the turn the call started in.")
    started_ms: float
    finished_ms: float | None
    latency_ms: float | None
    status: str | None
    cancelled: bool
    idempotent: bool = Field(description="The call carried an idempotency key.")
    stale_write: bool
    stale_cause: Literal["barge_in", "correction", "outdated_state"] | None = None
    unsafe_retry: bool
    source: Literal["api", "wire"] = "api"
    response_cancelled_in_flight: bool = Field(
        default=False,
        description="The model response that issued the call was cancelled while the call "
        "was in flight (seen on the wire; the tool itself was not cancelled).",
    )


class Effects(_Model):
    """Derived checks over the call's tool events (MEASUREMENT.md section 5)."""

    tool_calls: int
    unfinished: int
    stale_writes: int
    unsafe_retries: int
    confirmations: int
    confirmations_before_finish: int
    confirmation_mismatches: int
    backend_verified: int
    outcome_verified: bool | None
    responses_cancelled_with_tool_in_flight: int = 0


class TruncationRecord(_Model):
    """A client's truncate (OpenAI Realtime): its claimed playout against the playout model."""

    t_ms: float = Field(description="Arrival of the truncate.")
    turn: int | None = Field(default=None, description="Index of the turn it happened in.")
    claimed_played_ms: float = Field(
        description="audio_end_ms: how much of the item's audio the client says it played."
    )
    modelled_played_ms: float | None = Field(
        default=None,
        description="How much of that item's audio the playout model says had played by then "
        "(null when the proxy saw none of the item's audio).",
    )
    diff_ms: float | None = Field(
        default=None, description="claimed_played_ms - modelled_played_ms."
    )


class VerdictRecord(_Model):
    verdict: str
    gate: str | None = None
    reason: str | None = None
    evidence: dict[str, object] = Field(default_factory=dict)
    cause: str | None = Field(
        default=None, description="Finer cause within the gate (e.g. tool_effect: stale_write)."
    )
    profile: str | None = Field(
        default=None, description="The policy profile judged under (auto, latency-only, ...)."
    )
    required: list[str] = Field(
        default_factory=list, description="Gates this call was held to, in order."
    )
    not_evaluated: list[str] = Field(
        default_factory=list,
        description="Gates this call was not held to: not in the policy, or not required "
        "of it (an outcome check of a call that carried no task events under auto).",
    )


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
    caller_audio_unanalysed_ms: float = Field(
        default=0.0,
        description="Caller audio that ran ahead of real time (anomaly caller_audio_ahead): "
        "forwarded and counted in caller_audio_ms, but not analysed.",
    )
    agent_audio_unanalysed_ms: float = Field(
        default=0.0,
        description="Agent audio that played but was queued so far ahead of real time that "
        "only its place on the playout timeline was kept (anomaly agent_audio_ahead): "
        "not analysed.",
    )


class ForwardDelay(_Model):
    """The proxy's own forwarding delay of one direction's messages: from their arrival
    at the proxy's host to their write to the other leg (MEASUREMENT.md 2: what the proxy
    adds to the call, never part of a figure)."""

    messages: int = Field(description="Messages forwarded (and timed).")
    p50_ms: float | None = Field(
        default=None, description="Median; the upper edge of its histogram bucket."
    )
    p95_ms: float | None = Field(
        default=None, description="95th percentile; the upper edge of its histogram bucket."
    )
    max_ms: float | None = None
    arrival: Literal["kernel", "read", "mixed"] = Field(
        default="kernel",
        description="Where the arrival times came from: kernel receive timestamps, the "
        "moment the event loop read the bytes (a TLS leg, or a platform without kernel "
        "stamps: late by the loop's lag, which the figures' uncertainty then carries), "
        "or both.",
    )


class Forwarding(_Model):
    caller_to_agent: ForwardDelay
    agent_to_caller: ForwardDelay


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
    caller_noise_events: int = Field(
        default=0, description="Caller sounds without pitch (a cough, a door): not speech."
    )


class EchoRecord(_Model):
    """The agent's audio leaking into the caller's channel of a recording (echo), as
    found by cross-correlating the two channels (``voxproxy analyze``)."""

    leak_db: float | None = Field(
        description="The leak's level against the agent channel's (dB; null: none found)."
    )
    lag_ms: float | None = Field(description="How late the leak follows the agent's audio.")
    residual_db: float | None = Field(
        default=None, description="What is left of the leak after its removal (dB)."
    )
    action: Literal["none", "removed", "withheld"] = Field(
        description="none: no leak found; removed: the estimated leak was subtracted from "
        "the caller channel before its edges were taken; withheld: it could not be removed "
        "well enough, and figures whose caller edge lies under agent audio are withheld "
        "(reason caller_echo)."
    )


class RecordingInfo(_Model):
    """What a recording was (``source: recording``): its shape, never its name or content."""

    container: Literal["wav", "flac"]
    encoding: str = Field(description="pcm_s16le, ulaw, alaw, flac, ... (the caller's file).")
    sample_rate_hz: int
    layout: Literal["stereo", "mono_pair"]
    offset_ms: float = Field(
        default=0.0, description="A pair: the agent file's first sample after the caller's."
    )
    echo: EchoRecord | None = None


class Receipt(_Model):
    schema_: str = Field(default=SCHEMA, alias="schema")
    call: str = Field(description="Pseudonymous call id: a keyed hash of the wire's call id.")
    call_id_source: Literal["wire", "proxy", "file"] = Field(
        description="wire: the wire's call id; proxy: the proxy's own link id; file: the "
        "recording's file name (voxproxy analyze). Always as a keyed hash."
    )
    dialect: str
    transport: Literal["websocket", "webrtc", "offline"]
    source: Literal["proxy", "recording", "capture"] = Field(
        default="proxy",
        description="Where the call was measured: live in the proxy, or afterwards from a "
        "recording or a capture of its wire (voxproxy analyze). Receipts written before "
        "this field existed are the proxy's.",
    )
    vantage: Literal["proxy", "listener"] = Field(
        default="proxy",
        description="Whose timeline the figures are on: the proxy's (agent audio placed on "
        "the playout timeline, MEASUREMENT.md 1 and 3) or the listener's (a recording: "
        "what the caller heard, when it heard it; no playout model).",
    )
    recording: RecordingInfo | None = None
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
    forwarding: Forwarding | None = Field(
        default=None,
        description="The proxy's own forwarding delay, per direction (both transports; "
        "receipts written before this field existed have none).",
    )
    anomalies: dict[str, int] = Field(
        description="Counts of malformed or unknown messages and of measurement errors."
    )
    wire_looks_like: str | None = Field(
        default=None,
        description="The dialect the caller's wire looked like when it was not the "
        "configured one (anomaly dialect_mismatch): nothing of the call was measured.",
    )
    measurement_disabled: bool = Field(
        default=False, description="Measurement gave up after repeated internal errors."
    )
    events: list[EventRecord] = Field(default_factory=list)
    tools: list[ToolCallRecord] = Field(default_factory=list)
    effects: Effects | None = None
    truncations: list[TruncationRecord] = Field(default_factory=list)
    verdict: VerdictRecord | None = None
    policy: str | None = Field(default=None, description="Hash of the verdict policy in force.")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def to_json_line(self) -> str:
        return self.model_dump_json(by_alias=True) + "\n"
