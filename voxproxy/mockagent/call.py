"""One connection to the mock agent (:class:`Call`): its receive loop (decode, feed caller
audio to a :class:`~voxproxy.core.analysis.vad.SpeechDetector` with arrival times), its
speaker task (plays responses on absolute deadlines), its VAD timer (closes the
caller's turn when audio stops arriving), its fault task and its tool calls. The
WebRTC and OpenAI Realtime agents subclass it.

The decisions take the time as an argument and do no I/O: ``_on_message(message,
t_ns)`` and the turn-taking under it (``_push_audio``, ``_after_vad``, ``_check_barge``,
``_on_turn_end``) only set state (the pending answer, a planned stop) and flags for the
tasks; when an answer starts and how it is paced is :mod:`voxproxy.mockagent.schedule`.
The tasks (receive loop, timers, speaker, faults) read the clock and send
(tests/mockagent/test_call.py drives the decisions on passed-in times alone).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import random
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from voxproxy.clock import new_secret
from voxproxy.core.analysis.vad import SpeechDetector, Spurt
from voxproxy.core.audio.resample import Converter
from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.raw import RawWire
from voxproxy.core.dialects.twilio import TwilioAgentWire
from voxproxy.core.events import CALLER_TO_AGENT, Audio, StreamStart, StreamStop
from voxproxy.core.timebase import NS_PER_MS, NS_PER_S
from voxproxy.mockagent.config import AgentClip
from voxproxy.mockagent.hearing import DEFAULT_HYPOTHESES, Hearing
from voxproxy.mockagent.schedule import Pending, next_response, pacing, start_of
from voxproxy.mockagent.task import SimBackend, Task
from voxproxy.mockagent.tool import simulated_tool
from voxproxy.simcall.log import CallLog, ResponseLog, TaskLog
from voxproxy.simcall.script import script_for

if TYPE_CHECKING:
    from voxproxy.mockagent.base import AgentBase

logger = logging.getLogger("voxproxy.mockagent")

_GAP_NS = 60 * NS_PER_MS  # caller audio starting this late after the last chunk is a new anchor


_GARBAGE_TEXT = "{not json"


_GARBAGE_BYTES = 157


def _now() -> int:
    return time.monotonic_ns()


class Call:
    """One websocket connection: its receive loop, speaker, VAD timer and faults."""

    def __init__(self, agent: AgentBase, ws: ServerConnection, log: CallLog) -> None:
        self.cfg = cfg = agent.config
        self.clips = agent.clips
        self.ws = ws
        self.log = log
        self.rng = random.Random(f"{cfg.seed}:{log.index}")
        self.garbage_rng = random.Random(f"{cfg.seed}:{log.index}:garbage")
        rate = cfg.sample_rate_hz if cfg.dialect == "raw" else cfg.agent_rate_hz
        # The wire's keyed hashes (tool arguments) are never read here: any key will do.
        options = DialectOptions(sample_rate_hz=rate, secret=new_secret())
        self.decoder = make_decoder(cfg.dialect, options)
        self.converter: Converter | None = None
        self.vad: SpeechDetector | None = None
        self.caller_end_ns: int | None = None  # arrival of the last caller audio
        self.was_speaking = False
        self.spurt_overlapped = False  # the open caller spurt overlapped agent speech
        self.caller_turns = 0
        self.spoken = 0  # responses started (greeting excluded): drives the rotation
        self.pending: Pending | None = None
        self.playing: ResponseLog | None = None
        self.playing_end_ns = 0
        self.stop_at_ns: int | None = None
        self.samples_sent = 0
        self.wire: TwilioAgentWire | None = None
        self.halted = False  # no more agent output (fault, stream stop or end of call)
        self.stalled = False
        self.closed = False
        self.wake = asyncio.Event()  # the speaker re-examines its state
        self.vad_wake = asyncio.Event()  # the VAD timer re-examines its state
        self.recv_task: asyncio.Task[None] | None = None
        self.background: set[asyncio.Task[None]] = set()
        self.agent = agent
        self.tool_stops: dict[int, asyncio.Event] = {}  # response index -> "stopped by a barge-in"
        self.hearing: Hearing | None = None  # names the caller's clip of each turn (transcripts)
        if cfg.transcripts and cfg.transcript_text is None:
            hyps = cfg.transcript_hypotheses
            self.hearing = Hearing(DEFAULT_HYPOTHESES if hyps is None else hyps)
        self.task: Task | None = None  # the testbench task, when the path names a script
        found = script_for(log.path, cfg.scripts)
        if found is not None:
            log.task = TaskLog(found[0])
            call_id = log.headers.get("x-voxproxy-call")
            send = None
            if call_id and cfg.post_events_url is not None:
                send = functools.partial(agent.post_events, call_id)
            backend = getattr(agent, "backend", None) or SimBackend()
            self.task = Task(found[1], cfg, backend, f"r{log.index}", log.task, send)

    # -- lifecycle ------------------------------------------------------------------------

    async def run(self) -> None:
        cfg = self.cfg
        self.log.accepted_ns = _now()
        if cfg.dialect == "raw" and cfg.announce_rate:
            await self._send(RawWire.start(cfg.sample_rate_hz))
        tasks = [
            asyncio.create_task(self._guard(self._speaker(), "speaker")),
            asyncio.create_task(self._guard(self._vad_timer(), "vad timer")),
        ]
        faults = (cfg.close_after_ms, cfg.stall_after_ms, cfg.garbage_after_ms, cfg.drop_after_ms)
        if any(f is not None for f in faults):
            tasks.append(asyncio.create_task(self._guard(self._faults(), "faults")))
        try:
            self.recv_task = asyncio.create_task(self._guard(self._receive(), "receive"))
            await asyncio.wait([self.recv_task])
            if self.stalled:
                await self.ws.wait_closed()
        finally:
            self.halted = True
            self.closed = True
            every = [*tasks, *self.background]
            if self.recv_task is not None:
                every.append(self.recv_task)
            for task in every:
                task.cancel()
            await asyncio.gather(*every, return_exceptions=True)
            if self.task is not None:
                await self.task.aclose()
            self._finish_log()

    def _finish_log(self) -> None:
        log = self.log
        log.ended_ns = _now()
        ws = self.ws
        if ws.state is State.CLOSED:
            log.close_code = ws.close_code
            log.close_reason = ws.close_reason
        sent = ws.protocol.close_sent
        if sent is not None:
            log.close_sent_code = int(sent.code)
            log.close_sent_reason = sent.reason

    async def _guard(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        try:
            await coro
        except ConnectionClosed:
            self.closed = True
        except Exception as exc:  # a bug here must not take the server down
            self._error(name, exc)

    def _error(self, where: str, exc: BaseException) -> None:
        self.log.errors.append(f"{where}: {exc!r}")
        logger.error("mock agent call %d: %s failed", self.log.index, where, exc_info=exc)

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(self._guard(coro, name))
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    # -- sending --------------------------------------------------------------------------

    async def _send(self, message: str | bytes) -> bool:
        if self.halted or self.closed:
            return False
        try:
            await self.ws.send(message)
        except ConnectionClosed:
            self.closed = True
            self.halted = True
            return False
        self.log.sent_messages.append((isinstance(message, str), message))
        return True

    async def _send_audio(self, clip: AgentClip, start: int, stop: int) -> bool:
        payload = clip.wire_payload(start, stop, self.cfg.dialect)
        if self.cfg.dialect == "twilio":
            assert self.wire is not None
            return await self._send(self.wire.media(payload))
        return await self._send(RawWire.audio(payload))

    async def _send_flush(self) -> bool:
        if self.cfg.dialect == "twilio":
            assert self.wire is not None
            return await self._send(self.wire.clear())
        return await self._send(RawWire.clear())

    # -- receiving ------------------------------------------------------------------------

    async def _receive(self) -> None:
        try:
            async for message in self.ws:
                t_ns = _now()
                self.log.caller_messages.append((isinstance(message, str), message))
                try:
                    self._on_message(message, t_ns)
                except Exception as exc:  # odd input must never end the call
                    self._error("caller message", exc)
        except ConnectionClosed:
            pass
        self.closed = True

    def _on_message(self, message: str | bytes, t_ns: int) -> None:
        if self.cfg.dialect == "twilio" and self.wire is None and isinstance(message, str):
            self._sniff_stream_sid(message)
        for event in self.decoder.decode(CALLER_TO_AGENT, message, t_ns):
            if isinstance(event, Audio):
                self._push_audio(event, t_ns)
            elif isinstance(event, StreamStart) and event.sample_rate_hz is not None:
                self.log.caller_rate_hz = event.sample_rate_hz
            elif isinstance(event, StreamStop):
                self.halted = True
                self.pending = None
                self.wake.set()
        self._after_vad(t_ns)

    def _sniff_stream_sid(self, text: str) -> None:
        try:
            msg = json.loads(text)
        except ValueError:
            return
        if not isinstance(msg, dict):
            return
        sid = msg.get("streamSid")
        start = msg.get("start")
        if not isinstance(sid, str) and isinstance(start, dict):
            sid = start.get("streamSid")
        if not isinstance(sid, str) or not sid:
            return
        if msg.get("event") != "start" and msg.get("event") != "media":
            return
        self.log.stream_sid = sid
        self.wire = TwilioAgentWire(sid)
        self.wake.set()

    def _push_audio(self, audio: Audio, t_ns: int) -> None:
        rate = audio.sample_rate_hz
        if self.converter is None or self.converter.in_rate_hz != rate:
            if self.vad is not None:
                self.vad.finish(t_ns)
                self._after_vad(t_ns)
            self.converter = Converter(rate)
            self.vad = SpeechDetector(self.converter.out_rate_hz, self.cfg.caller_vad)
            self.caller_end_ns = None
            self.was_speaking = False
            self.log.caller_rate_hz = rate
        assert self.vad is not None
        pcm = self.converter.convert(audio.pcm)
        t_start = t_ns - audio.pcm.size * NS_PER_S // rate  # the chunk covers [t - d, t]
        continuous = self.caller_end_ns is None or t_start - self.caller_end_ns <= _GAP_NS
        self.vad.push(pcm, t_start, continuous=continuous)
        if self.hearing is not None:
            self.hearing.push(pcm, t_start, self.converter.out_rate_hz)
        self.caller_end_ns = t_ns

    # -- turn taking ----------------------------------------------------------------------

    def _after_vad(self, now: int) -> None:
        vad = self.vad
        if vad is None:
            return
        speaking = vad.speaking
        closed = list(vad.spurts)
        vad.spurts.clear()
        for spurt in closed:
            self._on_turn_end(spurt)
        if not speaking:
            self.spurt_overlapped = False
            if self.was_speaking and not closed and self.pending is not None:
                self.pending.held = False  # the speech was too short to be a turn
                self.wake.set()
            if self.was_speaking and not closed and self.task is not None:
                self.task.on_caller_quiet()
        elif not self.was_speaking or closed:
            if self.pending is not None:
                self.pending.held = True
            self.vad_wake.set()
        if speaking and (vad.speaking_voiced or self.cfg.noise_is_speech):
            self._check_barge(now)
        self.was_speaking = speaking

    def _check_barge(self, now: int) -> None:
        r = self.playing
        if r is None or r.interrupted_ns is not None or now >= self.playing_end_ns:
            return
        r.interrupted_ns = now
        self.spurt_overlapped = True
        if self.cfg.barge_in != "never":
            self.stop_at_ns = now + round(self.cfg.reaction_ms * NS_PER_MS)
            self.wake.set()
            if self.task is not None:
                self.task.on_barge_in()

    def _on_turn_end(self, spurt: Spurt) -> None:
        cfg = self.cfg
        self.log.caller_spurts.append(spurt)
        overlapped = self.spurt_overlapped
        self.spurt_overlapped = False
        if not spurt.voiced and not cfg.noise_is_speech:
            self.log.noise_spurts += 1  # a cough or a bang is not a turn to answer
            return
        if overlapped and cfg.barge_in == "never":
            self.log.ignored_spurts += 1
            return
        turn = self.caller_turns
        self.caller_turns += 1
        if self.task is not None:
            self.task.on_caller_turn(spurt.voiced)
        if cfg.transcripts and cfg.dialect != "twilio":
            text = self._heard_text(turn, spurt)
            if text is not None:
                self._spawn(self._send_transcript(text), "transcript")
        if self.halted:
            return
        first = self.log.index if cfg.vary_responses else 0
        rotation = first + self.spoken
        self.pending = next_response(cfg, self.clips, rotation, self.rng, spurt.offset_ns)
        self.wake.set()

    def _heard_text(self, turn: int, spurt: Spurt) -> str | None:
        """What the agent reports it heard in caller turn ``turn`` (None: nothing)."""
        if self.cfg.transcript_text is not None:
            return self.cfg.transcript_text(turn)
        assert self.hearing is not None
        heard = self.hearing.hear(spurt)
        self.log.heard.append((turn, heard.clip, heard.score))
        return heard.text

    async def _send_transcript(self, text: str) -> None:
        await self._send(RawWire.transcript(text))

    # -- timers ---------------------------------------------------------------------------

    @staticmethod
    async def _wait(event: asyncio.Event, deadline_ns: int) -> None:
        """Until ``event`` is set or the deadline passes."""
        delay = (deadline_ns - _now()) / NS_PER_S
        if delay <= 0:
            return
        try:
            async with asyncio.timeout(delay):
                await event.wait()
        except TimeoutError:
            pass

    async def _vad_timer(self) -> None:
        """Closes the caller's turn when its audio stops arriving."""
        while True:
            self.vad_wake.clear()
            vad = self.vad
            deadline = vad.deadline_ns() if vad is not None else None
            if vad is None or deadline is None:
                await self.vad_wake.wait()
                continue
            now = _now()
            if now < deadline:
                await self._wait(self.vad_wake, deadline)
                continue
            vad.advance(now)
            self._after_vad(now)
            await self._wait(self.vad_wake, now + 20 * NS_PER_MS)

    async def _faults(self) -> None:
        cfg = self.cfg
        assert self.log.accepted_ns is not None
        plan = [
            (ms, name)
            for ms, name in (
                (cfg.garbage_after_ms, "garbage"),
                (cfg.stall_after_ms, "stall"),
                (cfg.close_after_ms, "close"),
                (cfg.drop_after_ms, "drop"),
            )
            if ms is not None
        ]
        plan.sort(key=lambda item: item[0])
        for ms, name in plan:
            deadline = self.log.accepted_ns + round(ms * NS_PER_MS)
            delay = (deadline - _now()) / NS_PER_S
            if delay > 0:
                await asyncio.sleep(delay)
            if self.closed:
                return
            if self.stalled and name != "drop":
                continue
            self.log.faults.append(name)
            if name == "garbage":
                await self._send(_GARBAGE_TEXT)
                await self._send(self.garbage_rng.randbytes(_GARBAGE_BYTES))
            elif name == "stall":
                self.stalled = True
                self.halted = True
                self.wake.set()
                self.ws.transport.pause_reading()
                if self.recv_task is not None:
                    self.recv_task.cancel()
            elif name == "close":
                self.halted = True
                self.wake.set()
                await self.ws.close(cfg.close_code, "mock fault")
                return
            else:
                self.halted = True
                self.ws.transport.abort()
                return

    # -- speaking -------------------------------------------------------------------------

    def _ready(self) -> bool:
        return self.cfg.dialect == "raw" or self.wire is not None

    async def _speaker(self) -> None:
        cfg = self.cfg
        greeting = cfg.greeting
        while True:
            self.wake.clear()
            if self.halted:
                await self.wake.wait()
                continue
            if greeting is not None and self._ready():
                self.pending = Pending(self.clips[greeting], True, None, 0.0, _now())
                greeting = None
            p = self.pending
            if p is None or p.held or not self._ready():
                await self.wake.wait()
                continue
            now = _now()
            if now < p.start_ns:
                await self._wait(self.wake, p.start_ns)
                continue
            self.pending = None
            await self._play(p, now)

    async def _play(self, p: Pending, now: int) -> None:
        """Play answer ``p``: log it, then send its chunks on absolute deadlines until it
        ends, a barge-in's planned stop comes, or the call halts. One loop on purpose:
        each pass re-reads the state the receive side may have changed meanwhile."""
        cfg = self.cfg
        clip = p.clip
        rate = clip.sample_rate_hz
        start = start_of(p, now)
        t0, skip, speech_ns = start.t0_ns, start.skip, start.speech_ns
        total = clip.pcm.size - skip
        if not p.greeting:
            self.spoken += 1
        r = ResponseLog(
            index=len(self.log.responses) + 1,
            clip=clip.name,
            greeting=p.greeting,
            stream_pos=self.samples_sent,
            caller_offset_ns=p.caller_offset_ns,
            planned_delay_ms=p.delay_ms,
            actual_delay_ms=(
                None if p.caller_offset_ns is None else (speech_ns - p.caller_offset_ns) / NS_PER_MS
            ),
            skipped_samples=skip,
            t0_ns=t0,
            speech_ns=speech_ns,
            total_samples=total,
        )
        self.log.responses.append(r)
        if not p.greeting and cfg.post_events_url is not None and self.task is None:
            self._start_tool(r)
        self.playing = r
        self.playing_end_ns = t0 + total * NS_PER_S // rate
        self.stop_at_ns = None
        if self.was_speaking:
            self._check_barge(now)
        chunk, interval_ns = pacing(cfg, rate)
        pos = skip
        end = clip.pcm.size
        k = 0
        try:
            while True:
                self.wake.clear()
                now = _now()
                if self.halted:
                    r.stopped_ns = now
                    break
                if self.stop_at_ns is not None and now >= self.stop_at_ns:
                    await self._stop_for_barge(r, now, pos < end)
                    break
                if pos < end:
                    deadline = t0 + k * interval_ns
                    if now >= deadline:
                        n = min(chunk, end - pos)
                        before_ns = _now()
                        if not await self._send_audio(clip, pos, pos + n):
                            r.stopped_ns = _now()
                            break
                        sent_ns = _now()
                        r.sends.append((r.stream_pos + pos - skip, n, before_ns, sent_ns))
                        if r.first_send_ns is None:
                            r.first_send_ns = sent_ns
                        r.last_send_ns = sent_ns
                        r.samples_sent += n
                        self.samples_sent += n
                        pos += n
                        k += 1
                        if pos >= end:
                            await self._send_mark(r)
                        continue
                    wake_at = deadline
                else:
                    if now >= self.playing_end_ns:
                        break
                    wake_at = self.playing_end_ns
                if self.stop_at_ns is not None:
                    wake_at = min(wake_at, self.stop_at_ns)
                await self._wait(self.wake, wake_at)
        finally:
            self.playing = None
            self.stop_at_ns = None

    def _barge_stops(self, r: ResponseLog, now: int, still_sending: bool) -> None:
        """A barge-in stops answer ``r`` at ``now``: in its log, and the tool it started."""
        if still_sending:
            r.stopped_ns = now
        tool_stop = self.tool_stops.get(r.index)
        if tool_stop is not None:
            tool_stop.set()

    async def _stop_for_barge(self, r: ResponseLog, now: int, still_sending: bool) -> None:
        self._barge_stops(r, now, still_sending)
        if self.cfg.barge_in == "flush":
            if await self._send_flush():
                r.flushed = True
                r.flush_ns = _now()
        elif still_sending and r.samples_sent > 0:
            await self._send_mark(r)

    async def _send_mark(self, r: ResponseLog) -> None:
        if self.cfg.dialect != "twilio" or not self.cfg.marks or r.mark is not None:
            return
        assert self.wire is not None
        name = f"resp-{r.index}"
        if await self._send(self.wire.mark(name)):
            r.mark = name

    # -- the simulated tool (events posted to the proxy's event API) ----------------------

    def _start_tool(self, r: ResponseLog) -> None:
        call_id = self.log.headers.get("x-voxproxy-call")
        if not call_id:
            return  # not behind voxproxy: nobody to tell
        stop = asyncio.Event()
        self.tool_stops[r.index] = stop
        tool = simulated_tool(self.agent.post_events, self.cfg, self.log.index, r, call_id, stop)
        self._spawn(tool, "tool")
