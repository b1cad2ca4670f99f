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

from voxproxy.analysis.vad import Spurt

NS_PER_MS = 1_000_000
FLUSH_IN_SPURT_NS = 60 * NS_PER_MS  # a dip this short before a cut is inside a word


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
        """End of audible agent speech after the onset.

        A flush that cut audible audio ends it at the flush, when the flush came
        before the detected end of speech or within ``FLUSH_IN_SPURT_NS`` after it
        (the cut fell in a dip inside a word, such as a stop consonant's closure);
        after a longer silence the speech had ended on its own, at the end of the
        talked-over spurts.
        """
        flush = self.flush_ns
        if (
            flush is not None
            and self.flush_cut_audible
            and flush <= self.chain_end_ns + FLUSH_IN_SPURT_NS
        ):
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


class TurnMachine:
    """Consumes spurts and flushes in time order; produces :class:`Turn` records."""

    def __init__(self, config: TurnConfig | None = None) -> None:
        self.config = cfg = config or TurnConfig()
        self._timeout = int(cfg.response_timeout_ms * NS_PER_MS)
        self._window = int(cfg.barge_in_window_ms * NS_PER_MS)
        self._gap = int(cfg.agent_turn_gap_ms * NS_PER_MS)
        self.turns: list[Turn] = []
        self._open: Turn | None = None  # caller speech waiting for (or receiving) a response
        self._utterance: Turn | None = None  # the turn whose agent utterance is ongoing
        self._last_agent: Spurt | None = None
        self._caller_since_agent = False
        self._last_caller_onset: int | None = None
        self._pause_candidate: Turn | None = None  # caller started in an agent pause
        self.flushes = 0
        self.yielded_without_caller_speech = 0

    # -- inputs ----------------------------------------------------------------------------

    def caller_spurt(self, s: Spurt) -> None:
        self._last_caller_onset = s.onset_ns
        turn = self._open
        if (
            turn is not None
            and not turn.answered
            and turn.caller_offset_ns is not None
            and s.onset_ns - turn.caller_offset_ns > self._timeout
        ):
            self._close_unanswered(turn, "no_response", TurnKind.NO_RESPONSE)
            turn = None
        if turn is not None and turn.answered:
            turn = None
        last = self._last_agent
        barge = last is not None and last.onset_ns <= s.onset_ns < last.offset_ns
        if barge and turn is not None and turn.barge_in is None and not turn.answered:
            # The agent spoke up while the caller's turn was still open: an agent
            # spurt that did not count as a response. Start a fresh turn.
            turn = None
        if turn is None:
            turn = self._new_turn(TurnKind.RESPONSE)
            turn.caller_onset_ns = s.onset_ns
            self._open = turn
            if barge and last is not None:
                turn.barge_in = BargeIn(s.onset_ns, last.onset_ns, last.offset_ns)
            elif (
                last is not None
                and self._utterance is not None
                and 0 <= s.onset_ns - last.offset_ns < self._gap
            ):
                self._pause_candidate = turn
        turn.caller_offset_ns = s.offset_ns
        turn.caller_spurts.append(s)
        self._caller_since_agent = True

    def agent_spurt(self, a: Spurt) -> None:
        turn = self._open
        if turn is not None and turn.barge_in is None and turn is self._pause_candidate:
            # The caller started in a pause; the agent resumed while the caller talked.
            last = self._last_agent
            if (
                last is not None
                and turn.caller_offset_ns is not None
                and a.onset_ns < turn.caller_offset_ns
                and a.onset_ns - last.offset_ns < self._gap
            ):
                assert turn.caller_onset_ns is not None
                turn.barge_in = BargeIn(
                    turn.caller_onset_ns, last.onset_ns, last.offset_ns, in_pause=True
                )
            self._pause_candidate = None
        if turn is not None and not turn.answered and turn.caller_offset_ns is not None:
            barge = turn.barge_in
            if (
                barge is not None
                and a.onset_ns < turn.caller_offset_ns
                and a.onset_ns - barge.chain_end_ns < self._gap
            ):
                # The agent paused and went on over the caller: it did not stop.
                barge.chain_end_ns = max(barge.chain_end_ns, a.offset_ns)
                self._note_agent(a)
                return
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
            else:
                turn.agent_onset_ns = a.onset_ns
                turn.agent_offset_ns = a.offset_ns
                turn.ttfs_ns = gap
                if gap < 0:
                    turn.talk_over_ns = min(turn.caller_offset_ns, a.offset_ns) - a.onset_ns
                self._utterance = turn
                self._open = None
                self._caller_since_agent = False
                self._note_agent(a)
                if rest:
                    nxt = self._new_turn(TurnKind.RESPONSE)
                    nxt.caller_spurts = rest
                    nxt.caller_onset_ns = rest[0].onset_ns
                    nxt.caller_offset_ns = rest[-1].offset_ns
                    self._open = nxt
                    self._caller_since_agent = True
                return
        # No caller turn waiting: a continuation, or an agent-initiated utterance.
        last = self._last_agent
        utterance = self._utterance
        if (
            utterance is not None
            and last is not None
            and not self._caller_since_agent
            and a.onset_ns - last.offset_ns < self._gap
        ):
            utterance.agent_offset_ns = a.offset_ns
        else:
            turn = self._new_turn(TurnKind.AGENT_INITIATED)
            turn.agent_onset_ns = a.onset_ns
            turn.agent_offset_ns = a.offset_ns
            if last is not None and not self._caller_since_agent:
                turn.reprompt_ns = a.onset_ns - last.offset_ns
            turn.closed = True
            self._utterance = turn
        self._caller_since_agent = False
        self._note_agent(a)

    def flush(self, f: FlushMark) -> None:
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

    def finish(self, end_ns: int) -> list[Turn]:
        """The call is over at ``end_ns``: close what is open and return every turn."""
        turn = self._open
        if turn is not None and not turn.answered:
            if turn.caller_offset_ns is not None and end_ns - turn.caller_offset_ns > self._timeout:
                self._close_unanswered(turn, "no_response", TurnKind.NO_RESPONSE)
            else:
                self._close_unanswered(turn, "call_ended", TurnKind.RESPONSE)
        for t in self.turns:
            t.closed = True
        return self.turns

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


def barge_outcome(barge: BargeIn, window_ms: float) -> tuple[BargeOutcome, int]:
    """Outcome and stop latency (ns) of a barge-in."""
    latency = barge.stop_ns() - barge.onset_ns
    if latency <= window_ms * NS_PER_MS:
        return BargeOutcome.STOPPED, latency
    return BargeOutcome.NOT_STOPPED, latency
