"""The mock agent as an OpenAI Realtime server (dialect ``openai-realtime``,
docs/protocols.md section 5).

The conversation logic is the mock agent's own (:class:`~voxproxy.mockagent.call.Call`:
its VAD closes the caller's turns, answers come after the configured delay, paced
or in bursts, and its own barge-in reaction); this class speaks the Realtime
protocol around it:

* on connect it sends ``session.created``; a client ``session.update`` sets the
  formats (the decoder follows the input format; the output format chooses the
  clips' rate and encoding) and is answered with ``session.updated``;
* its VAD runs on appended audio: ``input_audio_buffer.speech_started`` when the
  caller starts (``audio_start_ms`` = the appended position then, less a 300 ms
  prefix padding), ``speech_stopped`` when the turn closes (``audio_end_ms`` = all
  audio appended so far: "the end of audio sent to the model", which includes the
  silence the VAD waited), then ``input_audio_buffer.committed`` and, for a turn it
  answers, ``response.created``;
* the answer's audio goes out as ``response.output_audio.delta`` (beta
  ``response.audio.delta``) paced or ahead of real time, then
  ``response.output_audio.done`` and ``response.done`` (``completed``);
* a client ``response.cancel`` stops the answer (``response.done`` ``cancelled`` /
  ``client_cancelled``); its own barge-in reaction stops it as a server VAD with
  ``interrupt_response`` would (``cancelled`` / ``turn_detected``); a
  ``conversation.item.truncate`` is answered with ``conversation.item.truncated``;
* for the caller turns listed in ``realtime_tool_turns`` the answer is first a
  function call (``response.created``, ``response.function_call_arguments.done``,
  ``response.done``); the audio answer follows the client's ``function_call_output``
  and ``response.create``, ``realtime_followup_ms`` later.

The :class:`~voxproxy.simcall.log.ResponseLog` keeps stream positions as for
the other dialects, so :mod:`voxproxy.loadgen.truth` works unchanged.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any

from websockets.asyncio.server import ServerConnection

from voxproxy.clips import load_clips
from voxproxy.core.analysis.vad import Spurt
from voxproxy.core.dialects.openai_realtime import (
    PCM16,
    AudioFormat,
    OpenAIRealtimeAgentWire,
    parse_format,
)
from voxproxy.core.events import CALLER_TO_AGENT, Audio, Flush, ToolEvent
from voxproxy.core.timebase import NS_PER_MS, NS_PER_S
from voxproxy.mockagent.base import AgentBase
from voxproxy.mockagent.call import Call
from voxproxy.mockagent.config import AgentClip, prepare_clip
from voxproxy.mockagent.schedule import Pending
from voxproxy.simcall.log import CallLog, ResponseLog

PREFIX_PADDING_MS = 300  # the server VAD's default prefix_padding_ms
TRANSCRIPTION_DELAY_S = 0.05  # turn closed -> input audio transcription completed


class RealtimeCall(Call):
    """One connection to the mock agent, speaking OpenAI Realtime."""

    def __init__(self, agent: AgentBase, ws: ServerConnection, log: CallLog) -> None:
        super().__init__(agent, ws, log)
        cfg = self.cfg
        out = parse_format(cfg.realtime_format)
        assert out is not None  # checked by the config
        self.server = OpenAIRealtimeAgentWire(beta=cfg.realtime_beta)
        self.session_id = f"sess_mock{log.index:04d}"
        self.in_format: AudioFormat = PCM16
        self.out_format: AudioFormat = out
        self._clip_sets: dict[int, dict[str, AgentClip]] = {out.sample_rate_hz: agent.clips}
        self.appended_ns = 0  # audio the client appended so far
        self.speech_announced = False
        self.user_items = 0
        self.user_item: str | None = None
        self.responses_created = 0
        self.pending_ids: tuple[str, str] | None = None  # ids of the answer not yet playing
        self.response_ids: dict[int, tuple[str, str]] = {}  # ResponseLog.index -> ids
        self.done: set[str] = set()  # responses whose response.done went out
        self.stop_reason: str | None = None
        self.awaiting_tool: tuple[str, Pending] | None = None  # call id, the answer after it
        self.tool_output: set[str] = set()
        self.transcript_item: str | None = None  # the user item of the turn being closed

    # -- sending --------------------------------------------------------------------------

    async def _send_all(self, messages: list[str]) -> None:
        for message in messages:
            if not await self._send(message):
                return

    def _emit(self, *messages: str) -> None:
        """Send from synchronous code, in order (one task per group keeps the order)."""
        self._spawn(self._send_all(list(messages)), "realtime events")

    def _new_response(self) -> tuple[str, str]:
        self.responses_created += 1
        n = self.responses_created
        return f"resp_{self.log.index}_{n}", f"item_{self.log.index}_{n}"

    async def run(self) -> None:
        # The server speaks first: session.created, with its default formats.
        await self._send(self.server.session_created(self.session_id, PCM16, self.out_format))
        await super().run()

    def _ready(self) -> bool:
        return True

    async def _send_audio(self, clip: AgentClip, start: int, stop: int) -> bool:
        r = self.playing
        assert r is not None
        ids = self.response_ids.get(r.index)
        if ids is None:
            ids = self.pending_ids
            self.pending_ids = None
            if ids is None:  # a greeting, or an answer created without a turn
                ids = self._new_response()
                if not await self._send(self.server.response_created(ids[0])):
                    return False
            self.response_ids[r.index] = ids
        payload = self.out_format.encode(clip.pcm[start:stop])
        return await self._send(self.server.audio_delta(ids[0], ids[1], payload))

    async def _finish_response(self, r: ResponseLog, status: str, reason: str | None) -> None:
        ids = self.response_ids.get(r.index)
        if ids is None or ids[0] in self.done:
            return
        self.done.add(ids[0])
        messages = [self.server.response_done(ids[0], status, reason)]
        if status == "completed":
            messages.insert(0, self.server.audio_done(ids[0], ids[1]))
        await self._send_all(messages)

    async def _send_mark(self, r: ResponseLog) -> None:
        # Every chunk of the answer is out: the response is complete.
        await self._finish_response(r, "completed", None)

    async def _stop_for_barge(self, r: ResponseLog, now: int, still_sending: bool) -> None:
        self._barge_stops(r, now, still_sending)
        reason, self.stop_reason = self.stop_reason or "turn_detected", None
        if still_sending:
            await self._finish_response(r, "cancelled", reason)

    # -- receiving ------------------------------------------------------------------------

    def _on_message(self, message: str | bytes, t_ns: int) -> None:
        for event in self.decoder.decode(CALLER_TO_AGENT, message, t_ns):
            if isinstance(event, Audio):
                self.appended_ns += event.pcm.size * NS_PER_S // event.sample_rate_hz
                self._push_audio(event, t_ns)
            elif isinstance(event, Flush):
                self._client_flush(event, t_ns)
            elif (
                isinstance(event, ToolEvent)
                and event.kind == "tool.finished"
                and event.operation_id is not None
            ):
                self.tool_output.add(event.operation_id)
        if isinstance(message, str) and (
            '"session.update"' in message or '"response.create"' in message
        ):
            self._control(message, t_ns)
        self._after_vad(t_ns)

    def _control(self, text: str, t_ns: int) -> None:
        try:
            msg: Any = json.loads(text)
        except ValueError:
            return
        if not isinstance(msg, dict):
            return
        if msg.get("type") == "session.update":
            self._session_update(msg.get("session"))
        elif msg.get("type") == "response.create":
            self._response_create(t_ns)

    def _session_update(self, session: object) -> None:
        if not isinstance(session, dict):
            return
        found: dict[str, object] = {}
        audio = session.get("audio")
        if isinstance(audio, dict):
            for side in ("input", "output"):
                cfg = audio.get(side)
                if isinstance(cfg, dict) and "format" in cfg:
                    found[side] = cfg["format"]
        for side, key in (("input", "input_audio_format"), ("output", "output_audio_format")):
            if key in session:
                found[side] = session[key]
        fin = parse_format(found["input"]) if "input" in found else None
        fout = parse_format(found["output"]) if "output" in found else None
        if fin is not None:
            self.in_format = fin
        if fout is not None and fout != self.out_format:
            self.out_format = fout
            rate = fout.sample_rate_hz
            if rate not in self._clip_sets:
                source = load_clips()
                self._clip_sets[rate] = {n: prepare_clip(source[n], rate) for n in self.clips}
            self.clips = self._clip_sets[rate]
        self._emit(self.server.session_updated(self.session_id, self.in_format, self.out_format))

    def _client_flush(self, ev: Flush, t_ns: int) -> None:
        if ev.kind == "conversation.item.truncate" and ev.item_id is not None:
            end_ms = round(ev.claimed_played_ms or 0.0)
            self._emit(self.server.item_truncated(ev.item_id, end_ms))
            return
        r = self.playing
        if ev.kind == "response.cancel" and r is not None:
            ids = self.response_ids.get(r.index)
            if ids is not None and ids[0] not in self.done:
                self.stop_reason = "client_cancelled"
                self.stop_at_ns = t_ns
                self.wake.set()

    def _response_create(self, t_ns: int) -> None:
        """The client asked for a response: after a function call, the answer it waited for."""
        waiting = self.awaiting_tool
        if waiting is None or waiting[0] not in self.tool_output or self.halted:
            return
        self.awaiting_tool = None
        p = waiting[1]
        onset_ns = p.clip.onset_sample * NS_PER_S // p.clip.sample_rate_hz
        start_ns = t_ns + round(self.cfg.realtime_followup_ms * NS_PER_MS) - onset_ns
        self.pending = Pending(p.clip, False, p.caller_offset_ns, p.delay_ms, start_ns)
        self.pending_ids = self._new_response()
        self._emit(self.server.response_created(self.pending_ids[0]))
        self.wake.set()

    def _send_transcript(self, text: str) -> Coroutine[Any, Any, None]:
        # Called as the turn closes: bind the turn's item id now.
        return self._transcription_completed(self.transcript_item or "", text)

    async def _transcription_completed(self, item_id: str, text: str) -> None:
        """``conversation.item.input_audio_transcription.completed``: transcription runs
        beside the conversation, so it lands after the turn's ``committed``."""
        await asyncio.sleep(TRANSCRIPTION_DELAY_S)
        await self._send(self.server.input_transcription_completed(item_id, text))

    # -- the server VAD -------------------------------------------------------------------

    def _after_vad(self, now: int) -> None:
        super()._after_vad(now)
        if self.was_speaking and not self.speech_announced:
            self.speech_announced = True
            self.user_items += 1
            self.user_item = f"item_u{self.log.index}_{self.user_items}"
            position_ms = max(0, self.appended_ns // NS_PER_MS - PREFIX_PADDING_MS)
            self._emit(self.server.speech_started(position_ms, self.user_item))

    def _on_turn_end(self, spurt: Spurt) -> None:
        self.speech_announced = False
        item = self.user_item or f"item_u{self.log.index}_{self.user_items + 1}"
        self.user_item = None
        self.transcript_item = item
        messages = [
            self.server.speech_stopped(self.appended_ns // NS_PER_MS, item),
            self.server.committed(item),
        ]
        superseded = self.pending
        turn = self.caller_turns
        super()._on_turn_end(spurt)
        p = self.pending
        if self.caller_turns == turn or p is None or p is superseded:
            self._emit(*messages)  # not a turn it answers (noise, or ignored)
            return
        if superseded is not None and self.pending_ids is not None:
            # The caller went on talking before the answer started: it is dropped.
            old, _item = self.pending_ids
            self.done.add(old)
            messages.append(self.server.response_done(old, "cancelled", "turn_detected"))
            self.pending_ids = None
        if turn in self.cfg.realtime_tool_turns:
            self.pending = None
            call_id = f"call_{self.log.index}_{turn}"
            rid, item_id = self._new_response()
            self.awaiting_tool = (call_id, p)
            args = json.dumps({"turn": turn, "order": f"A{turn:04d}"})
            messages += [
                self.server.response_created(rid),
                self.server.function_call_arguments_done(
                    rid, item_id, call_id, self.cfg.tool_name, args
                ),
                self.server.response_done(rid),
            ]
            self.done.add(rid)
        else:
            self.pending_ids = self._new_response()
            messages.append(self.server.response_created(self.pending_ids[0]))
        self._emit(*messages)
