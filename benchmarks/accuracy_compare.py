"""The accuracy benchmark's comparison of one call (benchmarks/accuracy.py): each caller
turn's truth from the two ends, moved to the proxy's vantage point, matched with the
receipt's turns, and each time-to-first-sound and barge-in stop figure judged published
(with its error), withheld with a reason (``unknown``) or ``missed``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from voxproxy.clips import Clip
from voxproxy.core.errors import FixtureError
from voxproxy.core.receipt import Receipt, TurnRecord
from voxproxy.core.timebase import NS_PER_MS, NS_PER_S
from voxproxy.harness.bench import BenchCall
from voxproxy.loadgen.caller import CallRecord
from voxproxy.loadgen.record import AgentChunk
from voxproxy.loadgen.results import MATCH_TOLERANCE_MS, evaluate
from voxproxy.loadgen.truth import (
    TurnTruth,
    agent_speech,
    played_until,
    response_speech,
    truths_with_speech,
)
from voxproxy.mockagent import CallLog, MockAgentConfig
from voxproxy.mockagent.config import response_clip

CALLER_FRAME_NS = 20_000_000  # the load callers' frame (CallerConfig.frame_ms)
NEVER_QUIET = ("caller_never_quiet", "agent_never_quiet")
# Figures the proxy says it cannot know: a direction never quiet, audio that ran too far
# ahead of real time to be analysed, its own clock readings too late, or its measurement
# shed under load.
WITHHELD = (
    *NEVER_QUIET,
    "caller_unanalysed",
    "agent_unanalysed",
    "clock_lag",
    "caller_noise",
    "agent_noise",
    "caller_edge_ambiguous",
    "agent_edge_ambiguous",
    "measurement_shed",
)


# -- truth ----------------------------------------------------------------------------------
# voxproxy.loadgen.truth.truths_with_speech, with the clip of each response resolved as the agent
# resolved it (corpus names; clips cut to their speech).


def turn_truths(
    record: CallRecord, log: CallLog, clip_of: Callable[[str], Clip]
) -> list[tuple[TurnTruth, str, str]]:
    """Each caller turn's truth, with the agent clip that answered it and the one it
    talked over (a barge-in), or "" for none."""
    speech = agent_speech(record, log, clip_of)
    return [
        (truth, nxt.clip if nxt else "", over.clip if over else "")
        for truth, nxt, over in truths_with_speech(record.speech, speech)
    ]


def at_vantage(truth: TurnTruth, record: CallRecord) -> tuple[TurnTruth, float, float]:
    """The truth at the proxy's vantage point (MEASUREMENT.md 1): a caller frame sent late
    (this process's own event loop) reaches the proxy late, like one delayed on the network
    leg, so the caller's edges move by the send lag of the frames that carried them.
    Returns the moved truth and the moves (ms) of its onset and offset."""
    lags = record.pacing_lag_ns

    def lag(ns: int) -> int:
        k = (ns - record.t0_ns) // CALLER_FRAME_NS
        return lags[k] if 0 <= k < len(lags) else 0

    on, off = lag(truth.caller_onset_ns), lag(truth.caller_offset_ns - 1)
    moved = replace(
        truth,
        caller_onset_ns=truth.caller_onset_ns + on,
        caller_offset_ns=truth.caller_offset_ns + off,
        ttfs_ns=None if truth.ttfs_ns is None else truth.ttfs_ns - off,
        stop_latency_ns=None if truth.stop_latency_ns is None else truth.stop_latency_ns - on,
    )
    return moved, on / NS_PER_MS, off / NS_PER_MS


def vantage_record(record: CallRecord, log: CallLog, stamp: int) -> CallRecord:
    """``record`` with the agent's audio placed on the playout model (MEASUREMENT.md 3)
    from when the proxy's host received each message and each flush, not when the
    caller did. On loopback a message reached the proxy's host between the agent's clock
    readings around its write (``ResponseLog.sends``): ``stamp`` 0 takes the reading
    before, 1 the one after. A flush is taken when the agent logged it sent."""
    rate = record.agent_rate_hz
    events = [(t[stamp], 0, pos, n) for r in log.responses for pos, n, *t in r.sends]
    events += [(r.flush_ns, 1, 0, 0) for r in log.responses if r.flush_ns is not None]
    chunks: list[AgentChunk] = []
    cursor = 0
    for t, flush, pos, n in sorted(events):
        if flush:  # what was queued past the flush never plays
            for i, c in enumerate(chunks):
                if c.play_ns + c.n * NS_PER_S // rate > t:
                    kept = max(0, min(c.n, (t - c.play_ns) * rate // NS_PER_S))
                    chunks[i] = replace(c, n=kept)
            cursor = min(cursor, t)
            continue
        start = max(t, cursor)
        cursor = start + n * NS_PER_S // rate
        chunks.append(AgentChunk(pos, n, start, t))
    flushes = sorted(r.flush_ns for r in log.responses if r.flush_ns is not None)
    return replace(record, agent_chunks=sorted(chunks, key=lambda c: c.stream_pos), flushes=flushes)


def agent_vantage(
    record: CallRecord, log: CallLog, clip_of: Callable[[str], Clip]
) -> Callable[[int], tuple[int, int]]:
    """How much later an agent edge of the truth (an answer's onset, the end of what
    played of it) came on the caller's playout timeline than at the proxy's vantage
    (MEASUREMENT.md 1 and 2: the proxy's forwarding delay and the leg to the caller are
    no part of a figure): for the edge's instant on the caller's timeline, the least and
    the most (ns), from :func:`vantage_record` on the readings before and after each
    write. (0, 0) for an instant that is no such edge, or an answer the agent logged no
    message of."""
    rate = record.agent_rate_hz
    moves: dict[int, tuple[int, int]] = {}
    if not rate or not any(r.sends for r in log.responses):
        return lambda _t: (0, 0)
    early, late = vantage_record(record, log, 0), vantage_record(record, log, 1)
    heard = [played_until(rec) for rec in (record, early, late)]
    for r in log.responses:
        clip = clip_of(r.clip)
        at = [
            response_speech(rec, r, clip, rate, p)
            for rec, p in zip((record, early, late), heard, strict=True)
        ]
        caller, first, last = at
        if caller is None or first is None or last is None:
            continue
        # (A later write may end what played earlier: a flush then cut it in a pause.)
        for edge in ("onset_ns", "end_ns"):
            t, a, b = (getattr(x, edge) for x in (caller, first, last))
            moves[t] = (t - max(a, b), t - min(a, b))
    return lambda t: moves.get(t, (0, 0))


def within(err_ms: float, least_ns: int, most_ns: int) -> float:
    """A figure's error against a truth known between two moves of its agent edge
    (:func:`agent_vantage`): 0 inside, else the distance to the nearer end. The truth of
    a figure that ends on the agent's edge comes earlier by the move (its error grows)."""
    lo, hi = err_ms + least_ns / NS_PER_MS, err_ms + most_ns / NS_PER_MS
    return 0.0 if lo <= 0.0 <= hi else (lo if lo > 0.0 else hi)


# -- comparing one call ---------------------------------------------------------------------

Status = Literal["published", "unknown", "missed"]


@dataclass(frozen=True, slots=True)
class Figure:
    kind: Literal["ttfs", "stop"]
    status: Status
    err_ms: float | None = None  # proxy - truth, published figures only
    uncertainty_ms: float | None = None
    reason: str | None = None
    first: bool = False  # the first response of its call
    moved_ms: float = 0.0  # the caller edge's move to the proxy's vantage (at_vantage)
    agent_moved_ms: float = 0.0  # the agent edge's (agent_vantage), the larger bound
    truth_span_ms: float = 0.0  # how far apart the agent edge's two bounds lie
    what: str = ""  # scenario, agent, caller clip -> agent clip: for the worst figures


@dataclass
class CallResult:
    cls: str
    label: str  # the agent
    tag: str  # the noise bed, or ""
    figures: list[Figure] = field(default_factory=list)
    unmatched: list[float] = field(default_factory=list)  # published, belonging to no true turn
    error: str | None = None
    pacing_lag_ms_p99: float | None = None
    noises: int = 0
    noises_judged: int = 0


def _started_wall_ns(receipt: Receipt) -> int:
    return round(dt.datetime.fromisoformat(receipt.started_at).timestamp() * NS_PER_S)


def _near(value: float | None, target: float) -> float | None:
    if value is None:
        return None
    d = abs(value - target)
    return d if d <= MATCH_TOLERANCE_MS else None


def _distance(truth: TurnTruth, t: TurnRecord, rel: Callable[[int], float]) -> float | None:
    """How near a receipt turn lies to a true caller turn (ms), or None if not near: by
    the caller's onset (a barge-in's onset) or offset, whichever the receipt has near
    (noise moves onsets); by the onset of the agent's answer only when the receipt has no
    caller edges (a direction that never went quiet) or says noise hid them (caller_noise:
    at SNR near 0 dB its caller edges are the few frames that rose out of the bed, or
    none, and the turn is withheld)."""
    onset, offset = rel(truth.caller_onset_ns), rel(truth.caller_offset_ns)
    ds = [_near(t.caller_onset_ms, onset), _near(t.caller_offset_ms, offset)]
    if truth.barge_in and t.barge_in is not None:
        ds.append(_near(t.barge_in.onset_ms, onset))
    deaf = t.caller_onset_ms is None and t.caller_offset_ms is None
    masked = t.reason == "caller_noise"
    if (deaf or masked) and truth.ttfs_ns is not None and (t.kind == "response" or masked):
        ds.append(_near(t.agent_onset_ms, rel(truth.caller_offset_ns + truth.ttfs_ns)))
    found = [d for d in ds if d is not None]
    return min(found) if found else None


def _match_all(
    truths: list[TurnTruth], receipt: Receipt, rel: Callable[[int], float]
) -> list[TurnRecord | None]:
    """Each true turn's receipt turn (or None), the nearest pairs first, each turn once."""
    pairs = []
    for i, truth in enumerate(truths):
        for t in receipt.turns:
            d = _distance(truth, t, rel)
            if d is not None:
                pairs.append((d, i, t.index, t))
    out: list[TurnRecord | None] = [None] * len(truths)
    taken: set[int] = set()
    for _d, i, index, t in sorted(pairs, key=lambda p: p[:3]):
        if out[i] is None and index not in taken:
            out[i] = t
            taken.add(index)
    return out


def compare_call(
    cls: str, call: BenchCall, config: MockAgentConfig, wall_minus_mono_ns: int, tag: str = ""
) -> CallResult:
    o = call.outcome
    out = CallResult(cls, call.label, tag)
    rec, receipt, log = o.record, o.receipt, o.agent_log
    if rec.pacing_lag_ns:
        out.pacing_lag_ms_p99 = float(np.percentile(rec.pacing_lag_ns, 99)) / NS_PER_MS
    if rec.error or receipt is None or log is None:
        out.error = rec.error or ("no receipt" if receipt is None else "no agent log")
        return out

    def clip_of(name: str) -> Clip:
        return response_clip(name, config.trim_silence)

    truths = turn_truths(rec, log, clip_of)
    shift_ms = (rec.t0_ns + wall_minus_mono_ns - _started_wall_ns(receipt)) / NS_PER_MS

    def rel(ns: int) -> float:
        return (ns - rec.t0_ns) / NS_PER_MS + shift_ms

    # A direction that never went quiet has no edges: turns in it are not told apart.
    reasons = [t.reason for t in receipt.turns]
    reasons += [t.barge_in.reason for t in receipt.turns if t.barge_in is not None]
    deaf = next((r for r in reasons if r in NEVER_QUIET), None)
    moved = [at_vantage(captured, rec) for captured, _a, _o in truths]
    forwarded = agent_vantage(rec, log, clip_of)
    matched = _match_all([m[0] for m in moved], receipt, rel)
    used = {t.index for t in matched if t is not None}
    first = True
    for (truth, moved_on, moved_off), (_c, answer, talked_over), turn in zip(
        moved, truths, matched, strict=True
    ):
        where = f"{o.scenario.name}, {call.label}, call {o.index}: {truth.caller_clip}"
        if truth.ttfs_ns is not None:
            f = _ttfs_figure(truth, turn, first, deaf)
            f = _at_agent_vantage(f, forwarded(truth.caller_offset_ns + truth.ttfs_ns))
            out.figures.append(replace(f, moved_ms=moved_off, what=f"{where} -> {answer}"))
            first = False
        elif turn is not None and turn.ttfs_ms is not None:
            out.unmatched.append(turn.ttfs_ms)  # a response the agent never gave
        if truth.barge_in and truth.stop_latency_ns is not None:
            over_turn = _answer_under(receipt, rel(truth.caller_onset_ns))
            f = _stop_figure(truth, turn, deaf, over_turn)
            f = _at_agent_vantage(f, forwarded(truth.caller_onset_ns + truth.stop_latency_ns))
            what = f"{where} over {talked_over}"
            out.figures.append(replace(f, moved_ms=moved_on, what=what))
    for t in receipt.turns:
        if t.index in used:
            continue
        if t.ttfs_ms is not None:
            out.unmatched.append(t.ttfs_ms)
        if t.barge_in is not None and t.barge_in.stop_latency_ms is not None:
            out.unmatched.append(t.barge_in.stop_latency_ms)
    try:
        judged = evaluate(o)["noises"]
    except FixtureError:  # corpus agents: the loadgen's own truth cannot name their clips
        judged = []
    out.noises = len(judged)
    out.noises_judged = sum(1 for n in judged if n["proxy_judged_correctly"])
    return out


def _at_agent_vantage(f: Figure, moves: tuple[int, int]) -> Figure:
    least, most = moves
    err = None if f.err_ms is None else within(f.err_ms, least, most)
    return replace(
        f, err_ms=err, agent_moved_ms=most / NS_PER_MS, truth_span_ms=(most - least) / NS_PER_MS
    )


def _ttfs_figure(
    truth: TurnTruth, turn: TurnRecord | None, first: bool, deaf: str | None
) -> Figure:
    """``deaf``: the receipt's reason when a direction never went quiet (None: none)."""
    assert truth.ttfs_ns is not None
    if turn is not None and turn.ttfs_ms is not None:
        err = turn.ttfs_ms - truth.ttfs_ns / NS_PER_MS
        return Figure("ttfs", "published", err, turn.ttfs_uncertainty_ms, None, first)
    if turn is None and deaf is not None:
        return Figure("ttfs", "unknown", None, None, f"{deaf} (no turn of its own)", first)
    reason = "no turn" if turn is None else (turn.reason or turn.kind)
    status: Status = "unknown" if reason in WITHHELD else "missed"
    unc = None if turn is None else turn.ttfs_uncertainty_ms
    return Figure("ttfs", status, None, unc, reason, first)


def _answer_under(receipt: Receipt, onset_ms: float) -> TurnRecord | None:
    """The receipt's turn whose agent audio was playing at ``onset_ms`` (a barge-in's
    onset), if any."""
    for t in receipt.turns:
        start, end = t.agent_onset_ms, t.agent_offset_ms
        if start is not None and start <= onset_ms <= (end if end is not None else start):
            return t
    return None


def _stop_figure(
    truth: TurnTruth, turn: TurnRecord | None, deaf: str | None, over: TurnRecord | None = None
) -> Figure:
    """``over``: the receipt's turn whose answer the caller talked over, if found."""
    assert truth.stop_latency_ns is not None
    b = turn.barge_in if turn is not None else None
    if b is not None and b.stop_latency_ms is not None:
        err = b.stop_latency_ms - truth.stop_latency_ns / NS_PER_MS
        return Figure("stop", "published", err, b.stop_uncertainty_ms)
    if b is None and deaf is not None:
        return Figure("stop", "unknown", reason=f"{deaf} (no barge-in of its own)")
    if b is None and turn is not None and turn.reason == "caller_noise":
        # The receipt says a bed near the caller's level could have hidden their speech
        # around that turn: a barge-in it did not hear is withheld with that reason.
        return Figure("stop", "unknown", reason="caller_noise (no barge-in heard)")
    if b is None and over is not None and over.barge_in_unheard is not None:
        # The answer talked over says a bed near the caller's level stood under it: a
        # barge-in there could go unheard (withheld with that reason, not missed).
        return Figure("stop", "unknown", reason=f"{over.barge_in_unheard} (barge-in unheard)")
    if b is None:
        return Figure("stop", "missed", reason="no barge-in")
    withheld = b.outcome == "unknown" or b.reason in WITHHELD
    return Figure(
        "stop", "unknown" if withheld else "missed", None, b.stop_uncertainty_ms, b.reason
    )
