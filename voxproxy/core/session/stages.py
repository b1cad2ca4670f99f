"""The wire's stage marks that explain one turn's answer (a realtime server's chain).

A realtime server reports stages of its answer on the wire (``server_speech_stopped``,
``response_created``, the first audio delta, ...); :func:`turn_stages` picks, for one
turn, the marks that belong to it and breaks the time from the caller's last word to
the first audible answer down into them. Sans-I/O.
"""

from __future__ import annotations

from collections.abc import Callable

from voxproxy.core.events import StageMark
from voxproxy.core.receipt import TurnStages
from voxproxy.core.timebase import NS_PER_MS
from voxproxy.core.turns import Turn

MAX_STAGE_MARKS = 10_000  # stage marks kept per call
STAGE_LOOKBACK_NS = 2_000 * NS_PER_MS
STAGE_LOOKAHEAD_NS = 500 * NS_PER_MS
_CHAIN_STAGES = (
    "server_speech_started",
    "server_speech_stopped",
    "response_created",
    "first_audio_delta",
    "response_done",
)


def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / NS_PER_MS, 1)


def turn_stages(
    stages: list[StageMark], t: Turn, rel: Callable[[int | None], float | None]
) -> TurnStages | None:
    """The wire's stage marks that fall between this turn's caller speech and its answer.

    The chain stages of a realtime server (``server_speech_stopped`` ->
    ``response_created`` -> ``first_audio_delta``, plus ``server_speech_started``
    before and ``response_done`` after) are taken in their order, so that a
    previous response's late marks (a ``response_done`` after a barge-in, say)
    are not taken for this turn's; any other stage name keeps the plain rule:
    the first mark inside the turn's window.

    Long on purpose: the chain is found in its order, stage after stage, top to bottom.
    """
    if not stages or t.caller_offset_ns is None:
        return None
    offset = t.caller_offset_ns
    lo = offset - STAGE_LOOKBACK_NS
    hi = (t.agent_onset_ns if t.agent_onset_ns is not None else offset) + STAGE_LOOKAHEAD_NS
    timed = [(m.at_ns if m.at_ns is not None else m.t_ns, m) for m in stages]

    def first(name: str, a: int, b: int) -> tuple[int, StageMark] | None:
        return next(((at, m) for at, m in timed if m.name == name and a <= at <= b), None)

    def last(name: str, a: int, b: int) -> tuple[int, StageMark] | None:
        found = None
        for at, m in timed:
            if m.name == name and a <= at <= b:
                found = (at, m)
        return found

    chosen: dict[str, tuple[int, StageMark]] = {}
    for at, m in timed:
        if m.name not in _CHAIN_STAGES and m.name not in chosen and lo <= at <= hi:
            chosen[m.name] = (at, m)
    # The server's end of this speech lies after its onset (a short utterance soon
    # after the previous one must not take that one's end).
    stop_lo = lo if t.caller_onset_ns is None else max(lo, t.caller_onset_ns)
    stop = first("server_speech_stopped", stop_lo, hi)
    floor = lo if stop is None else stop[0]
    delta = first("first_audio_delta", floor, hi)
    created = (
        last("response_created", floor, delta[0])
        if delta is not None
        else first("response_created", floor, hi)
    )
    onset_lo = (t.caller_onset_ns if t.caller_onset_ns is not None else offset) - (
        STAGE_LOOKBACK_NS
    )
    started = (
        last("server_speech_started", onset_lo, stop[0])
        if stop is not None
        else first("server_speech_started", onset_lo, offset)
    )
    after = created or delta
    done = None
    if after is not None:
        # A response is done before the next one is created (one active at a time).
        following = first("response_created", after[0] + 1, 1 << 62)
        done = first("response_done", after[0], following[0] if following else 1 << 62)
    for name, found in (
        ("server_speech_started", started),
        ("server_speech_stopped", stop),
        ("response_created", created),
        ("first_audio_delta", delta),
        ("response_done", done),
    ):
        if found is not None:
            chosen[name] = found
    if not chosen:
        return None
    marks: dict[str, float] = {}
    details: dict[str, str] = {}
    for name, (at, m) in sorted(chosen.items(), key=lambda kv: kv[1][0]):
        value = rel(at)
        if value is not None:
            marks[name] = value
        if m.detail is not None:
            details[name] = m.detail
    breakdown: dict[str, float] = {}
    previous = offset
    chain = [(n, chosen[n][0]) for n in _CHAIN_STAGES[1:4] if n in chosen]
    if t.agent_onset_ns is not None:
        chain.append(("audible", t.agent_onset_ns))
    if len(chain) > 1 or (chain and chain[0][0] != "audible"):
        for name, at in chain:
            breakdown[name] = _ms(at - previous) or 0.0
            previous = at
    diff = None if stop is None else _ms(stop[0] - offset)
    return TurnStages(
        marks=marks, server_vad_offset_diff_ms=diff, details=details, breakdown_ms=breakdown
    )
