"""A bare :class:`~voxproxy.core.session.call.CallSession` as the measurement queue sees a
call (:class:`~voxproxy.proxy.measuring.Measured`), for offline runs of the queue: the
measurement benchmark and the tests of many calls' pumps in one pass.

Its queued items are measured in the compiled core's loop (``session/batch.py``) as
the proxy's own call (``proxy/websocket.CallContext``) measures them, and it gives up
the same way (:func:`~voxproxy.proxy.measuring.give_up_measuring`); it has no event
API, idle timer or log, and a failure of the session is raised (a strict session) or
counted by the session itself.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from voxproxy.core.session.batch import measure
from voxproxy.core.session.call import CallSession
from voxproxy.proxy.measuring import Queued, give_up_measuring


class QueuedSession:
    """One session and its queued items (``backlog``: ``None`` while not queued)."""

    def __init__(self, session: CallSession) -> None:
        self.session = session
        self.backlog: deque[Queued] | None = None

    @property
    def pump_due(self) -> bool:
        return self.session.pump_due

    def measure_queued(
        self, limit: int, cpu_ns: Callable[[], int], stop_at: int, shed_before: int
    ) -> int:
        backlog = self.backlog
        assert backlog is not None
        return measure(self.session, backlog, limit, cpu_ns, stop_at, shed_before).shed

    def backlog_drained(self) -> None:
        pass

    def give_up(self) -> None:
        give_up_measuring(self.session, self.backlog)
