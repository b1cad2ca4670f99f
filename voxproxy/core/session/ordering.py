"""The two directions' finished spurts and the agent's flushes, handed to the turn machine
in time order, and only once nothing earlier can still appear (the watermark). Sans-I/O;
:class:`~voxproxy.core.session.call.CallSession` calls these on each pump and at the end."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence

from voxproxy.core.analysis.vad import SpeechDetector
from voxproxy.core.analysis.vadconfig import VadConfig
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT
from voxproxy.core.session.evidence import Evidence
from voxproxy.core.timebase import NS_PER_MS
from voxproxy.core.turns import FlushMark, TurnMachine


def watermark(
    now: int, max_caller_chunk_ns: int, vad: VadConfig, detectors: Sequence[SpeechDetector | None]
) -> int:
    """Nothing that starts before this time can still appear."""
    slack = (2 * vad.onset_lookback_ms + vad.frame_ms) * NS_PER_MS  # found, walked again
    marks = [now - max_caller_chunk_ns - slack]
    for det in detectors:
        if det is not None and det.speaking:
            settled = det.settled_ns()
            if settled is not None:
                marks.append(settled)
    return min(marks)


def feed_turns(
    caller: SpeechDetector | None,
    agent: SpeechDetector | None,
    flushes: deque[FlushMark],
    up_to: int,
    evidence: Evidence,
    turns: TurnMachine,
) -> int:
    """Hand over, in time order, every spurt and flush starting at or before ``up_to``.
    Returns how many caller spurts were noise (no pitch: a cough or a bang, not a turn)."""
    noise = 0
    heap: list[tuple[int, int, int]] = []
    if caller is not None and caller.spurts:
        heap.append((caller.spurts[0].onset_ns, 1, 0))
    if agent is not None and agent.spurts:
        heap.append((agent.spurts[0].onset_ns, 2, 1))
    if flushes:
        heap.append((flushes[0].t_ns, 0, 2))
    heapq.heapify(heap)
    while heap and heap[0][0] <= up_to:
        _, _, which = heapq.heappop(heap)
        if which == 0:
            assert caller is not None
            spurt = caller.spurts.popleft()
            evidence.note_spurt(CALLER_TO_AGENT, spurt)
            if spurt.voiced:
                turns.caller_spurt(spurt)
            else:
                noise += 1
            if caller.spurts:
                heapq.heappush(heap, (caller.spurts[0].onset_ns, 1, 0))
        elif which == 1:
            assert agent is not None
            agent_spurt = agent.spurts.popleft()
            evidence.note_spurt(AGENT_TO_CALLER, agent_spurt)
            turns.agent_spurt(agent_spurt)
            if agent.spurts:
                heapq.heappush(heap, (agent.spurts[0].onset_ns, 2, 1))
        else:
            turns.flush(flushes.popleft())
            if flushes:
                heapq.heappush(heap, (flushes[0].t_ns, 0, 2))
    return noise
