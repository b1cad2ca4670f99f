"""What one scripted call records: its own ground truth and what it heard, sent and received."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from voxproxy.core.timebase import NS_PER_S

if TYPE_CHECKING:
    from voxproxy.core.analysis.vad import SpeechDetector


@dataclass(slots=True)
class SpeechTruth:
    """One ``Say``: when its speech truly started and ended, on this process's clock."""

    clip: str
    onset_ns: int
    offset_ns: int
    barge_in: bool = False
    text: str = ""  # the clip's reference text (what the caller truly said)


@dataclass(slots=True)
class NoiseTruth:
    """One ``Interject``: the noise's true extent."""

    clip: str
    onset_ns: int
    offset_ns: int


@dataclass(slots=True)
class AgentChunk:
    """A run of agent audio, contiguous in the stream and on the playout timeline (the
    messages of one run are one chunk: whole nanoseconds per run, so every sample's play
    time is the one the messages apart would give; a long call keeps few objects)."""

    stream_pos: int  # agent audio samples received before this chunk
    n: int
    play_ns: int  # start on the caller's playout timeline
    arrival_ns: int  # of its first message
    item_id: str | None = None  # openai-realtime: the audio item it belongs to


@dataclass(slots=True)
class CallRecord:
    t0_ns: int = 0  # capture time of the caller's first sample
    speech: list[SpeechTruth] = field(default_factory=list)
    noises: list[NoiseTruth] = field(default_factory=list)
    agent_chunks: list[AgentChunk] = field(default_factory=list)
    agent_rate_hz: int = 0
    flushes: list[int] = field(default_factory=list)  # arrival times of flushes
    agent_spurts: list[tuple[int, int]] = field(default_factory=list)  # caller-side VAD
    messages_sent: list[bytes | str] = field(default_factory=list)
    messages_received: list[bytes | str] = field(default_factory=list)
    close_code: int | None = None
    error: str | None = None
    pacing_lag_ns: list[int] = field(default_factory=list)
    steps: list[tuple[str, int, int]] = field(default_factory=list)  # (action, start, end)
    # openai-realtime: (sent, item id, audio_end_ms claimed) of each truncate, and
    # (call id, function_call_arguments.done arrival, function_call_output sent) of each call.
    truncations: list[tuple[int, str, int]] = field(default_factory=list)
    tool_calls: list[tuple[str, int, int]] = field(default_factory=list)
    # What the agent reported it heard (or said): (arrival, role, text, final), in order.
    transcripts: list[tuple[int, str, str, bool]] = field(default_factory=list)

    def hear_agent(self, vad: SpeechDetector, now_ns: int, final: bool = False) -> bool:
        """Advance the caller's detector of the agent to ``now_ns`` (``final``: to the
        end of the call) and record the talk-spurts it closed; whether the agent is
        audible now."""
        if final:
            vad.finish(now_ns)
        else:
            vad.advance(now_ns)
        while vad.spurts:
            s = vad.spurts.popleft()
            self.agent_spurts.append((s.onset_ns, s.offset_ns))
        return vad.speaking

    def play_time(self, stream_pos: int) -> int | None:
        """When agent audio sample ``stream_pos`` played (None if it never did)."""
        for c in self.agent_chunks:
            if c.stream_pos <= stream_pos < c.stream_pos + c.n:
                return c.play_ns + (stream_pos - c.stream_pos) * NS_PER_S // self.agent_rate_hz
        return None
