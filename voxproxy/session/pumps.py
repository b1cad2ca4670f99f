"""The pumps of many calls due in one turn of the measurement queue, their energies in
one numpy pass.

At each pump a call analyses its two directions' new audio; the energies of those
batches (every 1 ms window's and frame's dB, :func:`batch_energies`) cost mostly numpy's
per-call work, paid again by every call. While the proxy's measurement queue measures a
group of calls' queued messages (``voxproxy/proxy/measuring.py``), it holds a
:class:`PumpGroup` open: a call whose pump falls due hands its two batches to the group
and stops there (its next messages wait for the pump: the queue visits the other calls);
when every call has measured up to its pump (or enough pumps wait), :meth:`PumpGroup.run`
computes all the batches' energies in one pass per shape and hands each call its own; a
call's next input finishes its pump with them (the walks stay in the queue's budgeted
slices, call by call).

The figures are the ones each pump gives alone: every operation of the pass is
elementwise or per window, so each batch gets the values it had alone, and a pump's
analysis, done later, still comes before anything else of its call (a call given input
while its pump waits finishes that pump alone first: ``CallSession.finish_pump``). The
measurement core reads no clock: when the work is done does not change what it finds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from voxproxy.analysis.together import energies_together

if TYPE_CHECKING:  # annotations only (the session module imports this one's name)
    from voxproxy.analysis.vad import SpeechDetector
    from voxproxy.events import Pcm
    from voxproxy.session.call import CallSession


class PumpGroup:
    """Pumps waiting for one energies pass. ``open``: calls may leave their pump here
    (the measurement queue opens it for a turn, and runs it before the turn ends)."""

    def __init__(self) -> None:
        self.open = False
        self._due: list[CallSession] = []
        self.passes = 0  # passes that finished more than one call's pump
        self.pumps = 0  # pumps finished by a pass

    def add(self, session: CallSession) -> None:
        self._due.append(session)

    def __len__(self) -> int:
        return len(self._due)

    def run(self) -> None:
        """Make every waiting pump's energies: one pass per batch shape, each call handed
        its own. Never raises (a failed pass leaves each call to compute its own)."""
        due = self._due
        if not due:
            return
        self._due = []
        shapes: dict[tuple[int, int], tuple[SpeechDetector, list[CallSession]]] = {}
        for session in due:
            if not session.pump_due:  # (finished alone meanwhile)
                continue
            det = session.pump_detector()
            shape = det.energy_shape
            found = shapes.get(shape)
            if found is None:
                shapes[shape] = (det, [session])
            else:
                found[1].append(session)
        for det, sessions in shapes.values():
            batches: list[Pcm] = []
            for session in sessions:
                caller, agent = session.pump_batches()
                batches.append(caller)
                batches.append(agent)
            try:
                energies = energies_together(det, batches)
            except Exception:
                continue  # (each call computes its own when it goes on)
            if len(sessions) > 1:
                self.passes += 1
                self.pumps += len(sessions)
            for i, session in enumerate(sessions):
                session.pump_ready((energies[2 * i], energies[2 * i + 1]))
