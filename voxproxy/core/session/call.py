"""The :class:`CallSession`: one call's messages in, its receipt out. Sans-I/O.

The per-message path lives here: ``on_message`` -> the decoder -> ``_handle`` ->
``_audio`` (caller audio to its detector; agent audio onto the playout timeline) and
the marks, flushes and stream events; every ``PUMP_INTERVAL_MS`` of call time ``_pump``
releases played audio to the agent's detector (``hearing``), advances both detectors
(with other calls' in one energies pass when a group is open: ``pumps``) and feeds the
finished spurts and flushes below the watermark to the turn machine (``ordering``). ``close``
settles everything and hands over to :func:`~voxproxy.core.session.receipt.build_receipt`.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from voxproxy.core.analysis.playout import Playout
from voxproxy.core.analysis.together import energies_together, finish_together, prepare_together
from voxproxy.core.analysis.vad import SpeechDetector
from voxproxy.core.audio.resample import Converter
from voxproxy.core.dialects.base import Decoder, codec_of
from voxproxy.core.errors import UsageError
from voxproxy.core.events import (
    AGENT_TO_CALLER,
    CALLER_TO_AGENT,
    Anomaly,
    AnomalyKind,
    Audio,
    Dtmf,
    Flush,
    MarkEcho,
    MarkSent,
    StageMark,
    StreamStart,
    StreamStop,
    ToolEvent,
    Transcript,
)
from voxproxy.core.ids import keyed_hash
from voxproxy.core.receipt import CloseInfo, Receipt, Terminal
from voxproxy.core.session.config import (
    MAX_MEASUREMENT_ERRORS,
    MAX_RATE_HZ,
    MAX_TOOL_EVENTS,
    MIN_RATE_HZ,
    PUMP_INTERVAL_MS,
    SessionConfig,
)
from voxproxy.core.session.evidence import Evidence
from voxproxy.core.session.hearing import AgentHearing
from voxproxy.core.session.intake import CallerIntake
from voxproxy.core.session.marks import Items, Marks
from voxproxy.core.session.ordering import feed_turns, watermark
from voxproxy.core.session.pumps import PumpGroup, WaitingPump
from voxproxy.core.session.receipt import ReceiptInputs, build_receipt
from voxproxy.core.session.stages import MAX_STAGE_MARKS
from voxproxy.core.session.wire import WIRE_SAMPLE, WireCheck
from voxproxy.core.timebase import NS_PER_MS, EpochAnchor
from voxproxy.core.turns import FlushMark, Turn, TurnMachine

if TYPE_CHECKING:  # annotations only
    from voxproxy.core.events import Direction, Event, Pcm
    from voxproxy.core.session.tap import SessionTap


class CallSession:
    """The measurement of one call.

    ``strict``: re-raise the session's own failures instead of counting them as
    ``measurement_error`` (for tests: a bug in the core then fails the test that met it
    rather than showing up only as worse figures). ``None`` takes
    :attr:`strict_by_default`, which is ``False`` (production: a bug is counted and the
    call goes on) and which the test suite sets to ``True``.
    """

    strict_by_default: ClassVar[bool] = False

    def __init__(
        self,
        decoder: Decoder,
        start_ns: int,
        *,
        secret: bytes,
        link_id: str,
        config: SessionConfig | None = None,
        anchor: EpochAnchor | None = None,
        clock_lag: Callable[[int, int], int] | None = None,
        strict: bool | None = None,
        downstream: Callable[[int], float] | None = None,
    ) -> None:
        """``clock_lag(start_ns, end_ns)``: the most a clock reading the shell took in
        that interval can be late (its event-loop lag), or ``None`` when not measured.
        ``downstream(t_ns)``: how much later (ms) the caller may have heard agent audio
        at ``t_ns`` than its playout timeline says, from what the shell observed of the
        way to the caller (:class:`~voxproxy.core.session.evidence.Evidence`), or ``None``.

        Long, but a list: the state the per-message path reads, each field with its note."""
        self.config = cfg = config or SessionConfig()
        self.strict = self.strict_by_default if strict is None else strict
        # What each figure's edges rest on (never-quiet, unheard and shed spans, noise).
        self._evidence = Evidence(cfg.vad, cfg.max_uncertainty_ms, clock_lag, downstream)
        self._shedding = False  # the message being handled is to be shed
        self.decoder = decoder
        self.start_ns = start_ns
        self._secret = secret
        self._link_id = link_id  # proxy-issued id of this call (never derived from caller data)
        self._anchor = anchor or EpochAnchor(mono_ns=start_ns, wall_ns=0)
        self.wire_call_id_hash: str | None = None
        self._converters: list[Converter | None] = [None, None]
        self._detectors: list[SpeechDetector | None] = [None, None]
        self._playout: Playout | None = None
        self._paced = cfg.agent_playout == "arrival"
        self._downstream_ns = int(cfg.downstream_offset_ms * NS_PER_MS)
        # What the caller hears of the agent, handed to the agent's detector.
        self.hearing = AgentHearing(self._evidence, start_ns + self._downstream_ns)
        # Not strict, even in a strict session: a burst of caller audio after a stall of the
        # caller's network covers time the watermark has passed (counted in late_inputs).
        self.turns = TurnMachine(cfg.turns, strict=False)
        self._flush_queue: deque[FlushMark] = deque()
        self._now_ns = start_ns
        self._last_pump_ns = start_ns
        self._pump_interval_ns = PUMP_INTERVAL_MS * NS_PER_MS
        # Set by a shell that measures many calls in one turn (proxy/measuring.py): while
        # the group is open, a pump's analysis waits for its one energies pass (pumps.py);
        # a waiting pump (its energies made once the pass has run) ends at the next input.
        self.pumps: PumpGroup | None = None
        self._due: WaitingPump | None = None
        self.anomalies: Counter[str] = Counter()
        self.measurement_disabled = False
        self._messages = [0, 0]
        self._wire = WireCheck()  # what the caller's first messages look like
        self._bytes = [0, 0]
        self._audio_ns = [0, 0]
        # The caller's audio kept to real time on its way to its detector.
        self.intake = CallerIntake(start_ns, self.anomalies, self._evidence)
        self._marks = Marks(self.anomalies)  # agent marks awaiting their echo
        self._flush_count = 0
        self.dtmf = 0
        self.transcripts = 0
        self.stream_stopped = False
        self.upstream_connected_ns: int | None = None
        self.caller_noise_events = 0
        self.tool_events: list[ToolEvent] = []
        self.stages: list[StageMark] = []
        self._items = Items()  # agent audio items (OpenAI item_id) and their truncates
        self.final_turns: list[Turn] = []  # set by close(): the turns with absolute times
        self._closed = False
        self.tap: SessionTap | None = None  # told every input from the shell (a capture)

    # -- input from the shell --------------------------------------------------------------

    def on_message(
        self, direction: Direction, payload: bytes | str, t_ns: int, *, shed: bool = False
    ) -> list[Event]:
        """Measure one forwarded message. Never raises; returns the decoded events.

        ``shed``: the shell's measurement fell behind (a saturated core) and sheds this
        message: it is decoded (stream starts, marks, flushes and the playout timeline
        stay exact) but its audio is not analysed; figures near it are withheld with the
        reason ``measurement_shed``."""
        if self.tap is not None:
            self.tap.message(direction, payload, t_ns, shed, self.measurement_disabled)
        self._messages[direction] += 1
        self._bytes[direction] += len(payload)
        if self.measurement_disabled:
            return []
        if direction is CALLER_TO_AGENT and self._messages[direction] <= WIRE_SAMPLE:
            self._wire.note(payload, strict=self.strict)
        try:
            if self._due is not None:
                self.finish_pump()  # (its group did not run before this message)
            self._shedding = shed
            events = self.decoder.decode(direction, payload, t_ns)
            for ev in events:
                if type(ev) is Audio:  # the usual message: one frame of audio
                    self._audio(ev)
                else:
                    self._handle(ev)
            self._shedding = False
            if t_ns - self._last_pump_ns >= self._pump_interval_ns and not self._closed:
                self._pump(t_ns, wait=True)
            return events
        except Exception:
            self._shedding = False
            self._own_failure()
            return []

    def on_audio(self, audio: Audio, *, wire_bytes: int = 0) -> None:
        """Measure audio the shell decoded itself (a media transport such as WebRTC).

        ``audio`` is mono 16-bit, carried by one packet of ``wire_bytes`` that arrived
        at ``audio.t_ns``. Caller audio covers ``[t - d, t]`` as on any wire; agent audio
        goes on the playout timeline, or is audible on arrival with
        ``SessionConfig(agent_playout="arrival")``. Never raises.
        """
        if (tap := self.tap) is not None:
            tap.audio(audio, wire_bytes, self.measurement_disabled)
        direction = audio.direction
        self._messages[direction] += 1
        self._bytes[direction] += wire_bytes
        if self.measurement_disabled or self._closed:
            return
        try:
            if self._due is not None:
                self.finish_pump()
            self._handle(audio)
            t_ns = audio.t_ns
            if t_ns - self._last_pump_ns >= self._pump_interval_ns:
                self._pump(t_ns)
        except Exception:
            self._own_failure()

    def on_event(self, ev: ToolEvent | StageMark) -> None:
        """An event from outside the media (the event API), stamped by the shell."""
        if self.tap is not None:
            self.tap.event(ev)
        if self._closed:
            return
        try:
            if self._due is not None:
                self.finish_pump()
            self._handle(ev)
        except Exception:
            self._own_failure()

    def _own_failure(self) -> None:
        """The session itself failed (a voxproxy bug): raise when strict, else count it."""
        if self.strict:
            raise  # re-raises the exception being handled: called only in ``except``
        self._count_error()

    def note_measurement_error(self) -> None:
        if self.tap is not None:
            self.tap.error()
        self._count_error()

    def _count_error(self) -> None:
        self.anomalies[AnomalyKind.MEASUREMENT_ERROR.value] += 1
        if self.anomalies[AnomalyKind.MEASUREMENT_ERROR.value] >= MAX_MEASUREMENT_ERRORS:
            self.measurement_disabled = True

    def note_anomaly(self, kind: AnomalyKind, count: int = 1) -> None:
        if self.tap is not None:
            self.tap.anomaly(kind.value, count)
        self.anomalies[kind.value] += count

    def count_unmeasured(self, direction: Direction, messages: int, wire_bytes: int) -> None:
        """Messages the shell forwarded without measuring them (a flood beyond its rate
        bound): counted in the traffic only."""
        if self.tap is not None:
            self.tap.unmeasured(direction, messages, wire_bytes)
        self._messages[direction] += messages
        self._bytes[direction] += wire_bytes

    def on_upstream_connected(self, t_ns: int) -> None:
        if self.tap is not None:
            self.tap.upstream(t_ns)
        self.upstream_connected_ns = t_ns

    def note_cut(self, t_ns: int) -> None:
        """The agent's answer playing at ``t_ns`` was cut short there, as a shell that saw
        the whole call knows (a recording, where no flush says so: ``voxproxy analyze``
        finds where a barge-in stopped the agent in a first pass). Its level is then read
        from its part heard, and its edges' band widened, as after a flush."""
        if not self._closed:
            self._cut_answer(t_ns)

    # -- events ----------------------------------------------------------------------------

    def _handle(self, ev: Event) -> None:
        if isinstance(ev, Audio):
            self._audio(ev)
        elif isinstance(ev, Flush):
            self._flush(ev)
        elif isinstance(ev, MarkSent):
            self._mark_sent(ev)
        elif isinstance(ev, MarkEcho):
            self._marks.echoed(ev.name, ev.t_ns, self._flush_count)
        elif isinstance(ev, Anomaly):
            self.anomalies[ev.kind.value] += 1
        elif isinstance(ev, StreamStart):
            if ev.wire_call_id:
                call_hash = keyed_hash(self._secret, ev.wire_call_id, "c_")
                if self.wire_call_id_hash is None:
                    self.wire_call_id_hash = call_hash
                elif call_hash != self.wire_call_id_hash:
                    # One connection is one call: its first id stays its identity.
                    self.anomalies[AnomalyKind.REPEATED_START.value] += 1
        elif isinstance(ev, StreamStop):
            self.stream_stopped = True
        elif isinstance(ev, Dtmf):
            self.dtmf += 1
        elif isinstance(ev, Transcript):
            self.transcripts += 1
        elif isinstance(ev, ToolEvent):
            if len(self.tool_events) < MAX_TOOL_EVENTS:
                self.tool_events.append(ev)
            else:
                self.anomalies[AnomalyKind.EVENTS_OVER_LIMIT.value] += 1
        elif isinstance(ev, StageMark) and len(self.stages) < MAX_STAGE_MARKS:
            self.stages.append(ev)

    def _converter(self, direction: Direction, rate: int) -> Converter:
        conv = self._converters[direction]
        if conv is None or conv.in_rate_hz != rate:
            if conv is not None:
                self.anomalies[AnomalyKind.BAD_AUDIO.value] += 1  # the rate changed mid-call
            conv = Converter(rate)
            self._converters[direction] = conv
            self._detectors[direction] = SpeechDetector(
                conv.out_rate_hz,
                self.config.vad,
                batch_ms=PUMP_INTERVAL_MS * 2,
                codec=codec_of(self.decoder, direction),
                wire_rate_hz=rate,
            )
            if direction is AGENT_TO_CALLER and not self._paced:
                self._playout = Playout(
                    conv.out_rate_hz,
                    self._downstream_ns,
                    max_ahead_ns=int(self.config.agent_queue_ahead_ms * NS_PER_MS),
                )
        return conv

    def _audio(self, ev: Audio) -> None:
        # (The event's fields read once: on an interpreted class each read is a lookup.)
        rate = ev.sample_rate_hz
        if not MIN_RATE_HZ <= rate <= MAX_RATE_HZ:
            self.anomalies[AnomalyKind.BAD_AUDIO.value] += 1  # no wire carries such a rate
            return
        direction = ev.direction
        pcm = ev.pcm
        t_ns = ev.t_ns
        conv = self._converters[direction]
        if conv is None or conv.in_rate_hz != rate:
            conv = self._converter(direction, rate)
        dur = pcm.size * 1_000_000_000 // rate
        self._audio_ns[direction] += dur
        if self._shedding and not self._paced:
            self._shed_audio(ev, dur)
            return
        if direction is CALLER_TO_AGENT:
            det = self._detectors[CALLER_TO_AGENT]
            assert det is not None
            self.intake.take(det, pcm, rate, t_ns, conv, dur)
            return
        out_rate = conv.out_rate_hz
        if conv.in_rate_hz != out_rate:
            pcm = conv.convert(pcm)
        if self._paced:
            self._agent_on_arrival(pcm, out_rate, t_ns)
        else:
            playout = self._playout
            assert playout is not None
            unkept = playout.unkept_chunks
            start = playout.add(pcm, t_ns)
            if playout.unkept_chunks != unkept:
                self.anomalies[AnomalyKind.AGENT_AUDIO_AHEAD.value] += 1
            item_id = ev.item_id
            if item_id is not None:
                self._items.note(item_id, start, pcm.size * 1_000_000_000 // out_rate)

    def _shed_audio(self, ev: Audio, dur: int) -> None:
        """Audio whose analysis was shed: its span is kept (caller: the time it covers;
        agent: its place on the playout timeline, which stays exact), its samples not."""
        if ev.direction is CALLER_TO_AGENT:
            self.intake.shed(ev.t_ns, dur)
            return
        self.anomalies[AnomalyKind.MEASUREMENT_SHED.value] += 1
        playout = self._playout
        assert playout is not None
        start = playout.add_span(dur, ev.t_ns)
        self._evidence.note_shed(AGENT_TO_CALLER, start, start + dur)
        if ev.item_id is not None:
            self._items.note(ev.item_id, start, dur)

    def _agent_on_arrival(self, pcm: Pcm, rate: int, t_ns: int) -> None:
        """Paced agent audio: audible from its arrival (``hearing.on_arrival``)."""
        det = self._detectors[AGENT_TO_CALLER]
        if det is not None and pcm.size:
            self.hearing.on_arrival(det, pcm, rate, t_ns + self._downstream_ns)

    def _flush(self, ev: Flush) -> None:
        if ev.claimed_played_ms is not None:
            self._items.truncate(ev)
        self._flush_count += 1
        if self._playout is None:
            t = ev.t_ns + self._downstream_ns
            end = self.hearing.arrival_end_ns
            cut = self._paced and end is not None and end > t
            self._flush_queue.append(FlushMark(t, cut))
            if cut:
                self._cut_answer(t)
            return
        # Audio up to the flush was audible; hand it to the detector first.
        self._release(ev.t_ns)
        result = self._playout.flush(ev.t_ns)
        self._flush_queue.append(FlushMark(result.t_ns, result.cut_audible))
        if result.cut_audible:
            self._cut_answer(result.t_ns)

    def _cut_answer(self, t_ns: int) -> None:
        """A flush cut the answer playing at ``t_ns``: its level is read from its part
        heard (the agent detector widens its edges' band)."""
        det = self._detectors[AGENT_TO_CALLER]
        if det is not None:
            det.note_cut(t_ns)

    def _mark_sent(self, ev: MarkSent) -> None:
        cursor = self._playout.cursor_ns if self._playout is not None else None
        t = ev.t_ns + self._downstream_ns
        predicted = t if cursor is None else max(t, cursor)
        self._marks.sent(ev.name, predicted, self._flush_count)

    # -- time ------------------------------------------------------------------------------

    def _release(self, t_ns: int) -> None:
        """Hand the agent's detector what has played up to ``t_ns`` (as the caller hears it)."""
        playout = self._playout
        det = self._detectors[AGENT_TO_CALLER]
        if playout is not None and det is not None:
            self.hearing.release(playout, det, t_ns + self._downstream_ns)

    def _pump(self, t_ns: int, wait: bool = False) -> None:
        """Advance the detectors to ``t_ns`` and feed the turns. ``wait``: while the
        call's pump group is open, the analysis may wait for the group's pass."""
        if t_ns > self._now_ns:
            self._now_ns = t_ns
        now = self._now_ns
        # Pumps stay on this call's own 100 ms grid (from its start). Setting the mark to
        # "now" instead lets one stall of the event loop, which hands many calls' messages
        # over at the same instant, align all their pumps; every later pump then comes as
        # one burst, which the calls' forwarding waits behind.
        interval = self._pump_interval_ns
        if now - self._last_pump_ns >= interval:
            self._last_pump_ns += (now - self._last_pump_ns) // interval * interval
        self._release(now)
        caller = self._detectors[CALLER_TO_AGENT]
        agent = self._detectors[AGENT_TO_CALLER]
        if caller is not None and agent is not None:
            # The two directions' energies in one numpy pass, with other calls' while a
            # group is open (then the rest waits for the group: finish_pump).
            batches = prepare_together(caller, now, agent, now + self._downstream_ns)
            if batches is not None:
                self._due = pump = WaitingPump(now, batches[0], batches[1], caller)
                group = self.pumps
                if wait and group is not None and group.open:
                    group.add(pump)
                    return
                self.finish_pump()
                return
        elif caller is not None:
            caller.advance(now)
        elif agent is not None:
            agent.advance(now + self._downstream_ns)
        self._pumped(now)

    @property
    def pump_due(self) -> bool:
        """A pump waits for its group's pass: the call's next input should wait for it
        too (if it does not, the pump is finished alone first, computing its energies)."""
        due = self._due
        return due is not None and not due.passed

    def finish_pump(self) -> None:
        """Finish the waiting pump with its batches' energies (made by a group's pass, or
        else now). What the pump would have done at once, in the same order: the same
        figures."""
        due = self._due
        if due is None:
            return
        self._due = None
        due.finished = True
        now = due.now
        caller = self._detectors[CALLER_TO_AGENT]
        agent = self._detectors[AGENT_TO_CALLER]
        assert caller is not None and agent is not None
        energies = due.energies
        if energies is None:
            ea, eb = energies_together(caller, [due.caller, due.agent])
        else:
            ea, eb = energies
        finish_together(
            caller,
            now,
            agent,
            now + self._downstream_ns,
            (due.caller, ea[0], ea[1]),
            (due.agent, eb[0], eb[1]),
        )
        self._pumped(now)

    def _pumped(self, now: int) -> None:
        caller = self._detectors[CALLER_TO_AGENT]
        agent = self._detectors[AGENT_TO_CALLER]
        if (
            (caller is not None and caller.spurts)
            or (agent is not None and agent.spurts)
            or (self._flush_queue)
        ):
            self._feed_turns(self._watermark(now))

    def _watermark(self, now: int) -> int:
        """Nothing that starts before this time can still appear."""
        return watermark(now, self.intake.max_chunk_ns, self.config.vad, self._detectors)

    def _feed_turns(self, up_to: int) -> None:
        self.caller_noise_events += feed_turns(
            self._detectors[CALLER_TO_AGENT],
            self._detectors[AGENT_TO_CALLER],
            self._flush_queue,
            up_to,
            self._evidence,
            self.turns,
        )

    # -- the end ---------------------------------------------------------------------------

    def close(
        self,
        end_ns: int,
        terminal: Terminal,
        close: CloseInfo,
        *,
        dialect: str | None = None,
    ) -> Receipt:
        """The call is over: settle everything and return its receipt."""
        if self._closed:
            raise UsageError(f"CallSession.close() at {end_ns} ns: the call was already closed")
        if self.tap is not None:
            self.tap.closed(end_ns, terminal, close, dialect, self.measurement_disabled)
        self._closed = True
        turns: list[Turn] = []
        if not self.measurement_disabled:
            try:
                if self._due is not None:
                    self.finish_pump()
                self._pump(end_ns)
                for direction in (CALLER_TO_AGENT, AGENT_TO_CALLER):
                    det = self._detectors[direction]
                    if det is not None:
                        det.finish(end_ns)
                        self._evidence.note_masked(direction, det.masked_spans)
                if self._playout is not None:
                    self._playout.drop_queued()  # due after the end: never heard
                self._feed_turns(1 << 62)
                turns = self.turns.finish(end_ns)
                self.final_turns = turns
            except Exception:
                self._own_failure()
                turns = []
        name = dialect or self.decoder.name
        try:
            return build_receipt(self._receipt_inputs(), end_ns, terminal, close, turns, name)
        except Exception:
            if self.strict:
                raise
            # A bug in building the full receipt must not cost the call its receipt: it
            # gets one without the measurements (counted, and flagged measurement_disabled).
            self._count_error()
            self.measurement_disabled = True
            self.final_turns = []
            self.tool_events = []
            self.stages = []
            self._items.truncations = []
            return build_receipt(self._receipt_inputs(), end_ns, terminal, close, [], name)

    def _receipt_inputs(self) -> ReceiptInputs:
        """What the receipt is built from, as it stands now."""
        playout = self._playout
        return ReceiptInputs(
            config=self.config,
            start_ns=self.start_ns,
            anchor=self._anchor,
            secret=self._secret,
            link_id=self._link_id,
            wire_call_id_hash=self.wire_call_id_hash,
            upstream_connected_ns=self.upstream_connected_ns,
            evidence=self._evidence,
            caller_chunks_ns=self.intake.chunk_ns,
            caller_unanalysed_ns=self.intake.unanalysed_ns,
            agent_unanalysed_ns=self.hearing.unanalysed_ns,
            flushes=self._flush_count,
            yielded_without_caller_speech=self.turns.yielded_without_caller_speech,
            caller_noise_events=self.caller_noise_events,
            mark_errors_ns=self._marks.errors,
            marks_cleared=self._marks.cleared,
            agent_audio_dropped_ns=playout.dropped_ns if playout is not None else 0,
            messages=self._messages,
            wire_bytes=self._bytes,
            audio_ns=self._audio_ns,
            anomalies=self.anomalies,
            wire_looks_like=self._wire.looks_like(self.decoder.name, self._audio_ns[0]),  # caller
            measurement_disabled=self.measurement_disabled,
            tool_events=self.tool_events,
            stages=self.stages,
            truncations=self._items.truncations,
        )
