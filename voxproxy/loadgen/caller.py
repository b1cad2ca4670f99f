"""A real-time scripted caller: the far end of a call, speaking recordings.

It streams audio in 20 ms frames sent on absolute deadlines (frame ``k`` covers
``[t0 + k*d, t0 + (k+1)*d]`` and is sent at its end, like a live caller), plays
the agent's audio with the playout rule, runs its own speech detector on what
it plays, and follows a script. It records its own ground truth: when its
speech truly started and ended (from the clip's known edges and the instant
each sample was captured) and, on its own playout timeline, where the agent's
audio was audible.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Coroutine
from typing import Any

import numpy as np
import numpy.typing as npt
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.protocol import State

from voxproxy.clips import Clip
from voxproxy.clock import new_secret
from voxproxy.core.analysis.playout import Playout
from voxproxy.core.analysis.vad import SpeechDetector, VadConfig
from voxproxy.core.audio.resample import Converter
from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.openai_realtime import OpenAIRealtimeCallerWire, parse_format
from voxproxy.core.events import AGENT_TO_CALLER, Audio, Flush, MarkSent, Pcm, ToolEvent, Transcript
from voxproxy.core.timebase import NS_PER_MS, NS_PER_S
from voxproxy.loadgen.connection import DirectConnection, proxy_for
from voxproxy.loadgen.pacing import pacer
from voxproxy.loadgen.record import AgentChunk as AgentChunk
from voxproxy.loadgen.record import CallRecord as CallRecord
from voxproxy.loadgen.record import NoiseTruth as NoiseTruth
from voxproxy.loadgen.record import SpeechTruth as SpeechTruth
from voxproxy.loadgen.steps import BargeIn as BargeIn
from voxproxy.loadgen.steps import CallerConfig as CallerConfig
from voxproxy.loadgen.steps import Interject as Interject
from voxproxy.loadgen.steps import NoiseBed as NoiseBed
from voxproxy.loadgen.steps import Say as Say
from voxproxy.loadgen.steps import Silence as Silence
from voxproxy.loadgen.steps import Step as Step
from voxproxy.loadgen.steps import WaitAgentEnd as WaitAgentEnd
from voxproxy.loadgen.steps import WaitAgentStart as WaitAgentStart
from voxproxy.loadgen.steps import active_rms as active_rms
from voxproxy.loadgen.steps import (
    audible_clip_edges,
    clip_at_rate,
    edges_at_rate,
    prepare_heard_truth,
)
from voxproxy.loadgen.wires import CallerWire, caller_wire

TICK_NS = 10 * NS_PER_MS  # the caller's own playout and detector run at most this often
WRITE_LIMIT = 64 * 1024  # bytes in a socket's write buffer past which frames wait their turn


class ScriptedCaller:
    """One call. Use :meth:`run`."""

    def __init__(self, config: CallerConfig, script: list[Step]) -> None:
        self.config = config
        self.script = script
        self._wire: CallerWire | None = None
        self.rate = config.sample_rate_hz
        if config.dialect != "openai-realtime":
            self._wire = caller_wire(
                config.dialect,
                config.call_id,
                config.sample_rate_hz,
                dict(config.custom_parameters),
            )
            self.rate = self._wire.rate_hz
        self._realtime: OpenAIRealtimeCallerWire | None = None
        if config.dialect == "openai-realtime":
            fin = parse_format(config.realtime_input_format)
            fout = parse_format(config.realtime_output_format)
            if fin is None or fout is None:
                raise ValueError("unknown realtime_input_format or realtime_output_format")
            self._in_fmt, self._out_fmt = fin, fout
            self.rate = fin.sample_rate_hz
            self._realtime = OpenAIRealtimeCallerWire(beta=config.realtime_beta)
        self._cut_items: set[str] = set()  # truncated items: their late audio is not played
        self._current_item: str | None = None
        self._agent_conv: Converter | None = None  # agent audio -> the detector's rate
        self._tasks: set[asyncio.Task[None]] = set()
        self.frame = self.rate * config.frame_ms // 1000
        self.record = CallRecord()
        self._queue: deque[Pcm] = deque()
        self._queued = 0
        self._sent_samples = 0
        self._decoder = make_decoder(config.dialect, DialectOptions(secret=new_secret()))
        self._playout: Playout | None = None
        self._agent_vad: SpeechDetector | None = None
        self._agent_pos = 0
        self._marks: deque[tuple[int, str]] = deque()  # (play-out time, name) awaiting echo
        self._ws: ClientConnection | None = None
        self._done_sending = asyncio.Event()
        self._backlog: deque[bytes | str] = deque()  # frames waiting for the socket
        self._drainer: asyncio.Task[None] | None = None
        self._sending_over = False
        self._send_waiter: tuple[int, asyncio.Future[None]] | None = None  # (samples, woken)
        self._last_agent_audible_ns = 0
        self._rng = np.random.default_rng(config.seed)
        self._last_tick_ns = 0
        self._skipped = False  # the last agent audio released was not kept (see _tick)
        self._bed: npt.NDArray[np.float64] | None = None
        self._bed_pos = 0
        self._prepare_bed()
        # The truth of every clip said, read now rather than on the call's clock: the
        # first reading imports scipy (over a second), each takes tens of ms, and a loop
        # stalled by it sends the caller's first words in one burst (once per process).
        prepare_heard_truth(script, (self.rate,))

    # -- audio out -----------------------------------------------------------------------

    def _enqueue(self, pcm: Pcm) -> int:
        """Queue samples to say; returns the stream position of the first one."""
        pos = self._sent_samples + self._queued
        self._queue.append(pcm)
        self._queued += pcm.size
        return pos

    def _next_frame(self) -> Pcm:
        need = self.frame
        parts: list[Pcm] = []
        while need and self._queue:
            head = self._queue[0]
            if head.size <= need:
                parts.append(self._queue.popleft())
                need -= head.size
            else:
                parts.append(head[:need])
                self._queue[0] = head[need:]
                need = 0
        got = self.frame - need
        self._queued -= got
        if need:
            parts.append(np.zeros(need, dtype=np.int16))
        frame = np.concatenate(parts) if len(parts) > 1 else parts[0]
        if self.config.noise_dbfs is not None:
            noise = (
                self._rng.standard_normal(frame.size)
                * 32768.0
                * 10 ** (self.config.noise_dbfs / 20)
            )
            frame = np.clip(frame.astype(np.float64) + noise, -32768, 32767).astype(np.int16)
        if self._bed is not None:
            bed = self._bed
            idx = (np.arange(self._bed_pos, self._bed_pos + frame.size)) % bed.size
            self._bed_pos = (self._bed_pos + frame.size) % bed.size
            frame = np.clip(frame.astype(np.float64) + bed[idx], -32768, 32767).astype(np.int16)
        return frame

    def _prepare_bed(self) -> None:
        """Scale the noise bed to its SNR against the active level of the script's speech."""
        spec = self.config.noise_bed
        if spec is None:
            return
        clips = [st.clip for st in self.script if isinstance(st, (Say, BargeIn))]
        levels = [active_rms(self._at_rate(c), c, self.rate) for c in clips]
        speech_rms = float(np.mean(levels)) if levels else 3000.0
        bed = self._at_rate(spec.clip).astype(np.float64)
        bed_rms = float(np.sqrt(np.mean(bed**2))) or 1.0
        self._bed = bed * (speech_rms / bed_rms) * 10 ** (-spec.snr_db / 20)

    def _at_rate(self, c: Clip) -> Pcm:
        return clip_at_rate(c, self.rate)

    def _encode(self, frame: Pcm) -> bytes | str:
        if self._realtime is not None:
            return self._realtime.append(self._in_fmt.encode(frame))
        assert self._wire is not None
        return self._wire.media(frame)

    async def _send(self, payload: bytes | str) -> None:
        assert self._ws is not None
        if self.config.keep_messages:
            self.record.messages_sent.append(payload)
        await self._ws.send(payload)

    def _write_now(self, payload: bytes | str) -> bool:
        """Hand ``payload`` to the socket at once if the connection takes it without
        waiting (open, its write buffer under WRITE_LIMIT); False: it was not sent."""
        ws = self._ws
        assert ws is not None
        transport = ws.transport
        if ws.protocol.state is not State.OPEN or transport.get_write_buffer_size() > WRITE_LIMIT:
            return False
        # What Connection.send does for one message, without its coroutine and context
        # manager per frame: the Sans-I/O protocol frames it, the transport writes it.
        if isinstance(payload, str):
            ws.protocol.send_text(payload.encode())
        else:
            ws.protocol.send_binary(payload)
        for data in ws.protocol.data_to_send():
            if data:
                transport.write(data)
        if self.config.keep_messages:
            self.record.messages_sent.append(payload)
        return True

    def _send_soon(self, payload: bytes | str) -> None:
        """Send now if the connection takes it, else after what is already waiting (in order)."""
        if not self._backlog and self._write_now(payload):
            return
        self._backlog.append(payload)
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.get_running_loop().create_task(self._drain())

    def _drain_failed(self) -> BaseException | None:
        d = self._drainer
        return d.exception() if d is not None and d.done() and not d.cancelled() else None

    async def _drain(self) -> None:
        while self._backlog:
            await self._send(self._backlog.popleft())

    async def _sender(self) -> None:
        """Send a frame at each deadline until done sending, on the loop's shared pacer
        (one timer for every caller of the loop, no task wake-up per frame)."""
        frame_ns = self.config.frame_ms * NS_PER_MS
        t0 = self.record.t0_ns
        lags = self.record.pacing_lag_ns
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        k = 0

        def send(now: int, deadline: int) -> int | None:
            nonlocal k
            if done.done():  # cancelled
                return None
            failed = self._drain_failed()
            if failed is not None:
                done.set_exception(failed)
                return None
            try:
                frame = self._next_frame()
                self._sent_samples += frame.size
                k += 1
                self._send_soon(self._encode(frame))
                # How late it left against its schedule: read right after its write (a
                # frame that waits behind a full socket buffer leaves later still).
                lags.append(time.monotonic_ns() - deadline)
                self._sent_to(self._sent_samples)
                self._tick(time.monotonic_ns())
            except Exception as exc:
                done.set_exception(exc)
                return None
            if self._done_sending.is_set():
                done.set_result(None)
                return None
            return t0 + (k + 1) * frame_ns

        try:
            if self._done_sending.is_set():
                return
            pacer().add(t0 + frame_ns, send)
            await done
        finally:
            self._sending_over = True
            self._sent_to(None)
        if self._drainer is not None:
            await self._drainer

    def _sent_to(self, samples: int | None) -> None:
        """Wake a ``_say`` waiting for its clip to be sent (None: nothing more will be)."""
        waiter = self._send_waiter
        if waiter is not None and (samples is None or samples >= waiter[0]):
            self._send_waiter = None
            if not waiter[1].done():
                waiter[1].set_result(None)

    # -- audio in ------------------------------------------------------------------------

    def _tick(self, now: int, force: bool = False) -> None:
        """Play out what is due, listen to it, and echo marks; at most every TICK_NS."""
        playout, vad = self._playout, self._agent_vad
        if playout is None or vad is None:
            return
        if not force and now - self._last_tick_ns < TICK_NS:
            return
        self._last_tick_ns = now
        conv = self._agent_conv
        for piece in playout.release(now):
            if piece.pcm is None:  # queued too far ahead to keep: not heard
                self._skipped = True
                continue
            pcm = piece.pcm if conv is None else conv.convert(piece.pcm)
            vad.push(pcm, piece.start_ns, continuous=piece.continuous and not self._skipped)
            self._skipped = False
        if self.record.hear_agent(vad, now):
            self._last_agent_audible_ns = now
        while self._marks and self._marks[0][0] <= now:
            _, name = self._marks.popleft()
            asyncio.get_running_loop().create_task(self._echo_mark(name))

    async def _echo_mark(self, name: str) -> None:
        with contextlib.suppress(ConnectionClosed):
            assert self._wire is not None
            echo = self._wire.echo(name)
            if echo is not None:
                await self._send(echo)

    async def _receiver(self) -> None:
        ws = self._ws
        assert ws is not None
        if isinstance(ws, DirectConnection):
            ws.on_message = self._on_message  # each message as it arrives (connection.py)
        try:
            async for message in ws:  # what was not handed over (fragmented messages)
                self._on_message(message)
        except ConnectionClosed:
            pass
        if isinstance(ws, DirectConnection) and ws.failure is not None:
            raise ws.failure

    def _on_message(self, message: str | bytes) -> None:
        ws = self._ws
        # When it reached this host (the kernel's stamp), however late the loop ran.
        t = ws.arrival_ns() if isinstance(ws, DirectConnection) else time.monotonic_ns()
        if self.config.keep_messages:
            self.record.messages_received.append(message)
        for ev in self._decoder.decode(AGENT_TO_CALLER, message, t):
            if isinstance(ev, Audio):
                self._agent_audio(ev, t)
            elif isinstance(ev, Flush):
                self._agent_flush(t)
            elif isinstance(ev, MarkSent):
                cursor = self._playout.cursor_ns if self._playout else None
                self._marks.append((max(t, cursor or t), ev.name))
            elif (
                isinstance(ev, ToolEvent)
                and ev.kind == "tool.started"
                and ev.operation_id is not None
                and self.config.answer_tools
            ):
                self._spawn(self._answer_tool(ev.operation_id, t))
            elif isinstance(ev, Transcript):
                self.record.transcripts.append((t, ev.role, ev.text, ev.final))
        self._tick(t)

    def _agent_audio(self, ev: Audio, t: int) -> None:
        if ev.item_id is not None and ev.item_id in self._cut_items:
            self._agent_pos += ev.pcm.size  # truncated: received (it counts), never played
            return
        if self._playout is None:
            self._playout = Playout(ev.sample_rate_hz)
            self.record.agent_rate_hz = ev.sample_rate_hz
            vad_rate = (
                ev.sample_rate_hz if ev.sample_rate_hz in (8000, 16000, 32000, 48000) else None
            )
            if vad_rate is None and self._realtime is not None:
                self._agent_conv = Converter(ev.sample_rate_hz)  # 24 kHz pcm16 -> 8 kHz
                vad_rate = self._agent_conv.out_rate_hz
            if vad_rate is not None:
                self._agent_vad = SpeechDetector(vad_rate, VadConfig(), batch_ms=40.0)
        start = self._playout.add(ev.pcm, t)
        chunks, rate, n = self.record.agent_chunks, self.record.agent_rate_hz, ev.pcm.size
        last = chunks[-1] if chunks else None
        if (  # the run goes on, with whole ns per sample run: one chunk (fewer objects)
            last is not None
            and last.stream_pos + last.n == self._agent_pos
            and last.n * NS_PER_S % rate == 0
            and last.play_ns + last.n * NS_PER_S // rate == start
            and last.item_id == ev.item_id
        ):
            last.n += n
        else:
            chunks.append(AgentChunk(self._agent_pos, n, start, t, ev.item_id))
        self._agent_pos += n
        if ev.item_id is not None:
            self._current_item = ev.item_id

    # -- OpenAI Realtime client duties --------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer_tool(self, call_id: str, t_started: int) -> None:
        """Run the tool (``tool_latency_ms``), return its output and ask for the answer."""
        assert self._realtime is not None
        await asyncio.sleep(self.config.tool_latency_ms / 1000)
        with contextlib.suppress(ConnectionClosed):
            await self._send(self._realtime.function_call_output(call_id, '{"status":"ok"}'))
            self.record.tool_calls.append((call_id, t_started, time.monotonic_ns()))
            await self._send(self._realtime.response_create())

    async def _interrupt(self, at_ns: int) -> None:
        """Barge-in, as a Realtime client does it: stop playing, then tell the server
        how much of the item it played (``conversation.item.truncate``) and cancel."""
        assert self._realtime is not None
        delay = (at_ns - time.monotonic_ns()) / NS_PER_S
        if delay > 0:
            await asyncio.sleep(delay)
        item = self._current_item
        if item is None or item in self._cut_items or self._playout is None:
            return
        t = time.monotonic_ns()
        rate = self.record.agent_rate_hz
        played_ns = sum(
            min(c.n * NS_PER_S // rate, max(0, t - c.play_ns))
            for c in self.record.agent_chunks
            if c.item_id == item
        )
        self._cut_items.add(item)
        self._agent_flush(t)
        claimed_ms = played_ns // NS_PER_MS
        self.record.truncations.append((t, item, claimed_ms))
        with contextlib.suppress(ConnectionClosed):
            await self._send(self._realtime.truncate(item, claimed_ms))
            await self._send(self._realtime.response_cancel())

    def _agent_flush(self, t: int) -> None:
        self.record.flushes.append(t)
        if self._playout is not None:
            self._tick(t, force=True)
            self._playout.flush(t)
            # Chunks that had not started are gone; a playing one is cut at t.
            kept: list[AgentChunk] = []
            rate = self.record.agent_rate_hz
            for c in self.record.agent_chunks:
                if c.play_ns >= t:
                    continue
                end = c.play_ns + c.n * NS_PER_S // rate
                if end > t:
                    c.n = (t - c.play_ns) * rate // NS_PER_S
                kept.append(c)
            self.record.agent_chunks = kept
        while self._marks:  # Twilio sends back every pending mark on clear
            _, name = self._marks.popleft()
            asyncio.get_running_loop().create_task(self._echo_mark(name))

    # -- the script ----------------------------------------------------------------------

    def agent_speaking(self) -> bool:
        return self._agent_vad is not None and self._agent_vad.speaking

    async def _wait(self, predicate: object, timeout_ms: float) -> bool:
        deadline = time.monotonic() + timeout_ms / 1000
        assert callable(predicate)
        while time.monotonic() < deadline:
            if predicate():
                return True
            await asyncio.sleep(0.005)
        return False

    async def _say(self, step: Say, barge_in: bool = False, noise: bool = False) -> None:
        c = step.clip
        pcm = self._at_rate(c)
        if step.gain_db:
            pcm = np.clip(pcm * 10 ** (step.gain_db / 20), -32768, 32767).astype(np.int16)
        pos = self._enqueue(pcm)
        t0 = self.record.t0_ns
        # The truth is read from the audio the wire carries, at its rate (an 8 kHz wire
        # averages away what lies above 4 kHz: a fricative release ends earlier on it).
        onset_ms, offset_ms = edges_at_rate(c, self.rate)
        if not noise:
            onset_ms, offset_ms = audible_clip_edges(
                c, pcm, self._bed, pos, self.rate, step.gain_db
            )
        onset = t0 + (pos + round(onset_ms * self.rate / 1000)) * NS_PER_S // self.rate
        offset = t0 + (pos + round(offset_ms * self.rate / 1000)) * NS_PER_S // self.rate
        if noise:
            self.record.noises.append(NoiseTruth(c.name, onset, offset))
        else:
            self.record.speech.append(SpeechTruth(c.name, onset, offset, barge_in, c.text))
        # Wait until the clip has been sent.
        end_pos = pos + pcm.size
        if self._sent_samples < end_pos and not self._sending_over:
            waiter = asyncio.get_running_loop().create_future()
            self._send_waiter = (end_pos, waiter)
            await waiter

    async def _play(self) -> None:
        """Run the script, the sender beside it, until both are done."""
        sender = asyncio.create_task(self._sender())
        try:
            await self._run_script()
        finally:
            self._done_sending.set()
            await sender

    async def _wind_down(self) -> None:
        """The call is over: cancel what was spawned, play out and hear the agent to the
        end."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        now = time.monotonic_ns()
        self._tick(now, force=True)
        if self._agent_vad is not None:
            self.record.hear_agent(self._agent_vad, now, final=True)

    async def _run_script(self) -> None:
        for step in self.script:
            start = time.monotonic_ns()
            await self._run_step(step)
            self.record.steps.append((type(step).__name__, start, time.monotonic_ns()))
        await asyncio.sleep(self.config.tail_ms / 1000)

    async def _run_step(self, step: Step) -> None:
        if isinstance(step, Say):
            await self._say(step)
        elif isinstance(step, Silence):
            await asyncio.sleep(step.ms / 1000)
        elif isinstance(step, WaitAgentStart):
            await self._wait(self.agent_speaking, step.timeout_ms)
        elif isinstance(step, WaitAgentEnd):
            # The agent answers after the caller's speech: wait for it to start first.
            await self._wait(self.agent_speaking, step.start_timeout_ms)
            quiet_ns = step.quiet_ms * NS_PER_MS

            def done(quiet_ns: float = quiet_ns) -> bool:
                playing = self._playout is not None and self._playout.playing_at(
                    time.monotonic_ns()
                )
                quiet = time.monotonic_ns() - self._last_agent_audible_ns > quiet_ns
                return not self.agent_speaking() and not playing and quiet

            await self._wait(done, step.timeout_ms)
        elif isinstance(step, BargeIn):
            if await self._wait(self.agent_speaking, step.timeout_ms):
                await asyncio.sleep(step.after_ms / 1000)
            if self._realtime is not None:
                # The client reacts to its own caller: truncate_after_ms after the speech onset.
                pos = self._sent_samples + self._queued
                onset_pos = pos + round(step.clip.onset_ms * self.rate / 1000)
                at_ns = self.record.t0_ns + onset_pos * NS_PER_S // self.rate
                self._spawn(
                    self._interrupt(at_ns + round(self.config.truncate_after_ms * NS_PER_MS))
                )
            await self._say(Say(step.clip), barge_in=True)
        elif isinstance(step, Interject):
            if await self._wait(self.agent_speaking, step.timeout_ms):
                await asyncio.sleep(step.after_ms / 1000)
            await self._say(Say(step.clip), noise=True)

    async def run(self) -> CallRecord:
        cfg = self.config
        try:
            async with connect(
                cfg.url,
                additional_headers=cfg.headers or None,
                subprotocols=list(cfg.subprotocols) or None,  # type: ignore[arg-type]
                max_size=None,
                compression=None,
                create_connection=DirectConnection,
                proxy=proxy_for(cfg.url),
            ) as ws:
                self._ws = ws
                if self._realtime is not None:
                    await self._send(self._realtime.session_update(self._in_fmt, self._out_fmt))
                else:
                    assert self._wire is not None
                    for opening in self._wire.opening():
                        await self._send(opening)
                self.record.t0_ns = time.monotonic_ns()
                receiver = asyncio.create_task(self._receiver())
                await self._play()
                for closing in self._wire.closing() if self._wire is not None else []:
                    await self._send(closing)
                await ws.close()
                await receiver
                self.record.close_code = ws.close_code
                await self._wind_down()
        except InvalidStatus as exc:  # the target refused the call: its status and its words
            body = (exc.response.body or b"").decode("utf-8", "replace").strip()[:200]
            status = exc.response.status_code
            self.record.error = f"InvalidStatus: HTTP {status} from the target" + (
                f": {body}" if body else ""
            )
        except (OSError, ConnectionClosed) as exc:
            self.record.error = f"{type(exc).__name__}: {exc}"
        except Exception as exc:
            self.record.error = f"{type(exc).__name__}: {exc}"
        finally:
            # The connection's objects refer to each other (garbage only a full collection
            # finds, which waits while callers pace: pacing.py); let go of this caller's
            # (its playout, detector, queues) now.
            if isinstance(self._ws, DirectConnection):
                self._ws.on_message = None
            self._ws = None
        return self.record
