"""Budgets and vocabularies the property-based tests share (dialect decoders, the session
core, the proxy's relay): bounded example counts, ``VOXPROXY_FUZZ_SCALE=20`` multiplies
every budget for a deeper search."""

from __future__ import annotations

import os
import typing

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Event

DIALECTS = ["raw", "twilio", "telnyx", "plivo", "vonage", "exotel", "openai-realtime", "auto"]
EVENT_TYPES = typing.get_args(Event)
MS = 1_000_000
DIRECTIONS = st.sampled_from([CALLER_TO_AGENT, AGENT_TO_CALLER])
SCALE = max(1, int(os.environ.get("VOXPROXY_FUZZ_SCALE", "1")))


def bounded(examples: int) -> settings:
    """At most ``examples`` examples (times the scale), no deadline: the file runs in seconds."""
    return settings(
        max_examples=examples * SCALE,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
