"""Scripted calls with known truth on the newer wires (Telnyx, Plivo, Vonage, Exotel, OpenAI).

The same conversation model as :mod:`voxproxy.scripted` (whose plan pieces, truth
records and truth helpers it uses): the caller says clips, the agent answers each
after a delay, paced or in bursts ahead of real time, and the caller may barge in.
What changes per wire is the messages, and for OpenAI Realtime who does what:

* the caller side is the Realtime *client*: it appends 20 ms frames, and on a
  barge-in it flushes its own playout and says so with ``conversation.item.truncate``
  (``audio_end_ms`` = how much of the item it played when it sent the truncate,
  plus ``claim_offset_ms`` to model a client whose estimate is off) followed by
  ``response.cancel``;
* the agent side is the Realtime *server*: its VAD reports ``speech_started``
  ``vad_detect_ms`` after the speech onset (``audio_start_ms`` = onset -
  ``vad_prefix_ms``) and ``speech_stopped`` ``vad_silence_ms`` after its end
  (``audio_end_ms`` = that position), then ``response.created``, audio deltas, and
  ``response.done`` (``cancelled`` when the client cancelled or its VAD interrupted);
* with ``tool_every``, a turn's answer starts with a function call: the server
  sends ``response.function_call_arguments.done``, the client answers
  ``tool_latency_ms`` later with a ``function_call_output`` and ``response.create``,
  and the audio response follows.

:func:`render_wire` returns a :class:`~voxproxy.scripted.ScriptedCall`; beside the
per-turn truth, ``meta`` holds the OpenAI truth: ``"stages"`` (per turn: the true
proxy-clock times of the server's VAD end position, ``response.created`` and the
first delta), ``"truncations"`` (arrival, claimed ms, and the ns of the item that
had really played by the arrival) and ``"tools"`` (call id, start and finish arrivals).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from voxproxy.dialects.exotel import ExotelAgentWire, ExotelCallerWire
from voxproxy.dialects.openai_realtime import (
    AudioFormat,
    OpenAIRealtimeAgentWire,
    OpenAIRealtimeCallerWire,
    parse_format,
)
from voxproxy.dialects.plivo import PlivoAgentWire, PlivoCallerWire
from voxproxy.dialects.telnyx import TelnyxAgentWire, TelnyxCallerWire
from voxproxy.dialects.telnyx import encode as telnyx_encode
from voxproxy.dialects.vonage import VonageAgentWire, VonageCallerWire
from voxproxy.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Direction, Pcm
from voxproxy.scripted import (
    ScriptedCall,
    SendMode,
    TurnPlan,
    TurnTruth,
    _last_speech_before,
    _Link,
    _play_time,
    mix_caller_track,
    ms_to_ns,
    to_rate,
)
from voxproxy.timebase import NS_PER_MS, NS_PER_S

WireDialect = Literal["telnyx", "plivo", "vonage", "exotel", "openai-realtime"]
WIRE_DIALECTS: tuple[WireDialect, ...] = ("telnyx", "plivo", "vonage", "exotel", "openai-realtime")


@dataclass(frozen=True, slots=True)
class WirePlan:
    dialect: WireDialect
    send_mode: SendMode
    turns: tuple[TurnPlan, ...]
    caller_gap_ms: float = 700.0
    lead_ms: float = 500.0
    tail_ms: float = 1500.0
    frame_ms: int = 20
    burst_chunk_ms: int = 200
    burst_speedup: float = 10.0
    jitter_ms: float = 2.0
    seed: int = 0
    # OpenAI Realtime only.
    input_format: str = "pcm16"  # pcm16, g711_ulaw or g711_alaw (GA names are sent unless beta)
    output_format: str = "pcm16"
    beta: bool = False
    vad_detect_ms: float = 120.0
    vad_prefix_ms: float = 300.0
    vad_silence_ms: float = 500.0
    claim_offset_ms: float = 0.0
    tool_every: int = 0  # every n-th turn (0: none) starts its answer with a function call
    tool_latency_ms: float = 250.0
    telnyx_encoding: str = "PCMU"  # Telnyx only: PCMU or PCMA, both directions


def played_ns(starts: list[tuple[int, int, Pcm, int]], t_ns: int, rate: int) -> int:
    """How much of the chunks in ``starts`` had played by ``t_ns`` (playout rule, no flush)."""
    total = 0
    for _arrival, play, piece, _pos in starts:
        dur = piece.size * NS_PER_S // rate
        total += min(dur, max(0, t_ns - play))
    return total


class _Kit:
    """One wire's messages, as the scripted conversation needs them."""

    caller_rate = 8000
    agent_rate = 8000
    marks = True  # the agent places a played-marker after each answer
    echo_on_flush = True  # pending markers come back at a flush (Twilio, Telnyx, Exotel)
    min_chunk_ms = 0

    def setup(self) -> list[bytes | str]:
        return []

    def caller_audio(self, pcm: Pcm) -> bytes | str:
        raise NotImplementedError

    def agent_audio(self, pcm: Pcm, turn: int) -> bytes | str:
        raise NotImplementedError

    def mark(self, name: str) -> str:
        raise NotImplementedError

    def echo(self, name: str) -> str:
        raise NotImplementedError

    def flush(self) -> str:
        raise NotImplementedError

    def end(self) -> list[bytes | str]:
        return []


class _Telnyx(_Kit):
    def __init__(self, seed: int, encoding: str = "PCMU") -> None:
        self.caller = TelnyxCallerWire(f"st-{seed}", f"v3:call-{seed}", encoding=encoding)
        self.agent = TelnyxAgentWire()
        self.encoding = encoding

    def setup(self) -> list[bytes | str]:
        return [self.caller.connected(), self.caller.start()]

    def caller_audio(self, pcm: Pcm) -> bytes | str:
        return self.caller.media(telnyx_encode(pcm, self.encoding))

    def agent_audio(self, pcm: Pcm, turn: int) -> bytes | str:
        return self.agent.media(telnyx_encode(pcm, self.encoding))

    def mark(self, name: str) -> str:
        return self.agent.mark(name)

    def echo(self, name: str) -> str:
        return self.caller.mark(name)

    def flush(self) -> str:
        return self.agent.clear()

    def end(self) -> list[bytes | str]:
        return [self.caller.stop()]


class _Plivo(_Kit):
    echo_on_flush = False  # playedStream only "if the preceding events were played"

    def __init__(self, seed: int) -> None:
        self.caller = PlivoCallerWire(f"st-{seed}", f"call-{seed}")
        self.agent = PlivoAgentWire(f"st-{seed}")

    def setup(self) -> list[bytes | str]:
        return [self.caller.start()]

    def caller_audio(self, pcm: Pcm) -> bytes | str:
        return self.caller.media(pcm)

    def agent_audio(self, pcm: Pcm, turn: int) -> bytes | str:
        return self.agent.play_audio(pcm)

    def mark(self, name: str) -> str:
        return self.agent.checkpoint(name)

    def echo(self, name: str) -> str:
        return self.caller.played_stream(name)

    def flush(self) -> str:
        return self.agent.clear_audio()


class _Vonage(_Kit):
    caller_rate = 16000
    agent_rate = 16000
    echo_on_flush = False  # assumed: a cleared notify is not reported as played [D]

    def __init__(self, seed: int) -> None:
        self.caller = VonageCallerWire(16000, {"call_ref": f"call-{seed}"})

    def setup(self) -> list[bytes | str]:
        return [self.caller.connected()]

    def caller_audio(self, pcm: Pcm) -> bytes | str:
        return VonageCallerWire.audio(pcm)

    def agent_audio(self, pcm: Pcm, turn: int) -> bytes | str:
        return VonageAgentWire.audio(pcm)

    def mark(self, name: str) -> str:
        return VonageAgentWire.notify({"name": name})

    def echo(self, name: str) -> str:
        return VonageCallerWire.notify({"name": name})

    def flush(self) -> str:
        return VonageAgentWire.clear()


class _Exotel(_Kit):
    min_chunk_ms = 100  # agent chunks of at least 3.2 KB (100 ms)

    def __init__(self, seed: int) -> None:
        self.caller = ExotelCallerWire(f"st-{seed}", f"call-{seed}")
        self.agent = ExotelAgentWire(f"st-{seed}")

    def setup(self) -> list[bytes | str]:
        return [self.caller.connected(), self.caller.start()]

    def caller_audio(self, pcm: Pcm) -> bytes | str:
        return self.caller.media(pcm)

    def agent_audio(self, pcm: Pcm, turn: int) -> bytes | str:
        return self.agent.media(pcm)

    def mark(self, name: str) -> str:
        return self.agent.mark(name)

    def echo(self, name: str) -> str:
        return self.caller.mark(name)

    def flush(self) -> str:
        return self.agent.clear()

    def end(self) -> list[bytes | str]:
        return [self.caller.stop()]


class _Realtime(_Kit):
    marks = False

    def __init__(self, plan: WirePlan) -> None:
        fin, fout = parse_format(plan.input_format), parse_format(plan.output_format)
        if fin is None or fout is None:
            raise ValueError(f"unknown format {plan.input_format!r} or {plan.output_format!r}")
        self.fin: AudioFormat = fin
        self.fout: AudioFormat = fout
        self.caller_rate = fin.sample_rate_hz
        self.agent_rate = fout.sample_rate_hz
        self.client = OpenAIRealtimeCallerWire(beta=plan.beta)
        self.server = OpenAIRealtimeAgentWire(beta=plan.beta)

    def setup(self) -> list[bytes | str]:
        return [self.client.session_update(self.fin, self.fout)]

    def caller_audio(self, pcm: Pcm) -> bytes | str:
        return self.client.append(self.fin.encode(pcm))

    def agent_audio(self, pcm: Pcm, turn: int) -> bytes | str:
        return self.server.audio_delta(f"resp_{turn}", f"item_{turn}", self.fout.encode(pcm))


def _kit(plan: WirePlan) -> _Kit:
    if plan.dialect == "telnyx":
        return _Telnyx(plan.seed, plan.telnyx_encoding)
    if plan.dialect == "plivo":
        return _Plivo(plan.seed)
    if plan.dialect == "vonage":
        return _Vonage(plan.seed)
    if plan.dialect == "exotel":
        return _Exotel(plan.seed)
    return _Realtime(plan)


def render_wire(plan: WirePlan) -> ScriptedCall:
    """The wire messages of ``plan`` with their arrival times, and the truth of each turn."""
    rng = random.Random(plan.seed)
    kit = _kit(plan)
    realtime = kit if isinstance(kit, _Realtime) else None
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
            server, client = realtime.server, realtime.client
            user_item = f"item_u{i}"
            start_pos = max(0, round(c_on - plan.vad_prefix_ms))
            control.append(
                (c_on + plan.vad_detect_ms, server.speech_started(start_pos, user_item), None)
            )
            stop_pos = round(c_off + plan.vad_silence_ms)
            stage["server_speech_stopped"] = stop_pos * NS_PER_MS  # where the position lies
            control.append((float(stop_pos), server.speech_stopped(stop_pos, user_item), None))
            control.append((stop_pos + 1.0, server.committed(user_item), None))
            # One response at a time: a new one is created after the last is done.
            created_ms = max(min(stop_pos + 40.0, audio_start_ms - 10.0), last_done_ms + 1.0)
            audio_start_ms = max(audio_start_ms, created_ms + 10.0)
            if plan.tool_every and i % plan.tool_every == 0:
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
                output_ms = args_ms + plan.tool_latency_ms
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
                # The client flushes its own playout and tells the server what it played.
                t_sent = ms_to_ns(stop_send_ms)
                flush_arrival = t_sent + ms_to_ns(rng.uniform(0.0, plan.jitter_ms))
                claimed = played_ns(starts, t_sent, arate) / NS_PER_MS + plan.claim_offset_ms
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
                if kit.echo_on_flush:
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
        meta={
            "stages": stages,
            "truncations": truncations,
            "tools": [tuple(t) for t in tools],
        },
    )
