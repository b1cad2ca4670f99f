"""When the mock agent speaks: its answer to a caller turn, and where that answer
starts, as pure functions of the call's times (``t_ns``, the monotonic clock).

The call (:mod:`voxproxy.mockagent.call`) reads the clock and sends; what it sends
when is decided here: the next response's clip and planned delay
(:func:`next_response`), the first sample it plays and when (:func:`start_of`), and
the pace of its chunks (:func:`pacing`). Sans-I/O: no clock, no socket, no sleep.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

from voxproxy.core.timebase import NS_PER_MS, NS_PER_S
from voxproxy.mockagent.config import AgentClip, MockAgentConfig

LATE_NS = 2 * NS_PER_MS  # a response starting this late keeps its schedule


@dataclass(slots=True)
class Pending:
    """A response waiting for its start time."""

    clip: AgentClip
    greeting: bool
    caller_offset_ns: int | None
    delay_ms: float
    start_ns: int  # when the clip's first sample should play if nothing is skipped
    held: bool = False  # the caller started talking again; wait for that turn to end


@dataclass(frozen=True, slots=True)
class Start:
    """Where a response starts: its first sample played at ``t0_ns`` is ``skip`` samples
    into the clip, and its speech (the clip's onset) is heard at ``speech_ns``."""

    t0_ns: int
    skip: int
    speech_ns: int


def next_response(
    cfg: MockAgentConfig,
    clips: Mapping[str, AgentClip],
    rotation: int,
    rng: random.Random,
    caller_offset_ns: int,
) -> Pending:
    """The answer to a caller turn that ended at ``caller_offset_ns``: the
    ``rotation``-th response clip, its speech due ``delay_ms`` (with jitter) later."""
    names = cfg.response_names
    clip = clips[names[rotation % len(names)]]
    delay_ms = max(0.0, cfg.delay_ms + rng.uniform(-cfg.jitter_ms, cfg.jitter_ms))
    onset_ns = clip.onset_sample * NS_PER_S // clip.sample_rate_hz
    start_ns = caller_offset_ns + round(delay_ms * NS_PER_MS) - onset_ns
    return Pending(clip, False, caller_offset_ns, delay_ms, start_ns)


def start_of(p: Pending, now_ns: int) -> Start:
    """Where response ``p`` starts when its turn comes at ``now_ns``: a greeting at once;
    an answer on its schedule, or, when the turn came late, with leading silence skipped
    so that its speech stays on time (as far as there is silence to skip)."""
    clip = p.clip
    rate = clip.sample_rate_hz
    onset = clip.onset_sample
    t0 = p.start_ns
    skip = 0
    if p.greeting:
        t0 = now_ns
    elif now_ns - p.start_ns > LATE_NS:
        # The turn closed late: skip leading silence to keep the speech on time.
        skip = min(onset, math.ceil((now_ns - p.start_ns) * rate / NS_PER_S))
        t0 = p.start_ns + skip * NS_PER_S // rate
        if skip == onset:
            t0 = max(t0, now_ns)
    speech_ns = t0 + (onset - skip) * NS_PER_S // rate
    return Start(t0, skip, speech_ns)


def pacing(cfg: MockAgentConfig, rate_hz: int) -> tuple[int, int]:
    """(samples per chunk, ns between chunks): real time when paced, else bursts
    ``burst_speedup`` times faster than real time."""
    if cfg.send_mode == "paced":
        return cfg.paced_chunk_ms * rate_hz // 1000, cfg.paced_chunk_ms * NS_PER_MS
    chunk = cfg.burst_chunk_ms * rate_hz // 1000
    return chunk, round(cfg.burst_chunk_ms * NS_PER_MS / cfg.burst_speedup)
