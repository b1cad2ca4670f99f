"""What a :class:`~voxproxy.core.session.CallSession` can be watched through: every input its
shell hands it, as it is handed.

A capture of the proxy's calls (``voxproxy proxy --capture``, :mod:`voxproxy.captures`)
is a :class:`SessionTap`: set as ``session.tap``, it is told each message, each frame of
audio, each event, the agent's answer, each anomaly and error the shell notes, and the
close, with the arrival times the session was given, so that replaying them into a new
session (``voxproxy analyze``) gives the receipt the live one gave. Inputs the session
makes itself (its own failures, the events its decoder finds) are not told: the replay
makes them again. A tap must never raise, and must stay cheap: it is on the
per-message path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only
    from voxproxy.core.events import Audio, Direction, StageMark, ToolEvent
    from voxproxy.core.receipt import CloseInfo


class SessionTap(Protocol):
    """Told every input of one session. ``disabled``: the session's
    ``measurement_disabled`` when the input came (a shell sets it when measurement
    falls too far behind or cannot be set up: the replay sets it at the same point)."""

    def message(
        self, direction: Direction, payload: bytes | str, t_ns: int, shed: bool, disabled: bool
    ) -> None: ...

    def audio(self, audio: Audio, wire_bytes: int, disabled: bool) -> None: ...

    def event(self, ev: ToolEvent | StageMark) -> None: ...

    def upstream(self, t_ns: int) -> None: ...

    def anomaly(self, kind: str, count: int) -> None: ...

    def unmeasured(self, direction: Direction, messages: int, wire_bytes: int) -> None: ...

    def error(self) -> None: ...

    def closed(
        self, end_ns: int, terminal: str, close: CloseInfo, dialect: str | None, disabled: bool
    ) -> None: ...
