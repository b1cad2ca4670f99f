"""Which way a message travels through the proxy: the one type every layer of the
measurement vocabulary shares (:mod:`voxproxy.core.events` re-exports it; the compiled
:mod:`voxproxy.core.audio.event` needs it too, so it lives in a module that imports neither).
"""

from __future__ import annotations

import enum


class Direction(enum.IntEnum):
    """Which way a message travels through the proxy."""

    CALLER_TO_AGENT = 0
    AGENT_TO_CALLER = 1

    @property
    def short(self) -> str:
        return "caller" if self is Direction.CALLER_TO_AGENT else "agent"


CALLER_TO_AGENT = Direction.CALLER_TO_AGENT
AGENT_TO_CALLER = Direction.AGENT_TO_CALLER
