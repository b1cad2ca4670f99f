"""Rendering a scripted call: the wire messages both sides would exchange, each with
its arrival time at the proxy, and the ground truth of every turn, computed from the
clips' own speech edges. One renderer for every wire; the wire's kit
(:mod:`voxproxy.scripted.kits`) supplies the messages.
"""

from __future__ import annotations

import random

import numpy as np

from voxproxy.analysis.truth import heard_runs, last_speech_end_ms, named_speech_windows
from voxproxy.audio.resample import resample_linear
from voxproxy.clips import Clip
from voxproxy.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Direction, Pcm
from voxproxy.scripted.kits import Realtime, call_kit, wire_kit
from voxproxy.scripted.plan import CallPlan, ScriptedCall, TurnTruth, WirePlan
from voxproxy.timebase import NS_PER_MS, NS_PER_S


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
    for a_ms, b_ms in clip.segments_ms:
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
            end_ms = last_speech_end_ms(
                named_speech_windows(clip.name, clip.pcm, clip.sample_rate_hz), a_ms, lo
            )
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


def render(plan: CallPlan | WirePlan) -> ScriptedCall:
    """The wire messages of ``plan`` with their arrival times, and the truth of each turn.

    Every wire goes through the same steps; ``meta`` (a :class:`WirePlan`'s only) holds
    the OpenAI Realtime truth: ``"stages"`` (per turn: the true proxy-clock times of the
    server's VAD end position, ``response.created`` and the first delta),
    ``"truncations"`` (arrival, claimed ms, and the ns of the item that had really played
    by the arrival) and ``"tools"`` (call id, start and finish arrivals).
    """
    rng = random.Random(plan.seed)
    kit = call_kit(plan) if isinstance(plan, CallPlan) else wire_kit(plan)
    realtime = kit if isinstance(kit, Realtime) else None
    rt = plan if isinstance(plan, WirePlan) else None  # the Realtime server's timings
    crate, arate = kit.caller_rate, kit.agent_rate
    cspm, aspm = crate // 1000, arate // 1000
    frame = plan.frame_ms * cspm
    to_caller = _Link(rng, plan.jitter_ms)
    msgs: list[tuple[int, Direction, bytes | str]] = []
    echoes: list[tuple[int, str]] = []
    truth: list[TurnTruth] = []
    # Server events of OpenAI Realtime, sent in their own time order after the loop.
    control: list[tuple[float, str, tuple[str, int] | None]] = []
    client_extra: list[tuple[float, bytes | str, tuple[str, int] | None]] = []
    stages: list[dict[str, int]] = []
    truncations: list[tuple[int, int, int]] = []
    tools: list[list[object]] = []
    caller_track: list[tuple[int, Pcm]] = []
    cursor = 0
    caller_start_ms = plan.lead_ms
    end_ms = 0.0
    last_done_ms = 0.0  # OpenAI Realtime: when the server's last response was done
    chunk_ms = plan.frame_ms if plan.send_mode == "paced" else plan.burst_chunk_ms
    chunk_ms = max(chunk_ms, kit.min_chunk_ms)
    speed = 1.0 if plan.send_mode == "paced" else plan.burst_speedup
    if realtime is not None:
        # The server opens with its defaults; the client's session.update (sent at 1 ms,
        # below) sets the formats, and the server confirms them.
        sid = f"sess_{plan.seed}"
        control.append((0.0, realtime.server.session_created(sid), None))
        control.append(
            (4.0, realtime.server.session_updated(sid, realtime.fin, realtime.fout), None)
        )
    for i, turn in enumerate(plan.turns):
        c, a, barge = turn.caller, turn.agent, turn.barge
        caller_track.append(
            (round(caller_start_ms * cspm), to_rate(c.pcm, c.sample_rate_hz, crate))
        )
        c_on = caller_start_ms + c.onset_ms
        c_off = caller_start_ms + c.offset_ms
        agent_pcm = to_rate(a.pcm, a.sample_rate_hz, arate)
        audio_start_ms = max(c_off + turn.delay_ms - a.onset_ms, cursor / NS_PER_MS + 50.0)
        stage: dict[str, int] = {}
        response_id = f"resp_{i}"
        if realtime is not None:
            assert rt is not None
            server, client = realtime.server, realtime.client
            user_item = f"item_u{i}"
            start_pos = max(0, round(c_on - rt.vad_prefix_ms))
            control.append(
                (c_on + rt.vad_detect_ms, server.speech_started(start_pos, user_item), None)
            )
            stop_pos = round(c_off + rt.vad_silence_ms)
            stage["server_speech_stopped"] = stop_pos * NS_PER_MS  # where the position lies
            control.append((float(stop_pos), server.speech_stopped(stop_pos, user_item), None))
            control.append((stop_pos + 1.0, server.committed(user_item), None))
            # One response at a time: a new one is created after the last is done.
            created_ms = max(min(stop_pos + 40.0, audio_start_ms - 10.0), last_done_ms + 1.0)
            audio_start_ms = max(audio_start_ms, created_ms + 10.0)
            if rt.tool_every and i % rt.tool_every == 0:
                tool_resp = f"resp_{i}_tool"
                call_id = f"call_{i}"
                control.append((created_ms, server.response_created(tool_resp), None))
                args_ms = created_ms + 5.0
                args = f'{{"order": "A{i:04d}", "turn": {i}}}'
                control.append(
                    (
                        args_ms,
                        server.function_call_arguments_done(
                            tool_resp, f"item_{i}_fc", call_id, "lookup_order", args
                        ),
                        ("tool_start", i),
                    )
                )
                control.append((args_ms + 1.0, server.response_done(tool_resp), None))
                output_ms = args_ms + rt.tool_latency_ms
                client_extra.append(
                    (
                        output_ms,
                        client.function_call_output(call_id, '{"status": "shipped"}'),
                        ("tool_finish", i),
                    )
                )
                client_extra.append((output_ms + 0.5, client.response_create(), None))
                tools.append([call_id, 0, 0])
                created_ms = output_ms + 30.0
                audio_start_ms = max(audio_start_ms, created_ms + 20.0)
            control.append((created_ms, server.response_created(response_id), ("created", i)))
        sends = [
            (audio_start_ms + (k / aspm) / speed, agent_pcm[k : k + chunk_ms * aspm])
            for k in range(0, agent_pcm.size, chunk_ms * aspm)
        ]
        # Where each chunk would play without jitter: this schedules the barge-in.
        starts: list[tuple[int, int, Pcm, int]] = []
        sim_cursor, sim_last, pos = cursor, to_caller._last, 0
        for t_send, piece in sends:
            arrival = max(ms_to_ns(t_send), sim_last + 1)
            sim_last = arrival
            play = max(arrival, sim_cursor)
            starts.append((arrival, play, piece, pos))
            sim_cursor = play + piece.size * NS_PER_S // arate
            pos += piece.size
        agent_onset_ns = _play_time(starts, round(a.onset_ms * aspm), arate)
        barge_onset_ms: float | None = None
        stop_send_ms: float | None = None
        if barge is not None:
            barge_onset_ms = agent_onset_ns / NS_PER_MS + barge.after_agent_onset_ms
            if barge.reaction != "never":
                stop_send_ms = barge_onset_ms + barge.reaction_ms
        actual: list[tuple[int, int, Pcm, int]] = []
        pos = 0
        last_send_ms = audio_start_ms
        for t_send, piece in sends:
            if stop_send_ms is not None and t_send >= stop_send_ms:
                break
            arrival = to_caller.arrival(t_send)
            msgs.append((arrival, AGENT_TO_CALLER, kit.agent_audio(piece, i)))
            play = max(arrival, cursor)
            actual.append((arrival, play, piece, pos))
            pos += piece.size
            cursor = play + piece.size * NS_PER_S // arate
            last_send_ms = t_send
        starts = actual
        agent_onset_ns = _play_time(starts, round(a.onset_ms * aspm), arate)
        if starts:
            stage["first_audio_delta"] = starts[0][0]
        mark_name: str | None = None
        echo_at = 0
        if kit.marks:
            mark_name = f"resp-{i}"
            t_mark = sends[-1][0] if stop_send_ms is None else min(stop_send_ms, sends[-1][0])
            mark_arrival = to_caller.arrival(t_mark)
            msgs.append((mark_arrival, AGENT_TO_CALLER, kit.mark(mark_name)))
            echo_at = max(mark_arrival, cursor)
        stop_ns: int | None = None
        if barge is not None and barge.reaction == "flush":
            assert stop_send_ms is not None
            if realtime is not None:
                assert rt is not None
                # The client flushes its own playout and tells the server what it played.
                t_sent = ms_to_ns(stop_send_ms)
                flush_arrival = t_sent + ms_to_ns(rng.uniform(0.0, plan.jitter_ms))
                claimed = played_ns(starts, t_sent, arate) / NS_PER_MS + rt.claim_offset_ms
                claimed_ms = max(0, round(claimed))
                truncate = realtime.client.truncate(f"item_{i}", claimed_ms)
                msgs.append((flush_arrival, CALLER_TO_AGENT, truncate))
                msgs.append((flush_arrival + 1, CALLER_TO_AGENT, realtime.client.response_cancel()))
                truncations.append(
                    (flush_arrival, claimed_ms, played_ns(starts, flush_arrival, arate))
                )
                done = realtime.server.response_done(response_id, "cancelled", "client_cancelled")
                control.append((stop_send_ms + 5.0, done, None))
                last_done_ms = stop_send_ms + 5.0
                if len(actual) < len(sends):
                    # A delta already on its way when the cancel reached the server: the
                    # client does not play it (nor does the playout model).
                    late_ms = max(stop_send_ms + 2.0, flush_arrival / NS_PER_MS + 1.0)
                    late = kit.agent_audio(sends[len(actual)][1], i)
                    msgs.append((to_caller.arrival(late_ms), AGENT_TO_CALLER, late))
            else:
                flush_arrival = to_caller.arrival(stop_send_ms)
                msgs.append((flush_arrival, AGENT_TO_CALLER, kit.flush()))
            # Audible speech ends at the flush, or earlier if the flush only cut silence.
            cursor = min(cursor, flush_arrival)
            stop_ns = _last_speech_before(a, arate, starts, cursor)
            if mark_name is not None:
                if kit.echo_at_flush:
                    echo_at = flush_arrival
                elif kit.echo_on_flush:
                    echo_at = min(echo_at, flush_arrival)
                elif echo_at > flush_arrival:
                    mark_name = None  # dropped by the flush: never reported as played
        elif barge is not None:
            stop_ns = _last_speech_before(a, arate, starts, cursor)
            if realtime is not None and stop_send_ms is not None:
                done = realtime.server.response_done(response_id, "cancelled", "turn_detected")
                control.append((stop_send_ms, done, None))
                last_done_ms = stop_send_ms
        if realtime is not None and (barge is None or barge.reaction == "never"):
            control.append(
                (last_send_ms + 0.5, realtime.server.audio_done(response_id, f"item_{i}"), None)
            )
            control.append((last_send_ms + 1.0, realtime.server.response_done(response_id), None))
            last_done_ms = last_send_ms + 1.0
        if mark_name is not None:
            echoes.append((echo_at, mark_name))
        stages.append(stage)
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
    # Server events, in send order, over their own link (they interleave with deltas).
    ctl_link = _Link(rng, plan.jitter_ms)
    for t_ms, message, tag in sorted(control, key=lambda x: x[0]):
        arrival = ctl_link.arrival(t_ms)
        msgs.append((arrival, AGENT_TO_CALLER, message))
        if tag is not None and tag[0] == "created":
            stages[tag[1]]["response_created"] = arrival
        elif tag is not None and tag[0] == "tool_start":
            next(t for t in tools if t[0] == f"call_{tag[1]}")[1] = arrival
    # The caller's audio: continuous frames from t=0, each sent when its interval ends.
    total = round(end_ms * cspm)
    total -= total % frame
    if isinstance(plan, CallPlan):
        caller_all = mix_caller_track(caller_track, total, plan.caller_noise_dbfs, plan.seed)
        if plan.caller_bed is not None:
            bed = to_rate(plan.caller_bed, 16000, crate)
            caller_all = add_bed(caller_all, bed, plan.caller_bed_dbfs)
    else:
        caller_all = mix_caller_track(caller_track, total)
    to_agent = _Link(rng, plan.jitter_ms)
    upstream: list[tuple[float, bytes | str, tuple[str, int] | None]] = [
        (1.0 if realtime is not None else 0.0, m, None) for m in kit.setup()
    ]
    frames = [(k, (k + frame) / cspm) for k in range(0, total, frame)]
    echo_iter = iter(sorted(echoes))
    next_echo = next(echo_iter, None)
    for k, t_ms in frames:
        while next_echo is not None and next_echo[0] <= ms_to_ns(t_ms):
            upstream.append((next_echo[0] / NS_PER_MS, kit.echo(next_echo[1]), None))
            next_echo = next(echo_iter, None)
        upstream.append((t_ms, kit.caller_audio(caller_all[k : k + frame]), None))
    upstream.extend(client_extra)
    upstream.extend((end_ms, m, None) for m in kit.end())
    for t_ms, payload, tag in sorted(upstream, key=lambda x: x[0]):
        arrival = to_agent.arrival(t_ms)
        msgs.append((arrival, CALLER_TO_AGENT, payload))
        if tag is not None and tag[0] == "tool_finish":
            next(t for t in tools if t[0] == f"call_{tag[1]}")[2] = arrival
    msgs.sort(key=lambda m: m[0])
    return ScriptedCall(
        messages=msgs,
        truth=truth,
        end_ns=max(msgs[-1][0], ms_to_ns(end_ms)) + 1,
        sample_rate_hz=crate,
        wire_call_id=kit.wire_call_id,
        meta={}
        if rt is None
        else {
            "stages": stages,
            "truncations": truncations,
            "tools": [tuple(t) for t in tools],
        },
    )
