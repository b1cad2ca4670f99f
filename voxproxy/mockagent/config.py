"""Settings of the mock agent, and the agent audio it speaks."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from voxproxy.clips import Clip, load_clips, load_corpus
from voxproxy.core.analysis.vad import VadConfig
from voxproxy.core.audio.g711 import pcm_to_ulaw
from voxproxy.core.audio.resample import resample_linear
from voxproxy.core.dialects.openai_realtime import parse_format
from voxproxy.core.errors import ConfigError, FixtureError
from voxproxy.core.events import Pcm
from voxproxy.simcall.script import TaskFault, TaskScript

Dialect = Literal["raw", "twilio", "openai-realtime"]
SendMode = Literal["paced", "burst"]
BargeIn = Literal["flush", "silent", "never"]

TWILIO_RATE_HZ = 8000


def default_responses() -> tuple[str, ...]:
    """Every English agent clip of the fixtures, in manifest order."""
    return tuple(
        c.name
        for c in load_clips().values()
        if c.role == "agent" and c.name.startswith("agent_") and not c.name.startswith("agent_es")
    )


@dataclass(frozen=True, slots=True)
class MockAgentConfig:
    """How the mock agent talks, answers, reacts to barge-in and fails."""

    dialect: Dialect = "raw"
    sample_rate_hz: int = 16000  # raw only; twilio is always 8 kHz μ-law
    delay_ms: float = 600.0  # caller speech offset -> agent speech onset
    jitter_ms: float = 0.0  # uniform in [-jitter_ms, +jitter_ms]
    send_mode: SendMode = "paced"
    paced_chunk_ms: int = 20
    burst_chunk_ms: int = 200
    burst_speedup: float = 10.0
    barge_in: BargeIn = "flush"
    noise_is_speech: bool = False  # fault: yield to (and answer) a cough or a door
    reaction_ms: float = 150.0
    # Clip names, from the fixtures (voxproxy.clips.load_clips) or the generalization
    # corpus (load_corpus). None: default_responses(); stored as a tuple.
    responses: Sequence[str] | None = None
    greeting: str | None = None
    marks: bool = True  # twilio only
    # Send only speech: every clip (greeting and responses) cut to its first and last sample
    # of speech, so each response starts directly on speech (nothing is sent between them).
    trim_silence: bool = False
    vary_responses: bool = False  # connection i starts its rotation of responses at the i-th
    # How the agent hears the caller's turns (None: the detector's defaults). A high
    # floor_clamp_dbfs makes an agent whose endpointing ignores a bed of noise under loud
    # speech (the accuracy benchmark's babble class).
    caller_vad: VadConfig | None = None
    transcripts: bool = False  # raw and openai-realtime: report what the agent heard
    transcript_text: Callable[[int], str] | None = field(default=None, compare=False)
    # Without transcript_text, the agent recognizes which caller clip each turn was
    # (voxproxy.mockagent.hearing) and reports this text for it; clips not listed are
    # heard perfectly. None: the built-in imperfect set (hearing.DEFAULT_HYPOTHESES).
    transcript_hypotheses: Mapping[str, str] | None = field(default=None, compare=False)
    announce_rate: bool = False  # raw only: send {"type": "start", "sample_rate": ...} first
    subprotocols: Sequence[str] | None = None  # None: accept the first one the client offers
    compression: bool = False  # permessage-deflate
    # Faults, each measured from the moment the connection is accepted.
    refuse_status: int | None = None
    close_after_ms: float | None = None
    close_code: int = 1011
    stall_after_ms: float | None = None
    garbage_after_ms: float | None = None
    drop_after_ms: float | None = None
    seed: int = 0  # connection i draws its jitter from random.Random(f"{seed}:{i}")
    # Tool events (MEASUREMENT.md 5): with post_events_url set, each response runs a simulated
    # tool and posts its events to the proxy's event API, naming the call by the
    # X-Voxproxy-Call header of the handshake (no header: nothing is posted).
    post_events_url: str | None = None  # the event API's base URL, e.g. http://127.0.0.1:8767
    events_token: str | None = None
    tool_name: str = "lookup_order"
    tool_latency_ms: float = 300.0  # tool.started (as the answer starts) -> tool.finished
    tool_cancel_on_barge_in: bool = True  # post tool.cancelled when a barge-in stops the answer
    # openai-realtime: the agent is an OpenAI Realtime server (voxproxy.mockagent.realtime).
    realtime_format: str = "pcm16"  # output format until a session.update says otherwise
    realtime_beta: bool = False  # beta event names (response.audio.delta, ...)
    realtime_tool_turns: Sequence[int] = ()  # caller turns (0-based) answered by a function call
    realtime_followup_ms: float = 300.0  # the client's response.create -> the answer's onset
    # The outcome testbench (voxproxy.mockagent.task): task scripts by name, a test/bench-only
    # channel; a call whose request path has a segment naming one runs it instead of the
    # per-answer tool above (its events are posted the same way, to post_events_url).
    scripts: Mapping[str, TaskScript] | None = field(default=None, compare=False)
    tool_timeout_ms: float = 2500.0  # no answer this long after tool.started: a timeout
    tool_max_attempts: int = 3
    # Task faults, each breaking one thing the correct agent does (see voxproxy.mockagent.task):
    fault_stale_args: bool = False  # build arguments from the state as the build began
    fault_no_cancel: bool = False  # never cancel a call in flight (barge-in, correction, "don't")
    fault_unchecked_result: bool = False  # take any answer as success; never read back
    fault_unsafe_retry: bool = False  # no idempotency keys; a new operation id on each retry
    fault_confirm_before_result: bool = False  # confirm on an async tool's "pending" ack

    def __post_init__(self) -> None:
        if self.dialect not in ("raw", "twilio", "openai-realtime"):
            raise ConfigError(
                f"mock agent dialect must be raw, twilio or openai-realtime, got {self.dialect!r}"
            )
        if parse_format(self.realtime_format) is None:
            raise ConfigError(f"unknown realtime_format {self.realtime_format!r}")
        object.__setattr__(self, "realtime_tool_turns", tuple(self.realtime_tool_turns))
        if self.dialect == "raw" and self.sample_rate_hz not in (8000, 16000):
            raise ConfigError(
                f"raw mock agent rate must be 8000 or 16000, got {self.sample_rate_hz}"
            )
        if self.send_mode not in ("paced", "burst"):
            raise ConfigError(f"send_mode must be paced or burst, got {self.send_mode!r}")
        if self.barge_in not in ("flush", "silent", "never"):
            raise ConfigError(f"barge_in must be flush, silent or never, got {self.barge_in!r}")
        if self.delay_ms < 0 or self.jitter_ms < 0 or self.reaction_ms < 0:
            raise ConfigError("delay_ms, jitter_ms and reaction_ms must not be negative")
        if self.paced_chunk_ms <= 0 or self.burst_chunk_ms <= 0 or self.burst_speedup <= 0:
            raise ConfigError("chunk sizes and burst_speedup must be positive")
        if self.refuse_status is not None and not (
            200 <= self.refuse_status <= 599 and self.refuse_status != 101
        ):
            raise ConfigError(f"refuse_status must be an HTTP status, got {self.refuse_status}")
        code = self.close_code
        if not (1000 <= code <= 1003 or 1007 <= code <= 1014 or 3000 <= code <= 4999):
            raise ConfigError(f"close_code {self.close_code} cannot be sent in a close frame")
        for name in ("close_after_ms", "stall_after_ms", "garbage_after_ms", "drop_after_ms"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"{name} must not be negative")
        responses = default_responses() if self.responses is None else tuple(self.responses)
        if not responses:
            raise ConfigError("the mock agent needs at least one response clip")
        object.__setattr__(self, "responses", responses)
        if self.subprotocols is not None:
            object.__setattr__(self, "subprotocols", tuple(self.subprotocols))
        if self.post_events_url is not None and not self.events_token:
            raise ConfigError("post_events_url needs events_token")
        if self.tool_latency_ms < 0:
            raise ConfigError("tool_latency_ms must not be negative")
        if self.tool_timeout_ms <= 0 or self.tool_max_attempts < 1:
            raise ConfigError("tool_timeout_ms must be positive and tool_max_attempts at least 1")

    @property
    def agent_rate_hz(self) -> int:
        """The rate of the audio the agent sends."""
        if self.dialect == "openai-realtime":
            fmt = parse_format(self.realtime_format)
            assert fmt is not None  # checked in __post_init__
            return fmt.sample_rate_hz
        return TWILIO_RATE_HZ if self.dialect == "twilio" else self.sample_rate_hz

    @property
    def response_names(self) -> tuple[str, ...]:
        assert self.responses is not None  # set in __post_init__
        return tuple(self.responses)

    def with_faults(self, faults: Iterable[TaskFault]) -> MockAgentConfig:
        """This agent with each of ``faults`` switched on (:func:`fault_switch`)."""
        switches: dict[str, Any] = {fault_switch(fault): True for fault in faults}
        return replace(self, **switches)  # (a name that is no field: TypeError)


def fault_switch(fault: TaskFault) -> str:
    """The :class:`MockAgentConfig` field that turns a task fault on: ``fault_<name>``, and
    ``noise_is_speech`` for the fault of that name (the switch is older than the others)."""
    return fault if fault == "noise_is_speech" else f"fault_{fault}"


@dataclass(frozen=True, slots=True)
class AgentClip:
    """A clip ready to send: PCM at the agent's rate and its speech onset."""

    name: str
    pcm: Pcm
    sample_rate_hz: int
    onset_sample: int

    def wire_payload(self, start: int, stop: int, dialect: Dialect) -> bytes:
        """Samples ``[start, stop)`` as the wire carries them (PCM bytes or μ-law)."""
        chunk = self.pcm[start:stop]
        if dialect == "twilio":
            return pcm_to_ulaw(chunk)
        return chunk.astype("<i2", copy=False).tobytes()


def halve_rate(pcm: Pcm) -> Pcm:
    """Decimate by two by averaging each pair of samples."""
    n = pcm.size - pcm.size % 2
    pairs = pcm[:n].astype(np.int32).reshape(-1, 2)
    out: Pcm = ((pairs[:, 0] + pairs[:, 1]) // 2).astype(np.int16)
    return out


def prepare_clip(clip: Clip, rate_hz: int) -> AgentClip:
    """Bring a 16 kHz fixture clip to ``rate_hz`` (16000 or 8000)."""
    if clip.sample_rate_hz == rate_hz:
        pcm = clip.pcm
    elif clip.sample_rate_hz == 2 * rate_hz:
        pcm = halve_rate(clip.pcm)
    elif rate_hz == 24000:  # OpenAI Realtime pcm16
        pcm = resample_linear(clip.pcm, clip.sample_rate_hz, rate_hz)
    else:
        raise ConfigError(
            f"clip {clip.name!r} is at {clip.sample_rate_hz} Hz; cannot bring it to {rate_hz} Hz"
        )
    onset = round(clip.onset_ms * rate_hz / 1000) if clip.segments_ms else 0
    return AgentClip(clip.name, pcm, rate_hz, min(onset, pcm.size))


def trim_to_speech(clip: Clip) -> Clip:
    """``clip`` cut to its first and last sample of speech, its edges moved with it."""
    if not clip.segments_ms:
        return clip
    rate = clip.sample_rate_hz
    start = min(clip.pcm.size, math.floor(clip.onset_ms * rate / 1000))
    end = max(start, min(clip.pcm.size, math.ceil(clip.offset_ms * rate / 1000)))
    if start == 0 and end == clip.pcm.size:
        return clip
    cut_ms = 1000.0 * start / rate
    length_ms = 1000.0 * (end - start) / rate
    segments = tuple(
        (max(0.0, a - cut_ms), min(length_ms, b - cut_ms)) for a, b in clip.segments_ms
    )
    return replace(clip, pcm=clip.pcm[start:end].copy(), segments_ms=segments, trimmed=True)


def response_clip(name: str, trim_silence: bool = False) -> Clip:
    """The clip the agent says for ``name``: a fixture clip, else a corpus clip; cut to its
    speech with ``trim_silence``. Unknown names raise ConfigError."""
    try:
        source = load_clips().get(name)
        if source is None:
            source = load_corpus().get(name)
    except FixtureError as exc:
        raise ConfigError(str(exc)) from exc
    if source is None:
        raise ConfigError(f"no fixture or corpus clip named {name!r}")
    return trim_to_speech(source) if trim_silence else source


def prepare_clips(config: MockAgentConfig) -> dict[str, AgentClip]:
    """Every clip the agent may say, at its rate. Unknown names raise ConfigError."""
    names = list(config.response_names)
    if config.greeting is not None:
        names.append(config.greeting)
    out: dict[str, AgentClip] = {}
    for name in names:
        source = response_clip(name, config.trim_silence)
        out[name] = prepare_clip(source, config.agent_rate_hz)
    return out
