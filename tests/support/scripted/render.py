"""Rendering a scripted call: the wire messages both sides would exchange, each with
its arrival time at the proxy, and the ground truth of every turn, computed from the
clips' own speech edges. One renderer for every wire; the wire's kit
(:mod:`support.scripted.kits`) supplies the messages.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from support.scripted.heard import add_bed, caller_noise, heard_truth
from support.scripted.kits import Realtime, call_kit, wire_kit
from support.scripted.plan import (
    BargePlan,
    CallPlan,
    ScriptedCall,
    TurnPlan,
    TurnTruth,
    WirePlan,
)
from voxproxy.clips import Clip
from voxproxy.core.analysis.truth import heard_runs, last_speech_end_ms
from voxproxy.core.audio.resample import resample_linear
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Direction, Pcm
from voxproxy.core.timebase import NS_PER_MS, NS_PER_S
from voxproxy.loadgen.steps import edges_at_rate, segments_at_rate, speech_windows_at_rate


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


class _Link:
    """One direction of the network: jitter that never reorders messages (TCP)."""

    def __init__(self, rng: random.Random, jitter_ms: float) -> None:
        self._rng = rng
        self._jitter_ms = jitter_ms
        self._last = -1

    @property
    def last(self) -> int:
        """The last arrival on this link (ns; -1 before the first)."""
        return self._last

    def arrival(self, send_ms: float) -> int:
        t = ms_to_ns(send_ms) + ms_to_ns(self._rng.uniform(0.0, self._jitter_ms))
        t = max(t, self._last + 1)
        self._last = t
        return t


def played_ns(starts: list[tuple[int, int, Pcm, int]], t_ns: int, rate: int) -> int:
    """How much of the chunks in ``starts`` had played by ``t_ns`` (playout rule, no flush)."""
    total = 0
    for _arrival, play, piece, _pos in starts:
        dur = piece.size * NS_PER_S // rate
        total += min(dur, max(0, t_ns - play))
    return total


def _last_speech_before(
    clip: Clip, rate: int, starts: list[tuple[int, int, Pcm, int]], end_ns: int
) -> int:
    """Truth: the last audible speech sample of ``clip`` when its audio ends at ``end_ns``:
    its speech runs as they played, as the truth rule takes them (``heard_runs``: a click
    of speech before the cut is none). A cut inside one of a run's own pauses ends the
    speech at the last speech window before it (MEASUREMENT.md 2's offset), not at the
    cut."""
    runs: list[tuple[int, int]] = []
    spm = rate // 1000
    for a_ms, b_ms in segments_at_rate(clip, rate):
        a_t = _play_time(starts, round(a_ms * spm), rate)
        b_t = _play_time(starts, round(b_ms * spm), rate)
        if a_t >= end_ns:
            break
        if b_t > end_ns:  # cut inside the run: the last whole ms that played before it
            lo, hi = a_ms, b_ms
            while hi - lo > 1.0:
                mid = (lo + hi) / 2
                if _play_time(starts, round(mid * spm), rate) <= end_ns:
                    lo = mid
                else:
                    hi = mid
            end_ms = last_speech_end_ms(speech_windows_at_rate(clip, rate), a_ms, lo)
            b_t = (
                end_ns
                if end_ms >= lo
                else min(end_ns, _play_time(starts, round(end_ms * spm), rate))
            )
        runs.append((a_t, b_t))
    heard = heard_runs(runs)
    return heard[-1][1] if heard else end_ns


def _play_time(starts: list[tuple[int, int, Pcm, int]], sample_pos: int, rate: int) -> int:
    for _arr, play, piece, p0 in starts:
        if p0 <= sample_pos < p0 + piece.size:
            return play + (sample_pos - p0) * 1_000_000_000 // rate
    last = starts[-1]
    return last[1] + (sample_pos - last[3]) * 1_000_000_000 // rate


# A chunk of agent audio on the caller's playout: (arrival ns, play ns, pcm, first sample).
_Chunk = tuple[int, int, Pcm, int]
# An OpenAI Realtime message whose arrival is part of the truth: ("created" |
# "tool_start" | "tool_finish", turn).
_Tag = tuple[str, int]
# A message at its send time (ms), before its link gives it an arrival time.
_Timed = tuple[float, bytes | str, _Tag | None]
# A played-marker's echo: (when the caller sends it back, ns; the marker's name).
_Echo = tuple[int, str]


@dataclass(frozen=True, slots=True)
class _Answer:
    """One turn's agent answer as it was sent."""

    index: int  # the turn
    clip: Clip
    sends: list[tuple[float, Pcm]]  # every chunk the agent would send, at its send ms
    played: list[_Chunk]  # the chunks it did send, where they arrived and played
    stop_send_ms: float | None  # when the agent reacts to a barge-in (None: it does not)
    last_send_ms: float  # when its last chunk was sent


class _RealtimeServer:
    """The OpenAI Realtime server's events (and its client's tool-call replies), each at
    its own send time: sent in time order after the turns, interleaved with the audio
    deltas. Also the truncations and tool calls of the truth."""

    def __init__(self, kit: Realtime, plan: WirePlan) -> None:
        self.server, self.client = kit.server, kit.client
        self.plan = plan  # the server's VAD and tool timings, the client's claim offset
        self.control: list[_Timed] = []
        self.client_extra: list[_Timed] = []
        self.truncations: list[tuple[int, int, int]] = []
        self.tools: list[list[object]] = []  # [call id, start arrival, finish arrival]
        self.last_done_ms = 0.0  # when the server's last response was done
        # The server opens with its defaults; the client's session.update (sent at 1 ms,
        # with the caller's audio) sets the formats, and the server confirms them.
        sid = f"sess_{plan.seed}"
        self.control.append((0.0, self.server.session_created(sid), None))
        self.control.append((4.0, self.server.session_updated(sid, kit.fin, kit.fout), None))

    def answer_opens(
        self, i: int, c_on: float, c_off: float, audio_start_ms: float, stage: dict[str, int]
    ) -> float:
        """Turn ``i``'s events from the caller's speech (``c_on`` to ``c_off``) to the
        answer's ``response.created``, with a function call first if the turn has one;
        records the VAD end in ``stage`` and returns when the answer's audio starts."""
        user_item = f"item_u{i}"
        start_pos = max(0, round(c_on - self.plan.vad_prefix_ms))
        self.control.append(
            (c_on + self.plan.vad_detect_ms, self.server.speech_started(start_pos, user_item), None)
        )
        stop_pos = round(c_off + self.plan.vad_silence_ms)
        stage["server_speech_stopped"] = stop_pos * NS_PER_MS  # where the position lies
        self.control.append(
            (float(stop_pos), self.server.speech_stopped(stop_pos, user_item), None)
        )
        self.control.append((stop_pos + 1.0, self.server.committed(user_item), None))
        # One response at a time: a new one is created after the last is done.
        created_ms = max(min(stop_pos + 40.0, audio_start_ms - 10.0), self.last_done_ms + 1.0)
        audio_start_ms = max(audio_start_ms, created_ms + 10.0)
        if self.plan.tool_every and i % self.plan.tool_every == 0:
            created_ms = self._tool_call(i, created_ms)
            audio_start_ms = max(audio_start_ms, created_ms + 20.0)
        created = self.server.response_created(f"resp_{i}")
        self.control.append((created_ms, created, ("created", i)))
        return audio_start_ms

    def _tool_call(self, i: int, created_ms: float) -> float:
        """A response of turn ``i`` that is a function call, created at ``created_ms``, and
        the client's output and ``response.create`` ``tool_latency_ms`` after the
        arguments; returns when the audio response is created."""
        tool_resp = f"resp_{i}_tool"
        call_id = f"call_{i}"
        self.control.append((created_ms, self.server.response_created(tool_resp), None))
        args_ms = created_ms + 5.0
        args = f'{{"order": "A{i:04d}", "turn": {i}}}'
        self.control.append(
            (
                args_ms,
                self.server.function_call_arguments_done(
                    tool_resp, f"item_{i}_fc", call_id, "lookup_order", args
                ),
                ("tool_start", i),
            )
        )
        self.control.append((args_ms + 1.0, self.server.response_done(tool_resp), None))
        output_ms = args_ms + self.plan.tool_latency_ms
        self.client_extra.append(
            (
                output_ms,
                self.client.function_call_output(call_id, '{"status": "shipped"}'),
                ("tool_finish", i),
            )
        )
        self.client_extra.append((output_ms + 0.5, self.client.response_create(), None))
        self.tools.append([call_id, 0, 0])
        return output_ms + 30.0

    def cancelled(self, i: int, at_ms: float, reason: str) -> None:
        """Turn ``i``'s response done at ``at_ms``, cancelled for ``reason``."""
        done = self.server.response_done(f"resp_{i}", "cancelled", reason)
        self.control.append((at_ms, done, None))
        self.last_done_ms = at_ms

    def answer_done(self, i: int, last_send_ms: float) -> None:
        """Turn ``i``'s answer sent to its end: its audio and its response done."""
        self.control.append(
            (last_send_ms + 0.5, self.server.audio_done(f"resp_{i}", f"item_{i}"), None)
        )
        self.control.append((last_send_ms + 1.0, self.server.response_done(f"resp_{i}"), None))
        self.last_done_ms = last_send_ms + 1.0

    def tool_arrived(self, tag: _Tag, arrival: int) -> None:
        """The truth of a tool call: its start's or its finish's arrival."""
        tool = next(t for t in self.tools if t[0] == f"call_{tag[1]}")
        tool[1 if tag[0] == "tool_start" else 2] = arrival


class _CallRender:
    """The state of one render: the links' jitter (one rng, its calls in a fixed order),
    the messages so far, the agent's playout cursor and the caller's schedule."""

    def __init__(self, plan: CallPlan | WirePlan) -> None:
        self.plan = plan
        self.rng = random.Random(plan.seed)
        self.kit = call_kit(plan) if isinstance(plan, CallPlan) else wire_kit(plan)
        self.crate, self.arate = self.kit.caller_rate, self.kit.agent_rate
        self.cspm, self.aspm = self.crate // 1000, self.arate // 1000
        self.frame = plan.frame_ms * self.cspm  # caller frame, samples
        chunk_ms = plan.frame_ms if plan.send_mode == "paced" else plan.burst_chunk_ms
        self.chunk_ms = max(chunk_ms, self.kit.min_chunk_ms)
        self.speed = 1.0 if plan.send_mode == "paced" else plan.burst_speedup
        self.to_caller = _Link(self.rng, plan.jitter_ms)
        self.msgs: list[tuple[int, Direction, bytes | str]] = []
        self.echoes: list[_Echo] = []
        self.truth: list[TurnTruth] = []
        self.stages: list[dict[str, int]] = []  # a WirePlan's per turn (the Realtime truth)
        self.caller_track: list[tuple[int, Pcm]] = []
        self.placed: list[tuple[float, int, Pcm, Clip]] = []  # each turn's caller clip
        self.caller_total = 0  # samples of the caller's track
        self.cursor = 0  # ns: where the agent's playout ends so far
        self.caller_start_ms = plan.lead_ms
        self.end_ms = 0.0
        self.realtime = (
            _RealtimeServer(self.kit, plan)
            if isinstance(self.kit, Realtime) and isinstance(plan, WirePlan)
            else None
        )

    def turn(self, i: int, turn: TurnPlan) -> None:
        """Turn ``i``: the caller's speech, the agent's answer and how it ends, its truth,
        and when the caller speaks next."""
        c_on, c_off = self._place_caller(turn.caller)
        agent_onset_ms = edges_at_rate(turn.agent, self.arate)[0]
        audio_start_ms = max(c_off + turn.delay_ms - agent_onset_ms, self.cursor / NS_PER_MS + 50.0)
        stage: dict[str, int] = {}
        if self.realtime is not None:
            audio_start_ms = self.realtime.answer_opens(i, c_on, c_off, audio_start_ms, stage)
        sends = self._chunk_sends(turn.agent, audio_start_ms)
        barge_onset_ms, stop_send_ms = self._schedule_barge(turn, sends)
        answer = self._send_answer(i, turn.agent, sends, stop_send_ms, audio_start_ms)
        agent_onset_ns = _play_time(answer.played, round(agent_onset_ms * self.aspm), self.arate)
        if answer.played:
            stage["first_audio_delta"] = answer.played[0][0]
        echo = self._place_mark(answer)
        stop_ns, echo = self._end_answer(turn.barge, answer, echo)
        if echo is not None:
            self.echoes.append(echo)
        self.stages.append(stage)
        self.truth.append(
            TurnTruth(
                caller_onset_ns=ms_to_ns(c_on),
                caller_offset_ns=ms_to_ns(c_off),
                agent_onset_ns=agent_onset_ns,
                ttfs_ns=agent_onset_ns - ms_to_ns(c_off),
                barge_onset_ns=None if barge_onset_ms is None else ms_to_ns(barge_onset_ms),
                stop_ns=stop_ns,
                reaction=turn.barge.reaction if turn.barge is not None else None,
            )
        )
        self._schedule_next_caller(i, barge_onset_ms, c_off)

    def _place_caller(self, clip: Clip) -> tuple[float, float]:
        """The caller's clip on its track at ``caller_start_ms``; returns its speech onset
        and offset (ms), read from the audio the wire carries, at its rate (an 8 kHz wire
        averages away what lies above 4 kHz: MEASUREMENT.md 2, ``edges_at_rate``)."""
        start = round(self.caller_start_ms * self.cspm)
        pcm = to_rate(clip.pcm, clip.sample_rate_hz, self.crate)
        self.caller_track.append((start, pcm))
        self.placed.append((self.caller_start_ms, start, pcm, clip))
        onset_ms, offset_ms = edges_at_rate(clip, self.crate)
        return self.caller_start_ms + onset_ms, self.caller_start_ms + offset_ms

    def _chunk_sends(self, clip: Clip, audio_start_ms: float) -> list[tuple[float, Pcm]]:
        """The agent's clip in chunks of ``chunk_ms``, each at its send time (ms): paced,
        or ``speed`` times faster than real time in bursts."""
        pcm = to_rate(clip.pcm, clip.sample_rate_hz, self.arate)
        step = self.chunk_ms * self.aspm
        return [
            (audio_start_ms + (k / self.aspm) / self.speed, pcm[k : k + step])
            for k in range(0, pcm.size, step)
        ]

    def _planned_playout(self, sends: list[tuple[float, Pcm]]) -> list[_Chunk]:
        """Where each chunk would play without jitter: this schedules the barge-in."""
        starts: list[_Chunk] = []
        sim_cursor, sim_last, pos = self.cursor, self.to_caller.last, 0
        for t_send, piece in sends:
            arrival = max(ms_to_ns(t_send), sim_last + 1)
            sim_last = arrival
            play = max(arrival, sim_cursor)
            starts.append((arrival, play, piece, pos))
            sim_cursor = play + piece.size * NS_PER_S // self.arate
            pos += piece.size
        return starts

    def _schedule_barge(
        self, turn: TurnPlan, sends: list[tuple[float, Pcm]]
    ) -> tuple[float | None, float | None]:
        """The caller's barge-in onset, ``after_agent_onset_ms`` after the answer's onset
        as it would play, and when the agent reacts to it (send ms); None for no barge-in,
        or an agent that never reacts."""
        planned = self._planned_playout(sends)
        onset_ms = edges_at_rate(turn.agent, self.arate)[0]
        planned_onset_ns = _play_time(planned, round(onset_ms * self.aspm), self.arate)
        barge = turn.barge
        if barge is None:
            return None, None
        barge_onset_ms = planned_onset_ns / NS_PER_MS + barge.after_agent_onset_ms
        if barge.reaction == "never":
            return barge_onset_ms, None
        return barge_onset_ms, barge_onset_ms + barge.reaction_ms

    def _send_answer(
        self,
        i: int,
        clip: Clip,
        sends: list[tuple[float, Pcm]],
        stop_send_ms: float | None,
        audio_start_ms: float,
    ) -> _Answer:
        """The answer's chunks sent up to ``stop_send_ms``, each played from its arrival
        or when the playout before it ends (moves the playout cursor)."""
        played: list[_Chunk] = []
        pos = 0
        last_send_ms = audio_start_ms
        for t_send, piece in sends:
            if stop_send_ms is not None and t_send >= stop_send_ms:
                break
            arrival = self.to_caller.arrival(t_send)
            self.msgs.append((arrival, AGENT_TO_CALLER, self.kit.agent_audio(piece, i)))
            play = max(arrival, self.cursor)
            played.append((arrival, play, piece, pos))
            pos += piece.size
            self.cursor = play + piece.size * NS_PER_S // self.arate
            last_send_ms = t_send
        return _Answer(i, clip, sends, played, stop_send_ms, last_send_ms)

    def _place_mark(self, answer: _Answer) -> _Echo | None:
        """The agent's played-marker after the answer (or at its reaction to a barge-in),
        if the wire has them; its echo comes when the audio before it has played."""
        if not self.kit.marks:
            return None
        name = f"resp-{answer.index}"
        last_ms = answer.sends[-1][0]
        t_mark = last_ms if answer.stop_send_ms is None else min(answer.stop_send_ms, last_ms)
        mark_arrival = self.to_caller.arrival(t_mark)
        self.msgs.append((mark_arrival, AGENT_TO_CALLER, self.kit.mark(name)))
        return max(mark_arrival, self.cursor), name

    def _end_answer(
        self, barge: BargePlan | None, answer: _Answer, echo: _Echo | None
    ) -> tuple[int | None, _Echo | None]:
        """How the answer ends: flushed or ceased on a barge-in, or talked through or sent
        to its end. Returns the true stop of its audible speech after a barge-in, and its
        marker's echo as the flush left it (None: never reported as played)."""
        stop_ns: int | None = None
        if barge is not None and barge.reaction == "flush":
            assert answer.stop_send_ms is not None
            flush_arrival = self._flush(answer, answer.stop_send_ms)
            # Audible speech ends at the flush, or earlier if the flush only cut silence.
            self.cursor = min(self.cursor, flush_arrival)
            stop_ns = _last_speech_before(answer.clip, self.arate, answer.played, self.cursor)
            echo = self._echo_after_flush(echo, flush_arrival)
        elif barge is not None:
            stop_ns = _last_speech_before(answer.clip, self.arate, answer.played, self.cursor)
            if self.realtime is not None and answer.stop_send_ms is not None:
                self.realtime.cancelled(answer.index, answer.stop_send_ms, "turn_detected")
        if self.realtime is not None and (barge is None or barge.reaction == "never"):
            self.realtime.answer_done(answer.index, answer.last_send_ms)
        return stop_ns, echo

    def _flush(self, answer: _Answer, stop_send_ms: float) -> int:
        """The agent's flush at ``stop_send_ms`` (the client's truncate on OpenAI
        Realtime); returns its arrival."""
        if self.realtime is not None:
            return self._truncate(self.realtime, answer, stop_send_ms)
        flush_arrival = self.to_caller.arrival(stop_send_ms)
        self.msgs.append((flush_arrival, AGENT_TO_CALLER, self.kit.flush()))
        return flush_arrival

    def _truncate(self, realtime: _RealtimeServer, answer: _Answer, stop_send_ms: float) -> int:
        """OpenAI Realtime: the client flushes its own playout and tells the server what
        it played (``item.truncate``, ``response.cancel``); the server cancels the
        response. Returns the truncate's arrival."""
        i = answer.index
        t_sent = ms_to_ns(stop_send_ms)
        flush_arrival = t_sent + ms_to_ns(self.rng.uniform(0.0, self.plan.jitter_ms))
        claimed = (
            played_ns(answer.played, t_sent, self.arate) / NS_PER_MS + realtime.plan.claim_offset_ms
        )
        claimed_ms = max(0, round(claimed))
        truncate = realtime.client.truncate(f"item_{i}", claimed_ms)
        self.msgs.append((flush_arrival, CALLER_TO_AGENT, truncate))
        self.msgs.append((flush_arrival + 1, CALLER_TO_AGENT, realtime.client.response_cancel()))
        realtime.truncations.append(
            (flush_arrival, claimed_ms, played_ns(answer.played, flush_arrival, self.arate))
        )
        realtime.cancelled(i, stop_send_ms + 5.0, "client_cancelled")
        if len(answer.played) < len(answer.sends):
            # A delta already on its way when the cancel reached the server: the client
            # does not play it (nor does the playout model).
            late_ms = max(stop_send_ms + 2.0, flush_arrival / NS_PER_MS + 1.0)
            late = self.kit.agent_audio(answer.sends[len(answer.played)][1], i)
            self.msgs.append((self.to_caller.arrival(late_ms), AGENT_TO_CALLER, late))
        return flush_arrival

    def _echo_after_flush(self, echo: _Echo | None, flush_arrival: int) -> _Echo | None:
        """A pending marker's echo after a flush: at the flush itself (Twilio as first
        scripted), by the flush (wires that return pending markers at a flush), else
        as it played, unless the flush dropped it."""
        if echo is None:
            return None
        echo_at, name = echo
        if self.kit.echo_at_flush:
            return flush_arrival, name
        if self.kit.echo_on_flush:
            return min(echo_at, flush_arrival), name
        if echo_at > flush_arrival:
            return None  # dropped by the flush: never reported as played
        return echo

    def _schedule_next_caller(self, i: int, barge_onset_ms: float | None, c_off: float) -> None:
        """The next caller turn: its speech onset at the barge-in, else ``caller_gap_ms``
        after the agent's playout; and the call's end so far."""
        if barge_onset_ms is not None and i + 1 < len(self.plan.turns):
            onset_ms = edges_at_rate(self.plan.turns[i + 1].caller, self.crate)[0]
            self.caller_start_ms = barge_onset_ms - onset_ms
        else:
            self.caller_start_ms = self.cursor / NS_PER_MS + self.plan.caller_gap_ms
        self.end_ms = max(self.end_ms, self.cursor / NS_PER_MS, c_off)

    def send_server_events(self) -> None:
        """OpenAI Realtime: the server's events, in send order, over their own link (they
        interleave with deltas)."""
        if self.realtime is None:
            return
        ctl_link = _Link(self.rng, self.plan.jitter_ms)
        for t_ms, message, tag in sorted(self.realtime.control, key=lambda x: x[0]):
            arrival = ctl_link.arrival(t_ms)
            self.msgs.append((arrival, AGENT_TO_CALLER, message))
            self._stamp(tag, arrival)

    def send_caller_side(self) -> None:
        """The caller's side over its link: the wire's setup, the caller's audio in
        continuous frames from t=0 (each sent when its interval ends) with the markers'
        echoes, OpenAI Realtime's tool replies, and the wire's end at the call's end."""
        total = round(self.end_ms * self.cspm)
        total -= total % self.frame
        self.caller_total = total
        caller_all = self._caller_audio(total)
        to_agent = _Link(self.rng, self.plan.jitter_ms)
        setup_ms = 1.0 if self.realtime is not None else 0.0
        upstream: list[_Timed] = [(setup_ms, m, None) for m in self.kit.setup()]
        frames = [(k, (k + self.frame) / self.cspm) for k in range(0, total, self.frame)]
        echo_iter = iter(sorted(self.echoes))
        next_echo = next(echo_iter, None)
        for k, t_ms in frames:
            while next_echo is not None and next_echo[0] <= ms_to_ns(t_ms):
                upstream.append((next_echo[0] / NS_PER_MS, self.kit.echo(next_echo[1]), None))
                next_echo = next(echo_iter, None)
            frame = caller_all[k : k + self.frame]
            upstream.append((t_ms, self.kit.caller_audio(frame), None))
        if self.realtime is not None:
            upstream.extend(self.realtime.client_extra)
        upstream.extend((self.end_ms, m, None) for m in self.kit.end())
        for t_ms, payload, tag in sorted(upstream, key=lambda x: x[0]):
            arrival = to_agent.arrival(t_ms)
            self.msgs.append((arrival, CALLER_TO_AGENT, payload))
            self._stamp(tag, arrival)

    def _caller_audio(self, total: int) -> Pcm:
        """The caller's whole track, ``total`` samples: its clips, and a :class:`CallPlan`'s
        noise and noise bed."""
        plan = self.plan
        if not isinstance(plan, CallPlan):
            return mix_caller_track(self.caller_track, total)
        caller_all = mix_caller_track(self.caller_track, total, plan.caller_noise_dbfs, plan.seed)
        if plan.caller_bed is not None:
            bed = to_rate(plan.caller_bed, 16000, self.crate)
            caller_all = add_bed(caller_all, bed, plan.caller_bed_dbfs)
        return caller_all

    def _stamp(self, tag: _Tag | None, arrival: int) -> None:
        """A tagged message's arrival into the Realtime truth: a response's creation into
        its turn's stages, a tool call's start or finish into its tool."""
        if tag is None:
            return
        if tag[0] == "created":
            self.stages[tag[1]]["response_created"] = arrival
        elif self.realtime is not None:
            self.realtime.tool_arrived(tag, arrival)

    def result(self) -> ScriptedCall:
        """The messages in arrival order, the truth, and a :class:`WirePlan`'s meta."""
        self.msgs.sort(key=lambda m: m[0])
        return ScriptedCall(
            messages=self.msgs,
            truth=self.truth,
            end_ns=max(self.msgs[-1][0], ms_to_ns(self.end_ms)) + 1,
            sample_rate_hz=self.crate,
            wire_call_id=self.kit.wire_call_id,
            meta=self._meta(),
        )

    def _meta(self) -> dict[str, object]:
        if not isinstance(self.plan, WirePlan):
            return {}
        realtime = self.realtime
        return {
            "stages": self.stages,
            "truncations": [] if realtime is None else realtime.truncations,
            "tools": [] if realtime is None else [tuple(t) for t in realtime.tools],
        }


def render(plan: CallPlan | WirePlan) -> ScriptedCall:
    """The wire messages of ``plan`` with their arrival times, and the truth of each turn.

    Every wire goes through the same steps; ``meta`` (a :class:`WirePlan`'s only) holds
    the OpenAI Realtime truth: ``"stages"`` (per turn: the true proxy-clock times of the
    server's VAD end position, ``response.created`` and the first delta),
    ``"truncations"`` (arrival, claimed ms, and the ns of the item that had really played
    by the arrival) and ``"tools"`` (call id, start and finish arrivals).
    """
    call = _CallRender(plan)
    for i, turn in enumerate(plan.turns):
        call.turn(i, turn)
    call.end_ms += plan.tail_ms
    call.send_server_events()
    call.send_caller_side()
    if isinstance(plan, CallPlan):  # under its noise, the caller's truth is what is heard
        bed = None if plan.caller_bed is None else to_rate(plan.caller_bed, 16000, call.crate)
        noise = caller_noise(plan, call.caller_total, bed)
        call.truth = heard_truth(call.truth, call.placed, noise, call.crate)
    return call.result()
