"""Ground truth of a live call, from the caller's record and the agent's own log.

The caller knows when its speech truly started and ended (the clip's edges and
the instant each sample was captured) and when each agent sample played on its
own playout timeline. The mock agent knows which clip each response was and
where in the stream it began. Together they give the true time-to-first-sound
and barge-in stop latency of every turn, independent of any speech detector.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from voxproxy.clips import Clip
from voxproxy.clips import clip as load_clip
from voxproxy.core.analysis.truth import heard_runs, last_speech_end_ms
from voxproxy.core.timebase import NS_PER_S
from voxproxy.loadgen.caller import CallRecord, SpeechTruth
from voxproxy.loadgen.steps import segments_at_rate, speech_windows_at_rate
from voxproxy.simcall.log import CallLog, ResponseLog


@dataclass(frozen=True, slots=True)
class AgentSpeech:
    clip: str
    onset_ns: int  # first speech sample, on the caller's playout timeline
    end_ns: int  # end of the last speech sample that actually played


@dataclass(frozen=True, slots=True)
class TurnTruth:
    caller_clip: str
    caller_onset_ns: int
    caller_offset_ns: int
    ttfs_ns: int | None  # caller offset -> next agent speech onset
    barge_in: bool
    stop_latency_ns: int | None  # for a barge-in: onset -> end of the agent speech talked over


def played_until(record: CallRecord) -> list[tuple[int, int]]:
    """(first, end) stream positions of each chunk that played (after flush cuts)."""
    return [(c.stream_pos, c.stream_pos + c.n) for c in record.agent_chunks if c.n > 0]


def agent_speech(
    record: CallRecord, log: CallLog, clip_of: Callable[[str], Clip] = load_clip
) -> list[AgentSpeech]:
    """The speech of each response as it played; ``clip_of`` resolves a response's clip
    name as the agent did."""
    rate = record.agent_rate_hz
    if not rate:
        return []
    played = played_until(record)
    out: list[AgentSpeech] = []
    for r in log.responses:
        s = response_speech(record, r, clip_of(r.clip), rate, played)
        if s is not None:
            out.append(s)
    return out


def response_speech(
    record: CallRecord, r: ResponseLog, c: Clip, rate: int, played: list[tuple[int, int]]
) -> AgentSpeech | None:
    """A response's first speech sample and the end of its last audible run: the parts of
    its clip's speech that played, as the truth rule takes them (``heard_runs``). A run
    cut by a flush ends at its last speech window before the cut: a cut inside one of the
    run's own pauses leaves that pause silent. The clip's speech is read from its audio at
    the agent's ``rate``, as the wire carried it (``steps.segments_at_rate``)."""
    segments = segments_at_rate(c, rate)
    base = r.stream_pos - r.skipped_samples  # stream position of the clip's sample 0

    def pos(ms: float) -> int:
        return base + round(ms * rate / 1000)

    onset_pos = pos(segments[0][0])
    sent_end = r.stream_pos + r.samples_sent  # later positions belong to the next response
    if onset_pos >= sent_end:
        # Stopped before its first speech sample was sent (a flush in its leading
        # silence): it said nothing. What played at that position was the next response.
        return None
    onset = record.play_time(onset_pos)
    if onset is None:
        return None
    runs: list[tuple[int, int]] = []  # [start, end) of audible speech, on the caller's timeline
    for a_ms, b_ms in segments:
        a, b = pos(a_ms), min(pos(b_ms), sent_end)
        if a >= b:
            continue
        # The part of [a, b) that played: played chunks are contiguous runs.
        last_played = None
        for first, end in played:
            if end <= a or first >= b:
                continue
            last_played = min(b, end)
        if last_played is None:
            continue
        if last_played < pos(b_ms):  # cut inside the run: it ends on its last speech heard
            cut_ms = (last_played - base) * 1000 / rate
            end_ms = last_speech_end_ms(speech_windows_at_rate(c, rate), a_ms, cut_ms)
            last_played = max(a + 1, min(last_played, pos(end_ms)))
        t0 = record.play_time(a)
        t = record.play_time(last_played - 1)
        if t0 is None or t is None:
            continue
        runs.append((t0, t + NS_PER_S // rate))
    heard = heard_runs(runs)
    end_ns = max(onset, heard[-1][1]) if heard else onset
    return AgentSpeech(r.clip, onset, end_ns)


class _Heard(Protocol):
    """An agent's speech as it reached the caller."""

    @property
    def onset_ns(self) -> int: ...
    @property
    def end_ns(self) -> int: ...


def turn_truths(record: CallRecord, log: CallLog) -> list[TurnTruth]:
    return truths_of_turns(record.speech, agent_speech(record, log))


H = TypeVar("H", bound=_Heard)


def truths_of_turns(turns: Sequence[SpeechTruth], speech: Sequence[_Heard]) -> list[TurnTruth]:
    """The truth of every caller turn: its edges, the onset of the agent speech after it
    (time to first sound) and, for a barge-in, the end of the speech it talked over."""
    return [truth for truth, _, _ in truths_with_speech(turns, speech)]


def truths_with_speech(
    turns: Sequence[SpeechTruth], speech: Sequence[H]
) -> list[tuple[TurnTruth, H | None, H | None]]:
    """:func:`truths_of_turns`, each with the agent speech that answered the turn and the
    one it talked over (a barge-in), or None."""
    out: list[tuple[TurnTruth, H | None, H | None]] = []
    for s in turns:
        nxt = next((a for a in speech if a.onset_ns > s.offset_ns), None)
        ttfs = None if nxt is None else nxt.onset_ns - s.offset_ns
        stop = None
        over = None
        if s.barge_in:
            over = next((a for a in speech if a.onset_ns <= s.onset_ns < a.end_ns), None)
            if over is not None:
                stop = over.end_ns - s.onset_ns
        truth = TurnTruth(s.clip, s.onset_ns, s.offset_ns, ttfs, s.barge_in, stop)
        out.append((truth, nxt, over))
    return out


def caller_view_truths(record: CallRecord) -> list[TurnTruth]:
    """Truth for any agent: the agent's speech as the caller's own detector heard it on
    its playout timeline (exact for the caller's own speech, VAD-accurate for the agent's)."""
    spurts = sorted(record.agent_spurts)
    out: list[TurnTruth] = []
    for s in record.speech:
        nxt = next((a for a, _b in spurts if a > s.offset_ns), None)
        ttfs = None if nxt is None else nxt - s.offset_ns
        stop = None
        if s.barge_in:
            over = next(((a, b) for a, b in spurts if a <= s.onset_ns < b), None)
            if over is not None:
                stop = over[1] - s.onset_ns
        out.append(TurnTruth(s.clip, s.onset_ns, s.offset_ns, ttfs, s.barge_in, stop))
    return out
