"""Turns and barge-ins, from the talk-spurts of both directions (MEASUREMENT.md section 4).

The machine is fed, in time order, finished caller spurts, finished agent
spurts (on the playout timeline) and flushes. The session guarantees the order
with a watermark: nothing is fed until both detectors have settled past it.

Rules, in the words of the contract, with the two choices it leaves open made
explicit:

* A **turn** is a group of caller spurts followed by the agent's response.
  ``ttfs`` runs from the offset of the caller's last spurt before the agent's
  onset to that onset. If the agent starts while the caller is talking again
  after an earlier spurt of the turn had ended, the agent answered that earlier
  spurt (``ttfs`` from its offset, ``talk_over`` = the overlap) and the
  overlapping speech opens the next turn; if no spurt had ended, ``ttfs`` is
  negative and ``talk_over`` holds the overlap.
* Agent spurts closer than ``agent_turn_gap_ms`` with no caller speech between
  them are one **utterance** (sentence pauses are not reprompts). An utterance
  with no caller speech since the previous one is **agent-initiated**
  (a greeting, or a reprompt with ``reprompt_ms`` = the silence before it).
* A **barge-in** is a caller spurt whose onset falls inside an agent spurt, or
  inside a pause of an agent utterance that the agent then resumes while the
  caller is still talking. Its stop is the end of audible agent audio after
  the onset: the time of a flush that cut audible audio, else the offset of the
  last agent spurt of the utterance.
* No agent onset within ``response_timeout_ms`` of the caller's offset is a
  **no-response** turn.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from voxproxy.core.analysis.vad import Spurt
from voxproxy.core.errors import UsageError
from voxproxy.core.timebase import NS_PER_MS


class TurnKind(enum.StrEnum):
    RESPONSE = "response"
    NO_RESPONSE = "no_response"
    AGENT_INITIATED = "agent_initiated"


class BargeOutcome(enum.StrEnum):
    STOPPED = "stopped"
    NOT_STOPPED = "not_stopped"
    NO_AGENT_AUDIO = "no_agent_audio"


class StopEvidence(enum.StrEnum):
    FLUSH = "flush"
    CEASED = "ceased"


@dataclass(frozen=True, slots=True)
class TurnConfig:
    response_timeout_ms: float = 8000.0
    barge_in_window_ms: float = 2000.0
    agent_turn_gap_ms: float = 1000.0


@dataclass(frozen=True, slots=True)
class FlushMark:
    """A flush as the turn machine sees it."""

    t_ns: int
    cut_audible: bool  # audio was playing when the flush arrived


@dataclass(slots=True)
class BargeIn:
    onset_ns: int
    agent_onset_ns: int  # onset of the agent spurt that was talked over
    chain_end_ns: int  # offset of the last agent spurt that kept going over the caller
    flush_ns: int | None = None
    flush_cut_audible: bool = False
    in_pause: bool = False  # the caller started in a pause of the agent's utterance

    def stop_ns(self) -> int:
        """End of audible agent speech after the onset: the end of the talked-over spurts
        (the last speech heard), cut at the flush if the flush came first. A flush that
        falls in a pause of the answer cut silence: the speech had ended at the pause, as
        the truth rule's offset has it (MEASUREMENT.md 2)."""
        flush = self.flush_ns
        if flush is not None and self.flush_cut_audible and flush < self.chain_end_ns:
            return flush
        return self.chain_end_ns

    def evidence(self) -> StopEvidence:
        return StopEvidence.FLUSH if self.flush_ns is not None else StopEvidence.CEASED


@dataclass(slots=True)
class Turn:
    index: int
    kind: TurnKind
    caller_onset_ns: int | None = None
    caller_offset_ns: int | None = None
    agent_onset_ns: int | None = None
    agent_offset_ns: int | None = None
    ttfs_ns: int | None = None
    reason: str | None = None
    talk_over_ns: int | None = None
    reprompt_ns: int | None = None
    barge_in: BargeIn | None = None
    flushes: list[FlushMark] = field(default_factory=list)
    yielded_without_caller_speech: int = 0
    caller_spurts: list[Spurt] = field(default_factory=list)
    closed: bool = False

    @property
    def answered(self) -> bool:
        return self.agent_onset_ns is not None


class TurnPhase(enum.StrEnum):
    """Where the conversation stands between two inputs."""

    START = "start"  # nobody has spoken yet
    CALLER = "caller"  # caller speech waits for (or is talked over by) a response
    CALLER_IN_PAUSE = "caller_in_pause"  # ... and it began in a pause of the agent's utterance
    BARGE_IN = "barge_in"  # ... and it began over agent speech
    AGENT = "agent"  # an agent utterance goes on; no caller speech since it began
    FINISHED = "finished"  # finish() was called: the machine takes no more input


class TurnInput(enum.StrEnum):
    """What the machine is fed; its time is a spurt's onset or a flush's time."""

    CALLER_SPURT = "caller_spurt"
    AGENT_SPURT = "agent_spurt"
    FLUSH = "flush"
    FINISH = "finish"


_P = TurnPhase
_I = TurnInput
_SPEAKING = (_P.CALLER, _P.CALLER_IN_PAUSE, _P.BARGE_IN)
_OPEN = (_P.START, _P.AGENT, *_SPEAKING)

# (phase, input) -> (handler, the phases it may lead to). A pair that is not here is
# misuse (only input after finish()). The handlers are TurnMachine methods; each returns
# the next phase, which must be one of those listed (checked on every input).
TRANSITIONS: dict[tuple[TurnPhase, TurnInput], tuple[str, tuple[TurnPhase, ...]]] = {
    (_P.START, _I.CALLER_SPURT): ("_caller_opens", (_P.CALLER,)),
    (_P.AGENT, _I.CALLER_SPURT): ("_caller_opens", _SPEAKING),
    **{(p, _I.CALLER_SPURT): ("_caller_goes_on", _SPEAKING) for p in _SPEAKING},
    (_P.START, _I.AGENT_SPURT): ("_agent_speaks", (_P.AGENT,)),
    (_P.AGENT, _I.AGENT_SPURT): ("_agent_speaks", (_P.AGENT,)),
    (_P.CALLER, _I.AGENT_SPURT): ("_agent_answers", (_P.AGENT, _P.CALLER)),
    (_P.CALLER_IN_PAUSE, _I.AGENT_SPURT): ("_agent_resumes", (_P.AGENT, _P.CALLER, _P.BARGE_IN)),
    (_P.BARGE_IN, _I.AGENT_SPURT): ("_agent_answers", (_P.AGENT, _P.CALLER, _P.BARGE_IN)),
    **{(p, _I.FLUSH): ("_flush", (p,)) for p in _OPEN},
    **{(p, _I.FINISH): ("_finish", (_P.FINISHED,)) for p in _OPEN},
}


def describe_transitions() -> str:
    """The transition table as text (the one drawn in :class:`TurnMachine`'s docstring)."""
    rows = ["phase            input          next phase", "-" * 64]
    for phase in TurnPhase:
        first = True
        for inp in TurnInput:
            entry = TRANSITIONS.get((phase, inp))
            if entry is None:
                continue
            nxt = " | ".join(p.value for p in entry[1])
            rows.append(f"{phase.value if first else '':<17}{inp.value:<15}{nxt}")
            first = False
    rows.append("finished         (any)          UsageError")
    return "\n".join(rows)


class TurnMachine:
    """Consumes spurts and flushes in time order; produces :class:`Turn` records.

    Its state is a :class:`TurnPhase` plus what the rules need to remember: the open
    caller turn, the turn whose agent utterance goes on, the last agent spurt and the
    onset of the last caller spurt. Each input is dispatched through ``TRANSITIONS``::

        phase            input          next phase
        ----------------------------------------------------------------
        start            caller_spurt   caller
                         agent_spurt    agent
                         flush          start
                         finish         finished
        caller           caller_spurt   caller | caller_in_pause | barge_in
                         agent_spurt    agent | caller
                         flush          caller
                         finish         finished
        caller_in_pause  caller_spurt   caller | caller_in_pause | barge_in
                         agent_spurt    agent | caller | barge_in
                         flush          caller_in_pause
                         finish         finished
        barge_in         caller_spurt   caller | caller_in_pause | barge_in
                         agent_spurt    agent | caller | barge_in
                         flush          barge_in
                         finish         finished
        agent            caller_spurt   caller | caller_in_pause | barge_in
                         agent_spurt    agent
                         flush          agent
                         finish         finished
        finished         (any)          UsageError

    An agent spurt that answers while later caller speech overlaps it leaves the
    next turn open (``caller``); one more than ``response_timeout_ms`` after the
    caller's speech closes the turn as ``no_response`` and starts an agent-initiated
    utterance (``agent``).

    Misuse raises :class:`~voxproxy.core.errors.UsageError` naming the phase, the input and
    its time: any input after :meth:`finish`, and, when ``strict`` (the default), an
    input earlier than the one before it (a spurt counts at its onset, a flush at its
    time; ties are in order). Not strict, a late input is taken as it comes and counted
    in ``late_inputs``: the session's watermark keeps the order except after a stall of
    the caller's network, whose burst of audio covers time already fed, and a call's
    measurement goes on through that as it always did.
    """

    def __init__(self, config: TurnConfig | None = None, *, strict: bool = True) -> None:
        self.config = cfg = config or TurnConfig()
        self.strict = strict
        self.late_inputs = 0  # inputs earlier than the one before them (not strict)
        self._timeout = int(cfg.response_timeout_ms * NS_PER_MS)
        self._window = int(cfg.barge_in_window_ms * NS_PER_MS)
        self._gap = int(cfg.agent_turn_gap_ms * NS_PER_MS)
        self.turns: list[Turn] = []
        self.phase = TurnPhase.START
        self._last_t: int | None = None  # time of the last input
        self._open: Turn | None = None  # caller speech waiting for (or receiving) a response
        self._utterance: Turn | None = None  # the turn whose agent utterance is ongoing
        self._last_agent: Spurt | None = None
        self._last_caller_onset: int | None = None
        self.flushes = 0
        self.yielded_without_caller_speech = 0

    # -- inputs ----------------------------------------------------------------------------

    def caller_spurt(self, s: Spurt) -> None:
        self._step(TurnInput.CALLER_SPURT, s.onset_ns, s)

    def agent_spurt(self, a: Spurt) -> None:
        self._step(TurnInput.AGENT_SPURT, a.onset_ns, a)

    def flush(self, f: FlushMark) -> None:
        self._step(TurnInput.FLUSH, f.t_ns, f)

    def finish(self, end_ns: int) -> list[Turn]:
        """The call is over at ``end_ns``: close what is open and return every turn.

        ``end_ns`` may lie before the last input (agent speech due on the playout
        timeline after the end): it only decides whether an open turn timed out."""
        self._step(TurnInput.FINISH, None, end_ns)
        return self.turns

    def _step(self, inp: TurnInput, t_ns: int | None, arg: Spurt | FlushMark | int) -> None:
        phase = self.phase
        entry = TRANSITIONS.get((phase, inp))
        shown = "" if t_ns is None else f" at {t_ns} ns"
        if entry is None:
            raise UsageError(f"TurnMachine: {inp.value}{shown} in phase {phase.value}")
        if t_ns is not None:
            last = self._last_t
            if last is not None and t_ns < last:
                if self.strict:
                    raise UsageError(
                        f"TurnMachine: {inp.value}{shown} in phase {phase.value} is out of "
                        f"time order (the input before it was at {last} ns)"
                    )
                self.late_inputs += 1
            else:
                self._last_t = t_ns
        handler, allowed = entry
        nxt: TurnPhase = getattr(self, handler)(arg)
        if nxt not in allowed:
            raise AssertionError(
                f"TurnMachine: {inp.value}{shown} led from {phase.value} to {nxt.value}, "
                "which the transition table does not allow"
            )
        self.phase = nxt

    # -- transitions -----------------------------------------------------------------------

    def _caller_opens(self, s: Spurt) -> TurnPhase:
        """Caller speech with no turn open: a new turn, over agent speech (a barge-in),
        in a pause of the agent's utterance, or plain."""
        self._last_caller_onset = s.onset_ns
        return self._open_turn(s)

    def _caller_goes_on(self, s: Spurt) -> TurnPhase:
        """More caller speech while a turn waits for its answer."""
        self._last_caller_onset = s.onset_ns
        turn = self._open
        assert turn is not None and turn.caller_offset_ns is not None
        if s.onset_ns - turn.caller_offset_ns > self._timeout:
            self._close_unanswered(turn, "no_response", TurnKind.NO_RESPONSE)
            return self._open_turn(s)
        last = self._last_agent
        if turn.barge_in is None and last is not None and _inside(s, last):
            # The agent spoke up while the caller's turn was still open: an agent spurt
            # that did not count as a response. Start a fresh turn.
            return self._open_turn(s)
        turn.caller_offset_ns = s.offset_ns
        turn.caller_spurts.append(s)
        return self.phase

    def _open_turn(self, s: Spurt) -> TurnPhase:
        turn = self._new_turn(TurnKind.RESPONSE)
        turn.caller_onset_ns = s.onset_ns
        turn.caller_offset_ns = s.offset_ns
        turn.caller_spurts.append(s)
        self._open = turn
        last = self._last_agent
        if last is not None and _inside(s, last):
            turn.barge_in = BargeIn(s.onset_ns, last.onset_ns, last.offset_ns)
            return TurnPhase.BARGE_IN
        if (
            last is not None
            and self._utterance is not None
            and 0 <= s.onset_ns - last.offset_ns < self._gap
        ):
            return TurnPhase.CALLER_IN_PAUSE
        return TurnPhase.CALLER

    def _agent_resumes(self, a: Spurt) -> TurnPhase:
        """Agent speech after the caller started in a pause of the agent's utterance: if
        it resumes the utterance while the caller talks, the caller barged in."""
        turn = self._open
        last = self._last_agent
        assert turn is not None and turn.caller_onset_ns is not None
        assert turn.caller_offset_ns is not None and last is not None
        if a.onset_ns < turn.caller_offset_ns and a.onset_ns - last.offset_ns < self._gap:
            turn.barge_in = BargeIn(
                turn.caller_onset_ns, last.onset_ns, last.offset_ns, in_pause=True
            )
        return self._agent_answers(a)

    def _agent_answers(self, a: Spurt) -> TurnPhase:
        """Agent speech while a caller turn waits: it goes on over a barge-in, answers
        the turn, or comes too late (the turn had no response)."""
        turn = self._open
        assert turn is not None and turn.caller_offset_ns is not None
        barge = turn.barge_in
        if (
            barge is not None
            and a.onset_ns < turn.caller_offset_ns
            and a.onset_ns - barge.chain_end_ns < self._gap
        ):
            # The agent paused and went on over the caller: it did not stop.
            barge.chain_end_ns = max(barge.chain_end_ns, a.offset_ns)
            self._note_agent(a)
            return TurnPhase.BARGE_IN
        rest: list[Spurt] = []
        if a.onset_ns < turn.caller_offset_ns:
            # The agent started while the caller was talking. If an earlier spurt of
            # this turn had ended, the agent answered that one; the caller's
            # overlapping speech opens the next turn.
            ended = [c for c in turn.caller_spurts if c.offset_ns <= a.onset_ns]
            if ended and barge is None:
                rest = [c for c in turn.caller_spurts if c.offset_ns > a.onset_ns]
                turn.caller_spurts = ended
                turn.caller_offset_ns = ended[-1].offset_ns
                turn.talk_over_ns = min(rest[0].offset_ns, a.offset_ns) - a.onset_ns
        gap = a.onset_ns - turn.caller_offset_ns
        if gap > self._timeout:
            self._close_unanswered(turn, "no_response", TurnKind.NO_RESPONSE)
            return self._agent_utterance(a, caller_spoke=True)
        turn.agent_onset_ns = a.onset_ns
        turn.agent_offset_ns = a.offset_ns
        turn.ttfs_ns = gap
        if gap < 0:
            turn.talk_over_ns = min(turn.caller_offset_ns, a.offset_ns) - a.onset_ns
        self._utterance = turn
        self._open = None
        self._note_agent(a)
        if not rest:
            return TurnPhase.AGENT
        nxt = self._new_turn(TurnKind.RESPONSE)
        nxt.caller_spurts = rest
        nxt.caller_onset_ns = rest[0].onset_ns
        nxt.caller_offset_ns = rest[-1].offset_ns
        self._open = nxt
        return TurnPhase.CALLER

    def _agent_speaks(self, a: Spurt) -> TurnPhase:
        """Agent speech with no caller turn waiting."""
        return self._agent_utterance(a, caller_spoke=False)

    def _agent_utterance(self, a: Spurt, *, caller_spoke: bool) -> TurnPhase:
        """A continuation of the agent's utterance, or an agent-initiated one (a
        reprompt when the agent spoke before it and the caller did not since)."""
        last = self._last_agent
        utterance = self._utterance
        if (
            utterance is not None
            and last is not None
            and not caller_spoke
            and a.onset_ns - last.offset_ns < self._gap
        ):
            utterance.agent_offset_ns = a.offset_ns
        else:
            turn = self._new_turn(TurnKind.AGENT_INITIATED)
            turn.agent_onset_ns = a.onset_ns
            turn.agent_offset_ns = a.offset_ns
            if last is not None and not caller_spoke:
                turn.reprompt_ns = a.onset_ns - last.offset_ns
            turn.closed = True
            self._utterance = turn
        self._note_agent(a)
        return TurnPhase.AGENT

    def _flush(self, f: FlushMark) -> TurnPhase:
        self.flushes += 1
        target = self._open or self._utterance
        if target is not None:
            target.flushes.append(f)
        barge = self._open.barge_in if self._open is not None else None
        if (
            barge is not None
            and barge.flush_ns is None
            and 0 <= f.t_ns - barge.onset_ns <= self._window
        ):
            barge.flush_ns = f.t_ns
            barge.flush_cut_audible = f.cut_audible
        if f.cut_audible:
            recent = self._last_caller_onset
            if recent is None or not 0 <= f.t_ns - recent <= self._window:
                self.yielded_without_caller_speech += 1
                if target is not None:
                    target.yielded_without_caller_speech += 1
        return self.phase

    def _finish(self, end_ns: int) -> TurnPhase:
        turn = self._open
        if turn is not None and not turn.answered:
            if turn.caller_offset_ns is not None and end_ns - turn.caller_offset_ns > self._timeout:
                self._close_unanswered(turn, "no_response", TurnKind.NO_RESPONSE)
            else:
                self._close_unanswered(turn, "call_ended", TurnKind.RESPONSE)
        for t in self.turns:
            t.closed = True
        return TurnPhase.FINISHED

    # -- helpers ---------------------------------------------------------------------------

    def _note_agent(self, a: Spurt) -> None:
        if self._last_agent is None or a.offset_ns >= self._last_agent.offset_ns:
            self._last_agent = a

    def _new_turn(self, kind: TurnKind) -> Turn:
        turn = Turn(index=len(self.turns), kind=kind)
        self.turns.append(turn)
        return turn

    def _close_unanswered(self, turn: Turn, reason: str, kind: TurnKind) -> None:
        turn.kind = kind
        turn.reason = reason
        turn.closed = True
        if self._open is turn:
            self._open = None


def _inside(s: Spurt, agent: Spurt) -> bool:
    """The caller spurt ``s`` starts inside the agent spurt ``agent``."""
    return agent.onset_ns <= s.onset_ns < agent.offset_ns


def barge_outcome(barge: BargeIn, window_ms: float) -> tuple[BargeOutcome, int]:
    """Outcome and stop latency (ns) of a barge-in."""
    latency = barge.stop_ns() - barge.onset_ns
    if latency <= window_ms * NS_PER_MS:
        return BargeOutcome.STOPPED, latency
    return BargeOutcome.NOT_STOPPED, latency
