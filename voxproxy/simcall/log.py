"""What the mock agent did on each connection, for tests to compare with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from voxproxy.core.analysis.vad import Spurt


@dataclass(slots=True)
class ResponseLog:
    """One clip the agent started to say.

    Times are ``time.monotonic_ns()``. ``t0_ns`` is when the first sent sample
    plays (at the far end, playing on arrival); ``speech_ns`` is when the clip's
    speech onset plays. Leading silence may be skipped (``skipped_samples``)
    when the VAD closed the caller's turn too late for the planned delay.
    """

    index: int  # 1-based on this connection; twilio marks are named resp-<index>
    clip: str
    greeting: bool
    stream_pos: int  # agent samples sent on this connection before this response
    caller_offset_ns: int | None  # the VAD offset this answers (None for a greeting)
    planned_delay_ms: float  # delay with jitter (0 for a greeting)
    actual_delay_ms: float | None  # speech_ns - caller_offset_ns
    skipped_samples: int
    t0_ns: int
    speech_ns: int
    first_send_ns: int | None = None
    last_send_ns: int | None = None
    interrupted_ns: int | None = None  # VAD saw the caller while the agent talked
    stopped_ns: int | None = None  # sending stopped early (barge-in, stall or close)
    flushed: bool = False
    flush_ns: int | None = None
    samples_sent: int = 0
    total_samples: int = 0  # samples the response would send uninterrupted
    mark: str | None = None  # twilio mark sent after the last chunk
    # Each audio message: its stream position, its samples, and this process's clock just
    # before and just after its write. On loopback the proxy's host received it between the
    # two: the accuracy benchmark places the agent's truth at the proxy's vantage with them.
    sends: list[tuple[int, int, int, int]] = field(default_factory=list)


@dataclass(slots=True)
class TaskLog:
    """The testbench task of one call (:mod:`voxproxy.mockagent.task`)."""

    script: str  # the name of the task script the request path chose
    turns: int = 0  # voiced caller turns the task was told of
    faults: list[str] = field(default_factory=list)  # fault switches that changed what it did
    events: list[dict[str, Any]] = field(default_factory=list)  # every event, raw, in order
    backend: dict[str, Any] = field(default_factory=dict)  # the record when the call ended
    errors: list[str] = field(default_factory=list)  # internal errors of its timers


@dataclass(slots=True)
class CallLog:
    """One websocket connection (or refused handshake) and everything on it."""

    index: int
    path: str  # request path with query
    headers: dict[str, str]  # lower-cased names; repeated headers joined with ", "
    subprotocol: str | None
    status: int = 101  # the handshake's HTTP status (refuse_status when refused)
    accepted_ns: int | None = None
    ended_ns: int | None = None
    stream_sid: str | None = None  # twilio: from the caller's start message
    caller_rate_hz: int | None = None
    responses: list[ResponseLog] = field(default_factory=list)
    caller_spurts: list[Spurt] = field(default_factory=list)  # caller turns seen by the VAD
    noise_spurts: int = 0  # unvoiced caller sounds (coughs, doors) it did not answer
    ignored_spurts: int = 0  # turns that overlapped agent speech under barge_in="never"
    close_code: int | None = None  # received from the caller (1006: none)
    close_reason: str | None = None
    close_sent_code: int | None = None  # sent by the agent, if it sent a close frame
    close_sent_reason: str | None = None
    faults: list[str] = field(default_factory=list)  # faults that fired, in order
    errors: list[str] = field(default_factory=list)  # internal errors caught on this call
    caller_messages: list[tuple[bool, bytes | str]] = field(default_factory=list)
    sent_messages: list[tuple[bool, bytes | str]] = field(default_factory=list)
    # Transcripts: (caller turn, the clip the agent recognized or None, its match score).
    heard: list[tuple[int, str | None, float]] = field(default_factory=list)
    task: TaskLog | None = None  # the testbench task, when a script ran on this call

    @property
    def samples_sent(self) -> int:
        return sum(r.samples_sent for r in self.responses)
