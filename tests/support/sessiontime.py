"""Time passing in a :class:`~voxproxy.core.session.CallSession` with no message: for tests.

No shell of the proxy does this (a call's spurts close and its turns settle on its next
message, or at its close); tests use it to look at a session between messages, so it
reaches into the session's own state."""

from __future__ import annotations

from voxproxy.core.session import CallSession


def advance(session: CallSession, t_ns: int) -> None:
    """Time has passed with no message: let spurts close and turns settle."""
    if session.measurement_disabled or session._closed:
        return
    try:
        if session._due is not None:
            session.finish_pump()
        session._pump(t_ns)
    except Exception:
        session._own_failure()


def next_deadline(session: CallSession) -> int | None:
    """When :func:`advance` next has something to do, if nothing arrives before."""
    if session._due is not None:
        try:
            session.finish_pump()
        except Exception:
            session._own_failure()
    deadlines = [d.deadline_ns() for d in session._detectors if d is not None]
    playout = session._playout
    cursor = playout.cursor_ns if playout is not None else None
    if cursor is not None and cursor > session._now_ns:
        deadlines.append(cursor)
    found = [d for d in deadlines if d is not None]
    return min(found) if found else None
