"""A call's queued messages measured in one call.

The proxy's measurement queue (``voxproxy/proxy/measuring.py``) visits each call with a
backlog once a group and measures several of its messages. Measured one by one from the
queue, each message cost three interpreted calls around :meth:`CallSession.on_message`
(docs/performance.md, "The compiled build"); this loop runs in the compiled core
instead. It is the same as calling ``on_message`` (or ``on_event``) on each item in
turn: the figures do not change.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import cast

from voxproxy.events import Audio, Direction, StageMark, ToolEvent
from voxproxy.session.call import CallSession

# A queued item: a message ``(direction, payload, t_ns, queued_ns)``, or an event from
# outside the media ``(None, event, t_ns, queued_ns)``: ``t_ns`` is when it arrived (the
# time measured), ``queued_ns`` when the proxy queued it (how late its measurement is).
Item = tuple[object, object, int, int]


def measure_queued(
    session: CallSession,
    items: deque[Item],
    limit: int,
    cpu_ns: Callable[[], int],
    stop_at: int,
    shed_before: int,
) -> tuple[int, int]:
    """Measure items from the left of ``items``: at most ``limit``, and none after
    ``cpu_ns()`` reaches ``stop_at`` (at least one). A message queued before
    ``shed_before`` is shed (``CallSession.on_message(shed=True)``). Returns the messages
    shed and the arrival of the last message that carried audio (-1: none)."""
    shed = 0
    last_audio = -1
    measured = 0
    while items and measured < limit:
        direction, payload, t_ns, queued_ns = items.popleft()
        measured += 1
        if direction is None:
            session.on_event(cast(ToolEvent | StageMark, payload))
        else:
            late = queued_ns < shed_before
            if late:
                shed += 1
            events = session.on_message(
                cast(Direction, direction), cast(bytes | str, payload), t_ns, shed=late
            )
            for ev in events:
                if type(ev) is Audio:
                    last_audio = t_ns
                    break
            if session.pump_due:
                break  # its pump waits for the group's pass: so do its next items
        if cpu_ns() >= stop_at:
            break
    return shed, last_audio
