"""What a scripted call is made of: the plan (who says which clip when, how the agent
sends and reacts), and the truth of each turn that rendering it yields.

:class:`CallPlan` is for the first wires (raw PCM, Twilio) and carries noise options;
:class:`WirePlan` is for the newer ones (Telnyx, Plivo, Vonage, Exotel, OpenAI
Realtime) and carries the OpenAI Realtime server's VAD and tool timings. Both render
through the one :func:`support.scripted.render`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from voxproxy.clips import Clip
from voxproxy.core.events import Direction, Pcm

SendMode = Literal["paced", "burst"]
Reaction = Literal["flush", "cease", "never"]


@dataclass(frozen=True, slots=True)
class BargePlan:
    after_agent_onset_ms: float  # the caller's speech onset, after the agent's onset
    reaction_ms: float  # how long the agent takes to react
    reaction: Reaction


@dataclass(frozen=True, slots=True)
class TurnPlan:
    caller: Clip
    agent: Clip
    delay_ms: float  # caller speech offset -> agent speech onset
    barge: BargePlan | None = None  # the NEXT turn's caller speech barges in on this answer


@dataclass(frozen=True, slots=True)
class CallPlan:
    dialect: Literal["raw", "twilio"]
    send_mode: SendMode
    turns: tuple[TurnPlan, ...]
    caller_gap_ms: float = 700.0  # silence between the agent's end and the next caller turn
    lead_ms: float = 500.0  # caller audio before the first turn
    tail_ms: float = 1500.0  # after the last agent audio
    frame_ms: int = 20
    burst_chunk_ms: int = 200
    burst_speedup: float = 10.0
    jitter_ms: float = 2.0  # network jitter on every message, uniform in [0, jitter]
    caller_noise_dbfs: float | None = None
    seed: int = 0
    sample_rate_hz: int = 16000  # raw only (twilio is 8 kHz)
    caller_bed: Pcm | None = None  # a noise bed (babble, street) under the whole caller track
    caller_bed_dbfs: float = -30.0  # ... at this RMS level


WireDialect = Literal["telnyx", "plivo", "vonage", "exotel", "openai-realtime"]
WIRE_DIALECTS: tuple[WireDialect, ...] = ("telnyx", "plivo", "vonage", "exotel", "openai-realtime")


@dataclass(frozen=True, slots=True)
class WirePlan:
    dialect: WireDialect
    send_mode: SendMode
    turns: tuple[TurnPlan, ...]
    caller_gap_ms: float = 700.0
    lead_ms: float = 500.0
    tail_ms: float = 1500.0
    frame_ms: int = 20
    burst_chunk_ms: int = 200
    burst_speedup: float = 10.0
    jitter_ms: float = 2.0
    seed: int = 0
    # OpenAI Realtime only.
    input_format: str = "pcm16"  # pcm16, g711_ulaw or g711_alaw (GA names are sent unless beta)
    output_format: str = "pcm16"
    beta: bool = False
    vad_detect_ms: float = 120.0
    vad_prefix_ms: float = 300.0
    vad_silence_ms: float = 500.0
    claim_offset_ms: float = 0.0
    tool_every: int = 0  # every n-th turn (0: none) starts its answer with a function call
    tool_latency_ms: float = 250.0
    telnyx_encoding: str = "PCMU"  # Telnyx only: PCMU or PCMA, both directions


@dataclass(frozen=True, slots=True)
class TurnTruth:
    caller_onset_ns: int
    caller_offset_ns: int
    agent_onset_ns: int  # first audible agent speech, on the playout timeline
    ttfs_ns: int
    barge_onset_ns: int | None = None  # when the NEXT caller speech barged in on this answer
    stop_ns: int | None = None  # end of audible agent audio after that barge-in
    reaction: Reaction | None = None


@dataclass(slots=True)
class ScriptedCall:
    messages: list[tuple[int, Direction, bytes | str]]
    truth: list[TurnTruth]
    end_ns: int
    sample_rate_hz: int
    wire_call_id: str | None = None
    meta: dict[str, object] = field(default_factory=dict)
