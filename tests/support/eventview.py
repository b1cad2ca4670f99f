"""Events as plain tuples, so that tests can compare them (``Audio.pcm`` is a numpy array)."""

from __future__ import annotations

from dataclasses import astuple

from voxproxy.core.events import Audio, Event


def view(event: Event) -> tuple[object, ...]:
    if isinstance(event, Audio):
        return (
            "Audio",
            event.direction,
            tuple(event.pcm.tolist()),
            event.sample_rate_hz,
            event.t_ns,
        )
    return (type(event).__name__, *astuple(event))


def views(events: list[Event]) -> list[tuple[object, ...]]:
    return [view(e) for e in events]
