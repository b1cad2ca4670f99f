"""Scripted calls as a dual-channel recording would hold them, with their truth. Pure.

The same plans as the wire renderer (:class:`~support.scripted.plan.TurnPlan`: who
says which clip, how long the agent takes, where the caller barges in and how soon the
agent stops), laid out sample by sample on two tracks: the caller's speech on one, the
agent's audio as the caller heard it on the other. A recording has no wire, so an agent
that flushes and one that merely stops sending sound alike: its audio ends
``reaction_ms`` after the barge-in (``never``: it plays to the end).

Truth (MEASUREMENT.md 2), in ns from the recording's first sample: each clip's own
speech edges where it was placed; for a barge-in, the end of the last speech the caller
heard of the cut answer, by the truth rule at the whole clip's level.
:func:`recording_tracks` then makes what a recorder stores: both tracks at a rate, with
the agent leaking into the caller's channel at a level and lag (echo).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from support.scripted.plan import BargePlan, TurnPlan, TurnTruth
from support.scripted.render import to_rate
from voxproxy.clips import Clip
from voxproxy.core.analysis.truth import speech_edges, truth_threshold_dbfs
from voxproxy.core.events import Pcm
from voxproxy.core.receipt import Receipt
from voxproxy.core.timebase import NS_PER_MS
from voxproxy.loadgen.steps import edges_at_rate


@dataclass(frozen=True, slots=True)
class ScriptedRecording:
    """Both clean tracks (equal lengths, at ``sample_rate_hz``) and each turn's truth."""

    caller: Pcm
    agent: Pcm
    sample_rate_hz: int
    truth: list[TurnTruth]

    @property
    def duration_ms(self) -> float:
        return 1000.0 * self.caller.size / self.sample_rate_hz


def _ns(ms: float) -> int:
    return round(ms * NS_PER_MS)


def _speech_end_ms(clip_pcm: Pcm, played: Pcm, rate: int) -> float | None:
    """The end of the last speech run in ``played`` (the head of ``clip_pcm``), at the
    whole clip's truth threshold; None when nothing of it is speech."""
    threshold = truth_threshold_dbfs(clip_pcm, rate)
    if threshold is None or played.size == 0:
        return None
    runs = speech_edges(played, rate, threshold_dbfs=threshold)
    return runs[-1][1] if runs else None


def render_recording(
    turns: Sequence[TurnPlan],
    *,
    lead_ms: float = 500.0,
    caller_gap_ms: float = 700.0,
    tail_ms: float = 1500.0,
    sample_rate_hz: int = 16000,
) -> ScriptedRecording:
    """Lay ``turns`` out on two tracks at ``sample_rate_hz`` (clips at another rate are
    converted first; their truth is read from the converted audio, in ms)."""
    rate = sample_rate_hz
    spm = rate / 1000.0
    caller_pieces: list[tuple[float, Pcm]] = []
    agent_pieces: list[tuple[float, Pcm]] = []
    truth: list[TurnTruth] = []
    caller_start = lead_ms
    end_ms = 0.0
    for i, turn in enumerate(turns):
        c, a = turn.caller, turn.agent
        c_pcm, a_pcm = (
            to_rate(c.pcm, c.sample_rate_hz, rate),
            to_rate(a.pcm, a.sample_rate_hz, rate),
        )
        caller_pieces.append((caller_start, c_pcm))
        # The truth in the audio as recorded, at its rate (MEASUREMENT.md 2).
        c_edges, a_edges = edges_at_rate(c, rate), edges_at_rate(a, rate)
        c_on, c_off = caller_start + c_edges[0], caller_start + c_edges[1]
        a_on = c_off + turn.delay_ms
        a_start = a_on - a_edges[0]
        barge = turn.barge if i + 1 < len(turns) else None
        played = a_pcm
        barge_on = stop_ms = None
        if barge is not None:
            barge_on = a_on + barge.after_agent_onset_ms
            if barge.reaction != "never":
                played = a_pcm[: max(0, round((barge_on + barge.reaction_ms - a_start) * spm))]
            end = _speech_end_ms(a_pcm, played, rate)
            stop_ms = a_start + end if end is not None else barge_on
        agent_pieces.append((a_start, played))
        truth.append(
            TurnTruth(
                caller_onset_ns=_ns(c_on),
                caller_offset_ns=_ns(c_off),
                agent_onset_ns=_ns(a_on),
                ttfs_ns=_ns(a_on - c_off),
                barge_onset_ns=None if barge_on is None else _ns(barge_on),
                stop_ns=None if stop_ms is None else _ns(stop_ms),
                reaction=None if barge is None else barge.reaction,
            )
        )
        a_end = a_start + played.size / spm
        end_ms = max(end_ms, a_end, caller_start + c_pcm.size / spm)
        if barge_on is not None:
            caller_start = barge_on - edges_at_rate(turns[i + 1].caller, rate)[0]
        else:
            caller_start = a_start + a_edges[1] + caller_gap_ms
    total = round((end_ms + tail_ms) * spm)
    return ScriptedRecording(
        _mix(caller_pieces, total, spm), _mix(agent_pieces, total, spm), rate, truth
    )


def _mix(pieces: list[tuple[float, Pcm]], total: int, spm: float) -> Pcm:
    track = np.zeros(total, dtype=np.float64)
    for start_ms, pcm in pieces:
        at = round(start_ms * spm)
        n = min(pcm.size, total - at)
        if n > 0:
            track[at : at + n] += pcm[:n]
    out: Pcm = np.clip(np.round(track), -32768, 32767).astype(np.int16)
    return out


def recording_tracks(
    rec: ScriptedRecording,
    sample_rate_hz: int,
    *,
    echo_db: float | None = None,
    echo_lag_ms: float = 120.0,
) -> tuple[Pcm, Pcm]:
    """``(caller channel, agent channel)`` at ``sample_rate_hz``, the agent leaking into
    the caller's channel ``echo_db`` under its own level, ``echo_lag_ms`` late (None: no
    leak)."""
    caller = to_rate(rec.caller, rec.sample_rate_hz, sample_rate_hz)
    agent = to_rate(rec.agent, rec.sample_rate_hz, sample_rate_hz)
    n = min(caller.size, agent.size)
    caller, agent = caller[:n], agent[:n]
    if echo_db is None:
        return caller, agent
    lag = round(echo_lag_ms * sample_rate_hz / 1000)
    leak = np.zeros(n)
    leak[lag:] = agent[: n - lag].astype(np.float64) * 10 ** (echo_db / 20)
    mixed: Pcm = np.clip(np.round(caller + leak), -32768, 32767).astype(np.int16)
    return mixed, agent


def recording_plans(
    count: int, seed: int, callers: Sequence[Clip], agents: Sequence[Clip], turns: int = 4
) -> list[list[TurnPlan]]:
    """``count`` calls of ``turns`` turns from these clips (reproducible from ``seed``):
    answers after 150-1500 ms, and in every call but the first of each three a barge-in
    into the second answer, 100-500 ms into its longest run of speech and 700 ms at least
    after the caller's last words, the agent stopping 60-400 ms later."""
    rng = random.Random(seed)
    plans = []
    for k in range(count):
        plan = []
        for i in range(turns):
            agent = rng.choice(list(agents))
            barge = None
            delay = rng.uniform(150, 1500)
            if i == 1 and k % 3 != 0 and i + 1 < turns:
                a, b = max(agent.segments_ms, key=lambda s: s[1] - s[0])
                # The caller pauses 700 ms at least before barging in: a shorter pause is
                # within the detector's merge gap of its last words (one utterance).
                lo = max(a + 100, agent.onset_ms + 700 - delay)
                if lo < b - 200:
                    point = rng.uniform(lo, min(b - 200, lo + 400))
                    barge = BargePlan(point - agent.onset_ms, rng.uniform(60, 400), "flush")
            plan.append(TurnPlan(rng.choice(list(callers)), agent, delay, barge))
        plans.append(plan)
    return plans


@dataclass
class RecordingScore:
    """How a recording's receipt compares with its truth: the errors of the published
    figures (ms), figures withheld with a reason (``unknown``), figures missed or wrong in
    kind (``problems``: a response not measured, a barge-in not found), and published
    figures off by more than their stated uncertainty (``outside``)."""

    ttfs: list[float] = field(default_factory=list)
    stop: list[float] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)  # off by more than their uncertainty

    def add(self, label: str, truth: Sequence[TurnTruth], receipt: Receipt) -> None:
        responses = [t for t in receipt.turns if t.kind == "response"]
        if len(responses) != len(truth):
            self.problems.append(f"{label}: {len(responses)} responses, {len(truth)} true")
            return
        for i, (tr, turn) in enumerate(zip(truth, responses, strict=True)):
            if turn.ttfs_ms is None:
                self.unknown.append(f"{label} turn {i}: ttfs withheld ({turn.reason})")
            else:
                err = turn.ttfs_ms - tr.ttfs_ns / NS_PER_MS
                self.ttfs.append(err)
                self._check(f"{label} turn {i}: ttfs", err, turn.ttfs_uncertainty_ms)
            if tr.barge_onset_ns is None or tr.stop_ns is None:
                continue
            b = responses[i + 1].barge_in if i + 1 < len(responses) else None
            if b is None:
                self.problems.append(f"{label} turn {i + 1}: barge-in not found")
            elif b.stop_latency_ms is None:
                self.unknown.append(f"{label} turn {i + 1}: stop withheld ({b.reason})")
            else:
                true_ms = (tr.stop_ns - tr.barge_onset_ns) / NS_PER_MS
                self.stop.append(b.stop_latency_ms - true_ms)
                self._check(
                    f"{label} turn {i + 1}: stop",
                    b.stop_latency_ms - true_ms,
                    b.stop_uncertainty_ms,
                )

    def _check(self, what: str, err: float, uncertainty: float | None) -> None:
        """A published figure further from the truth than its stated uncertainty (and the
        receipt's 0.1 ms rounding, and the truth's 1 ms windows) is noted."""
        if uncertainty is None or abs(err) > uncertainty + 1.0:
            self.outside.append(f"{what} {err:+.1f} ms, stated {uncertainty} ms")

    @staticmethod
    def stats(values: Sequence[float]) -> tuple[float | None, float | None]:
        """``(p95, max)`` of the absolute errors (None: no figure)."""
        if not values:
            return None, None
        a = np.abs(np.array(values, dtype=np.float64))
        return round(float(np.percentile(a, 95)), 1), round(float(a.max()), 1)
