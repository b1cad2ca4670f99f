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
slices, call by call). The group holds the pumps (:class:`WaitingPump`), not the calls:
a call that ends while its pump waits is freed with it.

The figures are the ones each pump gives alone: every operation of the pass is
elementwise or per window, so each batch gets the values it had alone, and a pump's
analysis, done later, still comes before anything else of its call (a call given input
while its pump waits finishes that pump alone first: ``CallSession.finish_pump``). The
measurement core reads no clock: when the work is done does not change what it finds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from voxproxy.core.analysis.together import energies_together

if TYPE_CHECKING:  # annotations only
    from voxproxy.core.analysis.energies import F32
    from voxproxy.core.analysis.vad import SpeechDetector
    from voxproxy.core.events import Pcm


class WaitingPump:
    """A call's pump whose analysis waits for its group's pass: its time, its two
    directions' batches (whole frames, of ``detector``'s shape), and, once the pass has
    run, their energies (caller's, agent's: windows' and frames' dB). The group holds
    these, never the call."""

    def __init__(self, now: int, caller: Pcm, agent: Pcm, detector: SpeechDetector) -> None:
        self.now = now
        self.caller = caller
        self.agent = agent
        self.detector = detector
        self.energies: tuple[tuple[F32, F32], tuple[F32, F32]] | None = None
        # A pass took it (its energies made, or, if the pass failed, left to the call):
        # it waits no more, so a call parked for it goes on.
        self.passed = False
        self.finished = False  # (finished alone meanwhile: the pass skips it)


class PumpGroup:
    """Pumps waiting for one energies pass. ``open``: calls may leave their pump here
    (the measurement queue opens it for a turn, and runs it before the turn ends)."""

    def __init__(self) -> None:
        self.open = False
        self._due: list[WaitingPump] = []
        self.passes = 0  # passes that made more than one call's pump's energies
        self.pumps = 0  # pumps whose energies a pass made

    def add(self, pump: WaitingPump) -> None:
        self._due.append(pump)

    def __len__(self) -> int:
        return len(self._due)

    def run(self) -> None:
        """Make every waiting pump's energies: one pass per batch shape, each call handed
        its own. Never raises (a failed pass leaves each call to compute its own)."""
        due = self._due
        if not due:
            return
        self._due = []
        shapes: dict[tuple[int, int], tuple[SpeechDetector, list[WaitingPump]]] = {}
        for pump in due:
            pump.passed = True
            if pump.finished:
                continue
            shape = pump.detector.energy_shape
            found = shapes.get(shape)
            if found is None:
                shapes[shape] = (pump.detector, [pump])
            else:
                found[1].append(pump)
        for det, pumps in shapes.values():
            batches: list[Pcm] = []
            for pump in pumps:
                batches.append(pump.caller)
                batches.append(pump.agent)
            try:
                energies = energies_together(det, batches)
            except Exception:
                continue  # (each call computes its own when it goes on)
            if len(pumps) > 1:
                self.passes += 1
                self.pumps += len(pumps)
            for i, pump in enumerate(pumps):
                pump.energies = (energies[2 * i], energies[2 * i + 1])
