"""Scripted calls with known truth, on a simulated clock. Pure.

A :class:`CallPlan` describes a conversation: which clip the caller says,
after what delay the agent answers with which clip, how the agent sends its
audio (paced in real time or in bursts ahead of it), and where the caller
barges in and how the agent reacts. :func:`render` turns the plan into the
exact wire messages both sides would exchange, each with its arrival time at
the proxy, together with the ground truth of every turn, computed from the
clips' own speech edges. Tests feed the messages to a
:class:`~voxproxy.session.CallSession` and compare its receipt with the truth;
benchmarks do the same at scale.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from voxproxy.audio.g711 import pcm_to_ulaw
from voxproxy.audio.pcm import pcm_to_bytes
from voxproxy.audio.resample import resample_linear
from voxproxy.clips import Clip
from voxproxy.dialects.raw import RawWire
from voxproxy.dialects.twilio import TwilioAgentWire, TwilioCallerWire
from voxproxy.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Direction, Pcm
from voxproxy.timebase import NS_PER_MS

SendMode = Literal["paced", "burst"]
Reaction = Literal["flush", "cease", "never"]


@dataclass(frozen=True, slots=True)
class BargePlan:
    after_agent_onset_ms: float  # the caller's speech onset, after the agent's onset
    reaction_ms: float  # how long the agent takes to react
    reaction: Reaction


@dataclass(frozen=True, slots=True)
class TurnPlan:
    caller: Clip
    agent: Clip
    delay_ms: float  # caller speech offset -> agent speech onset
    barge: BargePlan | None = None  # the NEXT turn's caller speech barges in on this answer


@dataclass(frozen=True, slots=True)
class CallPlan:
    dialect: Literal["raw", "twilio"]
    send_mode: SendMode
    turns: tuple[TurnPlan, ...]
    caller_gap_ms: float = 700.0  # silence between the agent's end and the next caller turn
    lead_ms: float = 500.0  # caller audio before the first turn
    tail_ms: float = 1500.0  # after the last agent audio
    frame_ms: int = 20
    burst_chunk_ms: int = 200
    burst_speedup: float = 10.0
    jitter_ms: float = 2.0  # network jitter on every message, uniform in [0, jitter]
    caller_noise_dbfs: float | None = None
    seed: int = 0
    sample_rate_hz: int = 16000  # raw only (twilio is 8 kHz)
    caller_bed: Pcm | None = None  # a noise bed (babble, street) under the whole caller track
    caller_bed_dbfs: float = -30.0  # ... at this RMS level


@dataclass(frozen=True, slots=True)
class TurnTruth:
    caller_onset_ns: int
    caller_offset_ns: int
    agent_onset_ns: int  # first audible agent speech, on the playout timeline
    ttfs_ns: int
    barge_onset_ns: int | None = None  # when the NEXT caller speech barged in on this answer
    stop_ns: int | None = None  # end of audible agent audio after that barge-in
    reaction: Reaction | None = None


@dataclass(slots=True)
class ScriptedCall:
    messages: list[tuple[int, Direction, bytes | str]]
    truth: list[TurnTruth]
    end_ns: int
    sample_rate_hz: int
    wire_call_id: str | None = None
    meta: dict[str, object] = field(default_factory=dict)


def to_rate(pcm: Pcm, rate: int, target: int) -> Pcm:
    """A clip at ``target`` Hz: decimation by averaging, else linear interpolation."""
    if rate == target:
        return pcm
    if rate % target == 0:
        f = rate // target
        n = (pcm.size // f) * f
        out: Pcm = pcm[:n].reshape(-1, f).astype(np.int32).mean(axis=1).astype(np.int16)
        return out
    return resample_linear(pcm, rate, target)


def ms_to_ns(ms: float) -> int:
    return round(ms * NS_PER_MS)


def mix_caller_track(
    pieces: list[tuple[int, Pcm]], total: int, noise_dbfs: float | None = None, seed: int = 0
) -> Pcm:
    """The caller's whole stream: each ``(start sample, pcm)`` placed over silence (and
    white noise at ``noise_dbfs``, if given), ``total`` samples long."""
    track = np.zeros(total, dtype=np.float64)
    for start, pcm in pieces:
        n = min(pcm.size, total - start)
        if n > 0:
            track[start : start + n] += pcm[:n]
    if noise_dbfs is not None:
        nrng = np.random.default_rng(seed)
        track += nrng.standard_normal(total) * 32768.0 * 10 ** (noise_dbfs / 20)
    mixed: Pcm = np.clip(track, -32768, 32767).astype(np.int16)
    return mixed


def add_bed(track: Pcm, bed: Pcm, dbfs: float) -> Pcm:
    """``track`` with ``bed`` (looped) under it at an RMS of ``dbfs``."""
    reps = -(-track.size // max(bed.size, 1))
    loop = np.tile(bed.astype(np.float64), reps)[: track.size]
    rms = float(np.sqrt(np.mean(loop**2))) or 1.0
    loop *= 32768.0 * 10 ** (dbfs / 20) / rms
    mixed: Pcm = np.clip(track.astype(np.float64) + loop, -32768, 32767).astype(np.int16)
    return mixed


class _Link:
    """One direction of the network: jitter that never reorders messages (TCP)."""

    def __init__(self, rng: random.Random, jitter_ms: float) -> None:
        self._rng = rng
        self._jitter_ms = jitter_ms
        self._last = -1

    def arrival(self, send_ms: float) -> int:
        t = ms_to_ns(send_ms) + ms_to_ns(self._rng.uniform(0.0, self._jitter_ms))
        t = max(t, self._last + 1)
        self._last = t
        return t


def render(plan: CallPlan) -> ScriptedCall:
    """The wire messages of ``plan`` with their arrival times, and the truth of each turn."""
    rng = random.Random(plan.seed)
    rate = plan.sample_rate_hz if plan.dialect == "raw" else 8000
    spm = rate // 1000  # samples per ms
    frame = plan.frame_ms * spm
    to_caller = _Link(rng, plan.jitter_ms)
    msgs: list[tuple[int, Direction, bytes | str]] = []
    echoes: list[tuple[int, str]] = []  # Twilio mark echoes: (arrival, name)
    truth: list[TurnTruth] = []
    caller_wire = TwilioCallerWire(f"MZsim{plan.seed}", f"CAsim{plan.seed}")
    agent_wire = TwilioAgentWire(caller_wire.stream_sid)

    def agent_audio_msg(pcm: Pcm) -> bytes | str:
        if plan.dialect == "raw":
            return RawWire.audio(pcm_to_bytes(pcm))
        return agent_wire.media(pcm_to_ulaw(pcm))

    caller_track: list[tuple[int, Pcm]] = []  # (start sample, pcm)
    cursor = 0  # playout cursor of agent audio (ns), simulated independently of the proxy
    caller_start_ms = plan.lead_ms
    end_ms = 0.0
    for i, turn in enumerate(plan.turns):
        c, a, barge = turn.caller, turn.agent, turn.barge
        caller_track.append((round(caller_start_ms * spm), to_rate(c.pcm, c.sample_rate_hz, rate)))
        c_on = caller_start_ms + c.onset_ms
        c_off = caller_start_ms + c.offset_ms
        agent_pcm = to_rate(a.pcm, a.sample_rate_hz, rate)
        # The agent starts sending so that its speech onset lands `delay_ms` after the
        # caller's offset, but never before its previous audio has played out.
        audio_start_ms = max(c_off + turn.delay_ms - a.onset_ms, cursor / NS_PER_MS + 50.0)
        chunk = (plan.frame_ms if plan.send_mode == "paced" else plan.burst_chunk_ms) * spm
        speed = 1.0 if plan.send_mode == "paced" else plan.burst_speedup
        sends = [
            (audio_start_ms + (k / spm) / speed, agent_pcm[k : k + chunk])
            for k in range(0, agent_pcm.size, chunk)
        ]
        # Where each chunk would play without jitter: this schedules the barge-in.
        starts: list[tuple[int, int, Pcm, int]] = []  # (arrival, play start, pcm, position)
        sim_cursor, sim_last, pos = cursor, to_caller._last, 0
        for t_send, piece in sends:
            arrival = max(ms_to_ns(t_send), sim_last + 1)
            sim_last = arrival
            play = max(arrival, sim_cursor)
            starts.append((arrival, play, piece, pos))
            sim_cursor = play + piece.size * 1_000_000_000 // rate
            pos += piece.size
        agent_onset_ns = _play_time(starts, round(a.onset_ms * spm), rate)
        barge_onset_ms: float | None = None
        stop_send_ms: float | None = None
        if barge is not None:
            barge_onset_ms = agent_onset_ns / NS_PER_MS + barge.after_agent_onset_ms
            if barge.reaction != "never":
                stop_send_ms = barge_onset_ms + barge.reaction_ms
        # Send, with real jitter, up to where the agent stops.
        actual: list[tuple[int, int, Pcm, int]] = []
        pos = 0
        for t_send, piece in sends:
            if stop_send_ms is not None and t_send >= stop_send_ms:
                break
            arrival = to_caller.arrival(t_send)
            msgs.append((arrival, AGENT_TO_CALLER, agent_audio_msg(piece)))
            play = max(arrival, cursor)
            actual.append((arrival, play, piece, pos))
            pos += piece.size
            cursor = play + piece.size * 1_000_000_000 // rate
        # The truth comes from what was really sent, with its jitter.
        starts = actual
        agent_onset_ns = _play_time(starts, round(a.onset_ms * spm), rate)
        mark_name: str | None = None
        if plan.dialect == "twilio":
            mark_name = f"resp-{i}"
            t_mark = sends[-1][0] if stop_send_ms is None else min(stop_send_ms, sends[-1][0])
            mark_arrival = to_caller.arrival(t_mark)
            msgs.append((mark_arrival, AGENT_TO_CALLER, agent_wire.mark(mark_name)))
            echo_at = max(mark_arrival, cursor)
        stop_ns: int | None = None
        if barge is not None and barge.reaction == "flush":
            assert stop_send_ms is not None
            flush_arrival = to_caller.arrival(stop_send_ms)
            flush = RawWire.clear() if plan.dialect == "raw" else agent_wire.clear()
            msgs.append((flush_arrival, AGENT_TO_CALLER, flush))
            # Audible speech ends at the flush, or earlier if the flush only cut silence.
            cursor = min(cursor, flush_arrival)
            stop_ns = _last_speech_before(a, rate, starts, cursor)
            echo_at = max(flush_arrival, min(echo_at, flush_arrival)) if mark_name else 0
        elif barge is not None:
            stop_ns = _last_speech_before(a, rate, starts, cursor)
        if mark_name is not None:
            echoes.append((echo_at, mark_name))
        truth.append(
            TurnTruth(
                caller_onset_ns=ms_to_ns(c_on),
                caller_offset_ns=ms_to_ns(c_off),
                agent_onset_ns=agent_onset_ns,
                ttfs_ns=agent_onset_ns - ms_to_ns(c_off),
                barge_onset_ns=None if barge_onset_ms is None else ms_to_ns(barge_onset_ms),
                stop_ns=stop_ns,
                reaction=barge.reaction if barge is not None else None,
            )
        )
        if barge_onset_ms is not None and i + 1 < len(plan.turns):
            caller_start_ms = barge_onset_ms - plan.turns[i + 1].caller.onset_ms
        else:
            caller_start_ms = cursor / NS_PER_MS + plan.caller_gap_ms
        end_ms = max(end_ms, cursor / NS_PER_MS, c_off)
    end_ms += plan.tail_ms
    # The caller's audio: continuous frames from t=0, each sent when its interval ends.
    total = round(end_ms * spm)
    total -= total % frame
    caller_all = mix_caller_track(caller_track, total, plan.caller_noise_dbfs, plan.seed)
    if plan.caller_bed is not None:
        caller_all = add_bed(
            caller_all, to_rate(plan.caller_bed, 16000, rate), plan.caller_bed_dbfs
        )
    to_agent = _Link(rng, plan.jitter_ms)
    upstream: list[tuple[float, bytes | str | tuple[str]]] = []
    if plan.dialect == "twilio":
        upstream.append((0.0, caller_wire.connected()))
        upstream.append((0.0, caller_wire.start()))
    else:
        upstream.append((0.0, RawWire.start(rate)))
    frames = [(k + frame) / spm for k in range(0, total, frame)]
    echo_iter = iter(sorted(echoes))
    next_echo = next(echo_iter, None)
    for k, t_ms in zip(range(0, total, frame), frames, strict=True):
        while next_echo is not None and next_echo[0] <= ms_to_ns(t_ms):
            upstream.append((next_echo[0] / NS_PER_MS, caller_wire.mark(next_echo[1])))
            next_echo = next(echo_iter, None)
        piece = caller_all[k : k + frame]
        if plan.dialect == "raw":
            upstream.append((t_ms, pcm_to_bytes(piece)))
        else:
            upstream.append((t_ms, caller_wire.media(pcm_to_ulaw(piece))))
    if plan.dialect == "twilio":
        upstream.append((end_ms, caller_wire.stop()))
    for t_ms, payload in upstream:
        assert not isinstance(payload, tuple)
        msgs.append((to_agent.arrival(t_ms), CALLER_TO_AGENT, payload))
    msgs.sort(key=lambda m: m[0])
    return ScriptedCall(
        messages=msgs,
        truth=truth,
        end_ns=max(msgs[-1][0], ms_to_ns(end_ms)) + 1,
        sample_rate_hz=rate,
        wire_call_id=caller_wire.call_sid if plan.dialect == "twilio" else None,
    )


def _last_speech_before(
    clip: Clip, rate: int, starts: list[tuple[int, int, Pcm, int]], end_ns: int
) -> int:
    """Truth: the last audible speech sample of ``clip`` when its audio ends at ``end_ns``."""
    best: int | None = None
    spm = rate // 1000
    for a_ms, b_ms in clip.segments_ms:
        for p_ms in (a_ms, b_ms):
            del p_ms
        a_pos, b_pos = round(a_ms * spm), round(b_ms * spm)
        a_t = _play_time(starts, a_pos, rate)
        b_t = _play_time(starts, b_pos, rate)
        if a_t >= end_ns:
            break
        best = min(b_t, end_ns)
    return best if best is not None else end_ns


def _play_time(starts: list[tuple[int, int, Pcm, int]], sample_pos: int, rate: int) -> int:
    for _arr, play, piece, p0 in starts:
        if p0 <= sample_pos < p0 + piece.size:
            return play + (sample_pos - p0) * 1_000_000_000 // rate
    last = starts[-1]
    return last[1] + (sample_pos - last[3]) * 1_000_000_000 // rate
