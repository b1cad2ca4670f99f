"""A scripted caller's script: the steps it follows, and the noise bed under its audio."""

from __future__ import annotations

from dataclasses import dataclass

from voxproxy.clips import Clip


@dataclass(frozen=True, slots=True)
class Say:
    clip: Clip
    gain_db: float = 0.0


@dataclass(frozen=True, slots=True)
class Silence:
    ms: float


@dataclass(frozen=True, slots=True)
class WaitAgentStart:
    timeout_ms: float = 10000.0


@dataclass(frozen=True, slots=True)
class WaitAgentEnd:
    quiet_ms: float = 600.0  # agent silent this long counts as done
    timeout_ms: float = 30000.0
    start_timeout_ms: float = 10000.0  # how long to wait for the agent to begin


@dataclass(frozen=True, slots=True)
class BargeIn:
    """Wait until the agent speaks, let it talk ``after_ms``, then say ``clip`` over it."""

    after_ms: float
    clip: Clip
    timeout_ms: float = 10000.0


@dataclass(frozen=True, slots=True)
class Interject:
    """Wait until the agent speaks, let it talk ``after_ms``, then make a noise (a cough,
    a door) over it. Recorded as noise, not speech: a good agent keeps talking."""

    after_ms: float
    clip: Clip
    timeout_ms: float = 10000.0


@dataclass(frozen=True, slots=True)
class NoiseBed:
    """Background noise under everything the caller sends, at ``snr_db`` below speech.

    The speech level is the active level of the caller's clips (RMS over their true
    speech segments); the bed loops."""

    clip: Clip
    snr_db: float


Step = Say | Silence | WaitAgentStart | WaitAgentEnd | BargeIn | Interject
