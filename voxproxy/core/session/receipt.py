"""A closed call's receipt, built from what its session hands over.

:func:`build_receipt` turns the session's turns, counters and evidence (a
:class:`ReceiptInputs`, made by ``CallSession.close``) into the
:class:`~voxproxy.core.receipt.Receipt`: figures in ms from the call's start, each
with its uncertainty or the reason it is withheld (:mod:`.evidence`), the stage
breakdown of each answer (:mod:`.stages`), marks and truncates (:mod:`.marks`), tool
effects (:mod:`voxproxy.core.effects`) and the traffic counts. Nothing of a call's content is
in it.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from voxproxy.core.effects import EffectSummary, ToolCall, derive
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Direction, StageMark, ToolEvent
from voxproxy.core.ids import keyed_hash
from voxproxy.core.receipt import (
    TOOL_EVENT_FIELDS,
    BargeInRecord,
    CloseInfo,
    Effects,
    EventRecord,
    MarkCheck,
    Receipt,
    Settings,
    Summary,
    Terminal,
    ToolCallRecord,
    Traffic,
    TruncationRecord,
    TurnRecord,
)
from voxproxy.core.session.config import SessionConfig
from voxproxy.core.session.config import ms as _ms
from voxproxy.core.session.evidence import Evidence
from voxproxy.core.session.stages import turn_stages
from voxproxy.core.timebase import NS_PER_MS, EpochAnchor
from voxproxy.core.turns import BargeIn, Turn, TurnKind, barge_outcome

# An answer a bed near the caller's level stood under for at least this share of it says
# a barge-in on it could have gone unheard (``TurnRecord.barge_in_unheard``).
UNHEARD_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class ReceiptInputs:
    """What a closed call's receipt is built from, as its session hands it over: the
    settings, the call's ids and clock anchor, the evidence the figures rest on, and the
    counters. Per direction (caller to agent, agent to caller): ``messages``,
    ``wire_bytes``, ``audio_ns``."""

    config: SessionConfig
    start_ns: int
    anchor: EpochAnchor
    secret: bytes
    link_id: str
    wire_call_id_hash: str | None
    upstream_connected_ns: int | None
    evidence: Evidence
    caller_chunks_ns: Iterable[int]  # the durations of the caller's last messages
    caller_unanalysed_ns: int
    agent_unanalysed_ns: int
    flushes: int
    yielded_without_caller_speech: int
    caller_noise_events: int
    mark_errors_ns: list[int]  # echo time - predicted time, per mark echo checked
    marks_cleared: int
    agent_audio_dropped_ns: int
    messages: list[int]
    wire_bytes: list[int]
    audio_ns: list[int]
    anomalies: Counter[str]
    wire_looks_like: str | None
    measurement_disabled: bool
    tool_events: list[ToolEvent]
    stages: list[StageMark]
    truncations: list[tuple[int, float, int | None]]  # t, claimed ms, modelled ns


def build_receipt(
    s: ReceiptInputs,
    end_ns: int,
    terminal: Terminal,
    close: CloseInfo,
    turns: list[Turn],
    dialect: str,
) -> Receipt:
    """The receipt of the call ``s`` describes, closed at ``end_ns`` with its final ``turns``."""
    ev = s.evidence
    cfg = s.config
    start = s.start_ns

    def rel(ns: int | None) -> float | None:
        return None if ns is None else _ms(ns - start)

    ev.judge_busy()  # before any record: which direction never went quiet
    barge_onsets = [t.barge_in.onset_ns for t in turns if t.barge_in is not None]
    # (No tool events, nothing to derive: the common case, and the fallback receipt's.)
    effects = derive(s.tool_events, barge_onsets) if s.tool_events else EffectSummary()
    starts = [(t.caller_onset_ns or t.agent_onset_ns or 0, t.index) for t in turns]

    def turn_of(t_ns: int) -> int | None:
        found = None
        for begin, index in starts:
            if begin <= t_ns:
                found = index
        return found

    tool_turns = [turn_of(c.started_ns) for c in effects.calls]
    # A barge-in is the next turn's: its caller talked over this turn's answer.
    barged = [k + 1 < len(turns) and turns[k + 1].barge_in is not None for k in range(len(turns))]
    records = [
        _turn_record(s, t, rel, sum(1 for i in tool_turns if i == t.index), talked_over)
        for t, talked_over in zip(turns, barged, strict=True)
    ]
    looks_like = s.wire_looks_like
    anomalies = (
        s.anomalies if looks_like is None else s.anomalies + Counter({"dialect_mismatch": 1})
    )
    return Receipt(
        call=s.wire_call_id_hash or keyed_hash(s.secret, s.link_id, "c_"),
        call_id_source="wire" if s.wire_call_id_hash else "proxy",
        dialect=dialect,
        transport=cfg.transport,  # type: ignore[arg-type]
        started_at=s.anchor.iso_at(start),
        duration_ms=_ms(end_ns - start) or 0.0,
        terminal=terminal,
        close=close,
        upstream_connect_ms=rel(s.upstream_connected_ns),
        settings=_settings(cfg, s.caller_chunks_ns),
        summary=_summary(s, records),
        turns=records,
        marks=_mark_check(s),
        traffic=_traffic(s),
        anomalies=dict(sorted(anomalies.items())),
        wire_looks_like=looks_like,
        measurement_disabled=s.measurement_disabled,
        events=[_event_record(e, rel) for e in sorted(s.tool_events, key=lambda e: e.t_ns)],
        tools=[
            _tool_record(c, turn_index, rel)
            for c, turn_index in zip(effects.calls, tool_turns, strict=True)
        ],
        effects=Effects(
            tool_calls=len(effects.calls),
            # The rest of the summary's counts, by the same names.
            **{name: getattr(effects, name) for name in _EFFECT_COUNTS},
        )
        if s.tool_events
        else None,
        truncations=[
            TruncationRecord(
                t_ms=rel(t_ns) or 0.0,
                turn=turn_of(t_ns),
                claimed_played_ms=claimed,
                modelled_played_ms=_ms(modelled),
                diff_ms=None if modelled is None else round(claimed - modelled / NS_PER_MS, 1),
            )
            for t_ns, claimed, modelled in s.truncations
        ],
    )


def _settings(cfg: SessionConfig, caller_chunks_ns: Iterable[int]) -> Settings:
    chunks = sorted(caller_chunks_ns)
    return Settings(
        caller_frame_ms=_ms(chunks[len(chunks) // 2]) if chunks else None,
        vad_frame_ms=cfg.vad.frame_ms,
        vad_mode=cfg.vad.mode,
        merge_gap_ms=cfg.vad.merge_gap_ms,
        min_speech_ms=cfg.vad.min_speech_ms,
        response_timeout_ms=cfg.turns.response_timeout_ms,
        barge_in_window_ms=cfg.turns.barge_in_window_ms,
        agent_turn_gap_ms=cfg.turns.agent_turn_gap_ms,
        downstream_offset_ms=cfg.downstream_offset_ms,
    )


def _summary(s: ReceiptInputs, records: list[TurnRecord]) -> Summary:
    ttfs = [r.ttfs_ms for r in records if r.ttfs_ms is not None]
    barges = [r.barge_in for r in records if r.barge_in is not None]
    stops = [b.stop_latency_ms for b in barges if b.stop_latency_ms is not None]
    return Summary(
        turns=len(records),
        responses=sum(1 for r in records if r.kind == "response" and r.ttfs_ms is not None),
        no_responses=sum(1 for r in records if r.kind == "no_response"),
        ttfs_ms_median=round(statistics.median(ttfs), 1) if ttfs else None,
        ttfs_ms_max=max(ttfs) if ttfs else None,
        barge_ins=len(barges),
        barge_ins_stopped=sum(1 for b in barges if b.outcome == "stopped"),
        stop_latency_ms_max=max(stops) if stops else None,
        flushes=s.flushes,
        yielded_without_caller_speech=s.yielded_without_caller_speech,
        caller_noise_events=s.caller_noise_events,
    )


def _mark_check(s: ReceiptInputs) -> MarkCheck:
    errs = s.mark_errors_ns
    return MarkCheck(
        checked=len(errs),
        cleared=s.marks_cleared,
        mean_error_ms=_ms(int(statistics.fmean(errs))) if errs else None,
        max_abs_error_ms=_ms(max(abs(e) for e in errs)) if errs else None,
    )


def _traffic(s: ReceiptInputs) -> Traffic:
    return Traffic(
        caller_to_agent_messages=s.messages[0],
        agent_to_caller_messages=s.messages[1],
        caller_to_agent_bytes=s.wire_bytes[0],
        agent_to_caller_bytes=s.wire_bytes[1],
        caller_audio_ms=_ms(s.audio_ns[0]) or 0.0,
        agent_audio_ms=_ms(s.audio_ns[1]) or 0.0,
        agent_audio_dropped_ms=_ms(s.agent_audio_dropped_ns) or 0.0,
        caller_audio_unanalysed_ms=_ms(s.caller_unanalysed_ns) or 0.0,
        agent_audio_unanalysed_ms=_ms(s.agent_unanalysed_ns) or 0.0,
    )


def _tool_record(
    c: ToolCall, turn_index: int | None, rel: Callable[[int | None], float | None]
) -> ToolCallRecord:
    return ToolCallRecord(
        operation_id=c.operation_id,
        tool=c.tool,
        attempt=c.attempt,
        turn=turn_index,
        started_ms=rel(c.started_ns) or 0.0,
        finished_ms=rel(c.finished_ns),
        latency_ms=_ms(c.latency_ns),
        status=c.status,
        cancelled=c.cancelled_ns is not None,
        idempotent=c.idempotency_key is not None,
        stale_write=c.stale_write,
        stale_cause=c.stale_cause,  # type: ignore[arg-type]
        unsafe_retry=c.unsafe_retry,
        source=c.source,  # type: ignore[arg-type]
        response_cancelled_in_flight=c.response_cancelled_ns is not None,
    )


def _turn_record(
    s: ReceiptInputs,
    t: Turn,
    rel: Callable[[int | None], float | None],
    tool_calls: int,
    talked_over: bool,
) -> TurnRecord:
    """One turn's record: its edges, time to first sound, talk-over and reprompt, each
    withheld with its reason where the evidence does not carry it."""
    ev = s.evidence
    cfg = s.config
    window = cfg.turns.barge_in_window_ms

    def quiet(direction: Direction, ns: int | None) -> int | None:
        heard = ev.quiet_at(direction, ns) and not ev.unheard_near(direction, ns)
        return ns if heard and not ev.shed_between(ns) else None

    barge = None if t.barge_in is None else _barge_record(ev, t.barge_in, window, rel)
    ttfs_ns, talk_over_ns, reason = t.ttfs_ns, t.talk_over_ns, t.reason
    ttfs_unc = None
    bounded: bool | None = None
    if ttfs_ns is not None:
        ttfs_unc = ev.uncertainty_ms(t.caller_offset_ns, t.agent_onset_ns)
        why = ev.withheld(t.caller_offset_ns, t.agent_onset_ns)
        if why is None and ev.shed_between(t.caller_onset_ns, t.agent_onset_ns):
            why = "measurement_shed"  # the turn's caller spurts may be grouped anew
        if why is not None:
            ttfs_ns, talk_over_ns, reason = None, None, why
            bounded = why != "measurement_shed" and ev.bounds(t.caller_offset_ns, t.agent_onset_ns)
    elif reason in ("no_response", "call_ended") and ev.shed_between(
        t.caller_onset_ns,
        t.caller_offset_ns,
        after_ns=int(cfg.turns.response_timeout_ms * NS_PER_MS),
    ):
        reason = "measurement_shed"  # the answer may have come in what was shed
    # No barge-in heard over an answer (``talked_over``: the next turn's caller barged in
    # on it) that a bed near the caller's level stood under for most of its length: the
    # caller could have talked over it unheard (SNR near 0 dB), so none heard is no
    # evidence that none came. (A bed at 10 dB comes within the masking margin only in
    # moments, as its level estimate wanders: a barge-in there is heard.)
    unheard: Literal["caller_noise"] | None = None
    share = ev.masked_share(CALLER_TO_AGENT, t.agent_onset_ns, t.agent_offset_ns)
    if not talked_over and share >= UNHEARD_SHARE:
        unheard = "caller_noise"
    reprompt_ns = t.reprompt_ns
    if t.kind is TurnKind.AGENT_INITIATED and not ev.quiet_at(CALLER_TO_AGENT, t.agent_onset_ns):
        # "No caller speech since" cannot be told when the caller never went quiet.
        reprompt_ns, reason = None, "caller_never_quiet"
    elif t.kind is TurnKind.AGENT_INITIATED and ev.masked_at(CALLER_TO_AGENT, t.agent_onset_ns):
        # ... nor when a bed near the caller's level could have hidden their speech.
        reprompt_ns, reason = None, "caller_noise"
    elif (
        reprompt_ns is not None
        and t.agent_onset_ns is not None
        and ev.shed_between(t.agent_onset_ns - reprompt_ns, t.agent_onset_ns)
    ):
        reprompt_ns, reason = None, "measurement_shed"  # the caller may have spoken
    c_off = quiet(CALLER_TO_AGENT, t.caller_offset_ns)
    a_on = quiet(AGENT_TO_CALLER, t.agent_onset_ns)
    return TurnRecord(
        index=t.index,
        kind=t.kind.value,
        # An edge in a direction that never went quiet is no speech edge.
        caller_onset_ms=rel(quiet(CALLER_TO_AGENT, t.caller_onset_ns)),
        caller_offset_ms=rel(c_off),
        agent_onset_ms=rel(a_on),
        agent_offset_ms=rel(quiet(AGENT_TO_CALLER, t.agent_offset_ns)),
        ttfs_ms=_ms(ttfs_ns),
        ttfs_uncertainty_ms=ttfs_unc,
        reason=reason,
        ttfs_bounded=None if None in (c_off, a_on) else bounded,
        talk_over_ms=_ms(talk_over_ns),
        reprompt_ms=_ms(reprompt_ns),
        barge_in=barge,
        barge_in_unheard=unheard,
        flushes=len(t.flushes),
        yielded_without_caller_speech=t.yielded_without_caller_speech,
        stages=turn_stages(s.stages, t, rel),
        tool_calls=tool_calls,
    )


def _barge_record(
    ev: Evidence, b: BargeIn, window: float, rel: Callable[[int | None], float | None]
) -> BargeInRecord:
    """A barge-in's record: its stop latency, unless the evidence withholds it."""
    outcome, latency = barge_outcome(b, window)
    evidence = b.evidence()
    stop_ns: int | None = b.stop_ns()
    # The agent's speech edge the stop stands on: the talked-over speech's end, also when
    # a flush cut it (the detector heard it end at the cut; how far that end moves with
    # the talker's level read off is how far the speech may have ended before the cut).
    edge = b.chain_end_ns
    why = ev.withheld(b.onset_ns, edge)
    if why is None and ev.shed_between(b.onset_ns, edge, after_ns=int(window * NS_PER_MS)):
        why = "measurement_shed"  # the stop may lie in what was shed
    # A withheld stop whose edges still bound the truth keeps the stop the proxy read.
    bounded = None if why is None else why != "measurement_shed" and ev.bounds(b.onset_ns, edge)
    return BargeInRecord(
        onset_ms=rel(b.onset_ns) or 0.0,
        stop_ms=rel(stop_ns) if why is None or bounded else None,
        stop_bounded=bounded,
        stop_latency_ms=None if why else _ms(latency),
        stop_uncertainty_ms=ev.uncertainty_ms(b.onset_ns, edge),
        outcome="unknown" if why else outcome.value,
        evidence=evidence.value,
        ambiguous=evidence.value == "ceased",
        in_pause=b.in_pause,
        reason=why,
    )


_EFFECT_COUNTS = tuple(name for name in Effects.model_fields if name != "tool_calls")


def _event_record(e: ToolEvent, rel: Callable[[int | None], float | None]) -> EventRecord:
    return EventRecord(
        kind=e.kind,
        t_ms=rel(e.t_ns) or 0.0,
        source=e.source,  # type: ignore[arg-type]
        **{name: getattr(e, name) for name in TOOL_EVENT_FIELDS},
    )
