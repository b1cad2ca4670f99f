"""A session's settings and limits, and the one rounding of its figures to ms."""

from __future__ import annotations

from dataclasses import dataclass, field

from voxproxy.core.analysis.playout import MAX_AHEAD_NS
from voxproxy.core.analysis.vad import VadConfig
from voxproxy.core.timebase import NS_PER_MS
from voxproxy.core.turns import TurnConfig

MAX_MEASUREMENT_ERRORS = 50
MIN_RATE_HZ, MAX_RATE_HZ = 4000, 192_000  # audio rates the core accepts
MAX_TOOL_EVENTS = 1_000  # tool/state/outcome events kept per call (more: events_over_limit)
PUMP_INTERVAL_MS = 100  # how often time-driven work (playout release, VAD, turns) runs
# Caller audio may run this far ahead of the call's time before it is an anomaly and the
# audio beyond is not analysed (jitter, and a burst after a network stall, stay within).
CALLER_AHEAD_TOLERANCE_MS = 2000.0


@dataclass(frozen=True, slots=True)
class SessionConfig:
    vad: VadConfig = field(default_factory=VadConfig)
    turns: TurnConfig = field(default_factory=TurnConfig)
    downstream_offset_ms: float = 0.0
    transport: str = "websocket"
    # "model": agent audio is placed on the playout timeline (MEASUREMENT.md 3); "arrival":
    # a paced transport (WebRTC) where audible time = arrival, the model's identity.
    agent_playout: str = "model"
    # A figure whose uncertainty (the detector's base and bands, plus how late the shell's
    # clock readings near its edges ran) exceeds this is withheld: null, reason "clock_lag".
    max_uncertainty_ms: float = 50.0
    # Agent audio due to play later than this after its arrival keeps only its place on the
    # playout timeline, not its samples: it plays, unanalysed (anomaly agent_audio_ahead).
    agent_queue_ahead_ms: float = MAX_AHEAD_NS / NS_PER_MS


def ms(ns: int | None) -> float | None:
    """Nanoseconds as the receipt's milliseconds (rounded to 0.1 ms), ``None`` kept."""
    return None if ns is None else round(ns / NS_PER_MS, 1)
