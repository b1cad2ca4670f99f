"""A call's queued messages measured in one call into the core: :func:`measure`.

The proxy's measurement queue (``voxproxy/proxy/measuring.py``) visits each call with a
backlog once a group and measures several of its messages. Measured one by one from the
queue, each message cost three interpreted calls around :meth:`CallSession.on_message`
(docs/performance.md, "The compiled build"); this loop runs in the compiled core
instead. It is the same as calling ``on_message`` (or ``on_event``) on each item in
turn: the figures do not change. What the shell must do after a batch comes back as
data (:class:`BatchResult`), so that the queue's visit to a call is one call into the
core and back.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import cast

from voxproxy.core.events import Audio, Direction, StageMark, ToolEvent
from voxproxy.core.session.call import CallSession

# A queued item: a message ``(direction, payload, t_ns, queued_ns)``, or an event from
# outside the media ``(None, event, t_ns, queued_ns)``: ``t_ns`` is when it arrived (the
# time measured), ``queued_ns`` when the proxy queued it (how late its measurement is).
Item = tuple[object, object, int, int]


class BatchResult:
    """What a batch tells the shell to do, as data: how many messages it shed, when the
    last one that carried audio arrived (the idle timer's, -1: none), and the message
    whose wire ids named the call, when one did (the shell then registers the call
    under those ids, for the event API, before the call's next items are measured)."""

    __slots__ = ("last_audio_ns", "named_by", "shed")

    def __init__(self) -> None:
        self.shed = 0
        self.last_audio_ns = -1
        self.named_by: bytes | str | None = None


def measure(
    session: CallSession,
    items: deque[Item],
    limit: int,
    cpu_ns: Callable[[], int],
    stop_at: int,
    shed_before: int,
) -> BatchResult:
    """Measure items from the left of ``items``: at most ``limit``, and none after
    ``cpu_ns()`` reaches ``stop_at`` (at least one). A message queued before
    ``shed_before`` is shed (``CallSession.on_message(shed=True)``). The batch stops early
    after a message that named the call (:attr:`BatchResult.named_by`) or left the
    session's pump due (its next items wait for the group's pass)."""
    result = BatchResult()
    named = session.wire_call_id_hash is not None
    measured = 0
    while items and measured < limit:
        direction, payload, t_ns, queued_ns = items.popleft()
        measured += 1
        if direction is None:
            session.on_event(cast(ToolEvent | StageMark, payload))
        else:
            late = queued_ns < shed_before
            if late:
                result.shed += 1
            events = session.on_message(
                cast(Direction, direction), cast(bytes | str, payload), t_ns, shed=late
            )
            for ev in events:
                if type(ev) is Audio:
                    result.last_audio_ns = t_ns
                    break
            if not named and session.wire_call_id_hash is not None:
                result.named_by = cast(bytes | str, payload)
                break
            if session.pump_due:
                break  # its pump waits for the group's pass: so do its next items
        if cpu_ns() >= stop_at:
            break
    return result
