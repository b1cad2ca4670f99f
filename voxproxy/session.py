"""One call, measured: dialect -> analysis -> turns -> receipt. Sans-I/O.

A :class:`CallSession` is handed copies of the call's messages with their
arrival times and returns a :class:`~voxproxy.receipts.Receipt` when the call
ends. It reads no clock, opens no socket and never raises on what a peer sent:
bad messages become anomalies, and an internal error is counted
(``measurement_error``) rather than allowed to reach the forwarding plane.

Data flow per message::

    decoder.decode() -> Audio(caller) -> Converter -> SpeechDetector(caller)
                     -> Audio(agent)  -> Converter -> Playout -> (as time passes)
                                                               SpeechDetector(agent)
                     -> Flush / MarkSent / MarkEcho / StreamStart / Anomaly ...
    spurts + flushes -- merged in time order below a watermark --> TurnMachine
"""

from __future__ import annotations

import heapq
import statistics
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from voxproxy.analysis.playout import MAX_AHEAD_NS, Playout
from voxproxy.analysis.vad import SpeechDetector, Spurt, VadConfig
from voxproxy.audio.resample import Converter
from voxproxy.dialects.base import Decoder
from voxproxy.dialects.detect import PENDING
from voxproxy.dialects.detect import guess as guess_dialect
from voxproxy.effects import EffectSummary, derive
from voxproxy.errors import UsageError
from voxproxy.events import (
    AGENT_TO_CALLER,
    CALLER_TO_AGENT,
    Anomaly,
    AnomalyKind,
    Audio,
    Direction,
    Dtmf,
    Event,
    Flush,
    MarkEcho,
    MarkSent,
    Pcm,
    StageMark,
    StreamStart,
    StreamStop,
    ToolEvent,
    Transcript,
)
from voxproxy.ids import keyed_hash
from voxproxy.receipts.model import (
    BargeInRecord,
    CloseInfo,
    Effects,
    EventRecord,
    MarkCheck,
    Receipt,
    Settings,
    Summary,
    Terminal,
    ToolCallRecord,
    Traffic,
    TruncationRecord,
    TurnRecord,
    TurnStages,
)
from voxproxy.timebase import NS_PER_MS, EpochAnchor
from voxproxy.turns import FlushMark, Turn, TurnConfig, TurnKind, TurnMachine, barge_outcome

MAX_MEASUREMENT_ERRORS = 50
MIN_RATE_HZ, MAX_RATE_HZ = 4000, 192_000  # audio rates the core accepts
MAX_TOOL_EVENTS = 1_000  # tool/state/outcome events kept per call (more: events_over_limit)
MAX_STAGE_MARKS = 10_000
PUMP_INTERVAL_MS = 100  # how often time-driven work (playout release, VAD, turns) runs
MAX_PENDING_MARKS = 4096  # agent marks awaiting their echo (more: marks_over_limit)
MAX_MARK_NAME_CHARS = 256  # longer mark names are still matched (mark_name_too_long)


STAGE_LOOKBACK_NS = 2_000 * NS_PER_MS
STAGE_LOOKAHEAD_NS = 500 * NS_PER_MS
_CHAIN_STAGES = (
    "server_speech_started",
    "server_speech_stopped",
    "response_created",
    "first_audio_delta",
    "response_done",
)
_FILL_GAP_NS = 100 * NS_PER_MS  # playout gaps up to this long reach the detector as silence
_MAX_NEVER_QUIET = 256  # never-quiet spans kept per direction
_WIRE_SAMPLE = 20  # the caller's first messages are checked against the configured dialect
_WIRE_MIN_SEEN = 3  # ... and this many must look like another one
_WIRES = frozenset({"raw", "twilio", "telnyx", "plivo", "vonage", "exotel", "openai-realtime"})
_MAX_SPANS = 4096  # spurt spans kept per direction
_BUSY_SHARE = 0.5  # active through this share of the other side's speech: never quiet
_BUSY_MIN_NS = 500 * NS_PER_MS  # ... judged once the other side spoke this long
# The detector's own edge uncertainty for a figure (two edges) on clean speech: the p95
# of its error over the space of agents and wires (tests/test_session_space.py).
DETECTOR_UNCERTAINTY_MS = 10.0
# Clock readings around an edge that decide it: the frames before it, the look-ahead after.
_LAG_BEFORE_NS = 100 * NS_PER_MS
_LAG_AFTER_NS = 350 * NS_PER_MS
_MAX_ITEMS = 64  # agent audio items whose playout is remembered (for truncates)
_MAX_ITEM_GAPS = 1024
# Caller audio may run this far ahead of the call's time before it is an anomaly and the
# audio beyond is not analysed (jitter, and a burst after a network stall, stay within).
CALLER_AHEAD_TOLERANCE_MS = 2000.0
_CALLER_AHEAD_NS = int(CALLER_AHEAD_TOLERANCE_MS * NS_PER_MS)
# Shed audio this close to an edge withholds its figure: the noise floor's window (2 s)
# covers the utterance gap (1 s) and the onset walks' two look-backs (640 ms).
_SHED_MARGIN_NS = 2_000 * NS_PER_MS
_SPAN_JOIN_NS = 100 * NS_PER_MS  # unanalysed spans this close are kept as one


def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / NS_PER_MS, 1)


def _event_record(e: ToolEvent, rel: Callable[[int | None], float | None]) -> EventRecord:
    return EventRecord(
        kind=e.kind,
        t_ms=rel(e.t_ns) or 0.0,
        source=e.source,  # type: ignore[arg-type]
        operation_id=e.operation_id,
        tool=e.tool,
        attempt=e.attempt,
        state_version=e.state_version,
        args_hash=e.args_hash,
        idempotency_key=e.idempotency_key,
        status=e.status,
        result_hash=e.result_hash,
        field=e.field,
        version=e.version,
        value_hash=e.value_hash,
        verified=e.verified,
    )


@dataclass(slots=True)
class _ItemPlay:
    """One agent audio item on the playout timeline."""

    start_ns: int  # its first sample
    end_ns: int  # the end of its latest chunk
    # (start, length) of the pauses between its chunks, when its audio came slower than
    # real time; bounded (a stream with that many pauses is no longer worth modelling).
    gaps: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SessionConfig:
    vad: VadConfig = field(default_factory=VadConfig)
    turns: TurnConfig = field(default_factory=TurnConfig)
    downstream_offset_ms: float = 0.0
    transport: str = "websocket"
    # "model": agent audio is placed on the playout timeline (MEASUREMENT.md 3); "arrival":
    # a paced transport (WebRTC) where audible time = arrival, the model's identity.
    agent_playout: str = "model"
    # A figure whose uncertainty (the detector's own, plus how late the shell's clock
    # readings near its edges ran) exceeds this is withheld: null, reason "clock_lag".
    max_uncertainty_ms: float = 50.0
    # Agent audio due to play later than this after its arrival keeps only its place on the
    # playout timeline, not its samples: it plays, unanalysed (anomaly agent_audio_ahead).
    agent_queue_ahead_ms: float = MAX_AHEAD_NS / NS_PER_MS


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
    ) -> None:
        """``clock_lag(start_ns, end_ns)``: the most a clock reading the shell took in
        that interval can be late (its event-loop lag), or ``None`` when not measured."""
        self.config = cfg = config or SessionConfig()
        self.strict = self.strict_by_default if strict is None else strict
        self._clock_lag = clock_lag
        # Spans of spurts so long that their direction was never quiet, per direction, and
        # every spurt's span (for how much each direction talked over the other).
        self._never_quiet: tuple[list[tuple[int, int]], list[tuple[int, int]]] = ([], [])
        self._spans: tuple[list[tuple[int, int]], list[tuple[int, int]]] = ([], [])
        # Per direction, how much of each spurt edge (by its time) noise may have hidden.
        self._masked: tuple[dict[int, float], dict[int, float]] = ({}, {})
        # ... and how far each moves with the talker's level read EDGE_LEVEL_DB off.
        self._ambiguous: tuple[dict[int, float], dict[int, float]] = ({}, {})
        self._busy: list[bool] = [False, False]  # a direction active under the other's speech
        # Spans of each direction the detector did not hear although audio was there (audio
        # too far ahead of real time): an edge near one is not a speech edge one can trust.
        self._unheard: tuple[list[tuple[int, int]], list[tuple[int, int]]] = ([], [])
        # Spans of each direction's audio that measurement shed under load (not analysed:
        # the shell's measurement fell behind its forwarding); figures near one are withheld.
        self._shed: tuple[list[tuple[int, int]], list[tuple[int, int]]] = ([], [])
        self._shedding = False  # the message being handled is to be shed
        self._caller_break = False  # caller audio was shed: the next push starts afresh
        self._agent_unanalysed_ns = 0  # agent audio that played without its samples kept
        self._agent_skipped = False  # the agent detector's last audio was before such a span
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
        self._agent_end_ns: int | None = None  # paced: end of the last agent chunk heard
        self._downstream_ns = int(cfg.downstream_offset_ms * NS_PER_MS)
        # Not strict, even in a strict session: a burst of caller audio after a stall of the
        # caller's network covers time the watermark has passed (counted in late_inputs).
        self.turns = TurnMachine(cfg.turns, strict=False)
        self._flush_queue: deque[FlushMark] = deque()
        self._now_ns = start_ns
        self._last_pump_ns = start_ns
        self._pump_interval_ns = PUMP_INTERVAL_MS * NS_PER_MS
        self.anomalies: Counter[str] = Counter()
        self.measurement_disabled = False
        self._messages = [0, 0]
        self._wire_looks: Counter[str] = Counter()  # dialects the caller's first messages suggest
        self._bytes = [0, 0]
        self._audio_ns = [0, 0]
        self._caller_chunk_ns: deque[int] = deque(maxlen=256)
        self._caller_analysed_ns = 0  # caller audio handed to analysis (bounded by real time)
        self._caller_unanalysed_ns = 0  # caller audio too far ahead of real time to analyse
        self._max_caller_chunk_ns = 20 * NS_PER_MS
        # hash(name) -> (predicted echo time, flush count): a peer's names are never kept
        self._marks: dict[int, tuple[int, int]] = {}
        self._mark_errors: list[int] = []
        self._marks_cleared = 0
        self._flush_count = 0
        self.dtmf = 0
        self.transcripts = 0
        self.stream_stopped = False
        self.upstream_connected_ns: int | None = None
        self.caller_noise_events = 0
        self.tool_events: list[ToolEvent] = []
        self.stages: list[StageMark] = []
        self._items: dict[str, _ItemPlay] = {}  # agent audio items (OpenAI item_id), playout
        self._truncations: list[tuple[int, float, int | None]] = []  # t, claimed ms, modelled ns
        self.final_turns: list[Turn] = []  # set by close(): the turns with absolute times
        self._closed = False

    # -- input from the shell --------------------------------------------------------------

    def on_message(
        self, direction: Direction, payload: bytes | str, t_ns: int, *, shed: bool = False
    ) -> list[Event]:
        """Measure one forwarded message. Never raises; returns the decoded events.

        ``shed``: the shell's measurement fell behind (a saturated core) and sheds this
        message: it is decoded (stream starts, marks, flushes and the playout timeline
        stay exact) but its audio is not analysed; figures near it are withheld with the
        reason ``measurement_shed``."""
        self._messages[direction] += 1
        self._bytes[direction] += len(payload)
        if self.measurement_disabled:
            return []
        if direction is CALLER_TO_AGENT and self._messages[direction] <= _WIRE_SAMPLE:
            self._note_wire(payload)
        try:
            self._shedding = shed
            events = self.decoder.decode(direction, payload, t_ns)
            for ev in events:
                self._handle(ev)
            self._shedding = False
            if t_ns - self._last_pump_ns >= self._pump_interval_ns and not self._closed:
                self._pump(t_ns)
            return events
        except Exception:
            self._shedding = False
            self._own_failure()
            return []

    def _note_wire(self, payload: bytes | str) -> None:
        """What the caller's first messages look like, whatever the configured dialect
        (the dialect name only; nothing of the message is kept)."""
        try:
            looks = guess_dialect(payload)
        except Exception:
            if self.strict:
                raise
            return
        if looks is not None and looks != PENDING:
            self._wire_looks[looks] += 1

    def wire_looks_like(self) -> str | None:
        """The dialect the caller's wire looks like when it is not the configured one
        (a ``raw`` caller on a ``twilio`` proxy): nothing of it can be measured."""
        name = self.decoder.name
        if name not in _WIRES:
            return None
        if not self._wire_looks or self._audio_ns[CALLER_TO_AGENT] > 0:
            return None
        looks, seen = self._wire_looks.most_common(1)[0]
        return looks if looks != name and seen >= _WIRE_MIN_SEEN else None

    def _anomalies_with_wire(self) -> Counter[str]:
        if self.wire_looks_like() is None:
            return self.anomalies
        return self.anomalies + Counter({"dialect_mismatch": 1})

    def on_audio(
        self,
        direction: Direction,
        pcm: Pcm,
        sample_rate_hz: int,
        t_ns: int,
        *,
        wire_bytes: int = 0,
    ) -> None:
        """Measure audio the shell decoded itself (a media transport such as WebRTC).

        ``pcm`` is mono 16-bit at ``sample_rate_hz``, carried by one packet of
        ``wire_bytes`` that arrived at ``t_ns``. Caller audio covers ``[t - d, t]``
        as on any wire; agent audio goes on the playout timeline, or is audible on
        arrival with ``SessionConfig(agent_playout="arrival")``. Never raises.
        """
        self._messages[direction] += 1
        self._bytes[direction] += wire_bytes
        if self.measurement_disabled or self._closed:
            return
        try:
            self._handle(Audio(direction, pcm, sample_rate_hz, t_ns))
            if t_ns - self._last_pump_ns >= self._pump_interval_ns:
                self._pump(t_ns)
        except Exception:
            self._own_failure()

    def on_event(self, ev: ToolEvent | StageMark) -> None:
        """An event from outside the media (the event API), stamped by the shell."""
        if self._closed:
            return
        try:
            self._handle(ev)
        except Exception:
            self._own_failure()

    def _own_failure(self) -> None:
        """The session itself failed (a voxproxy bug): raise when strict, else count it."""
        if self.strict:
            raise  # re-raises the exception being handled: called only in ``except``
        self.note_measurement_error()

    def note_measurement_error(self) -> None:
        self.anomalies[AnomalyKind.MEASUREMENT_ERROR.value] += 1
        if self.anomalies[AnomalyKind.MEASUREMENT_ERROR.value] >= MAX_MEASUREMENT_ERRORS:
            self.measurement_disabled = True

    def note_anomaly(self, kind: AnomalyKind) -> None:
        self.anomalies[kind.value] += 1

    def on_upstream_connected(self, t_ns: int) -> None:
        self.upstream_connected_ns = t_ns

    def advance(self, t_ns: int) -> None:
        """Time has passed with no message: let spurts close and turns settle."""
        if self.measurement_disabled or self._closed:
            return
        try:
            self._pump(t_ns)
        except Exception:
            self._own_failure()

    def next_deadline(self) -> int | None:
        """When :meth:`advance` next has something to do, if nothing arrives before."""
        deadlines = [d.deadline_ns() for d in self._detectors if d is not None]
        cursor = self._playout.cursor_ns if self._playout is not None else None
        if cursor is not None and cursor > self._now_ns:
            deadlines.append(cursor)
        found = [d for d in deadlines if d is not None]
        return min(found) if found else None

    # -- events ----------------------------------------------------------------------------

    def _handle(self, ev: Event) -> None:
        if isinstance(ev, Audio):
            self._audio(ev)
        elif isinstance(ev, Flush):
            self._flush(ev)
        elif isinstance(ev, MarkSent):
            self._mark_sent(ev)
        elif isinstance(ev, MarkEcho):
            self._mark_echo(ev)
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
                conv.out_rate_hz, self.config.vad, batch_ms=PUMP_INTERVAL_MS * 2
            )
            if direction is AGENT_TO_CALLER and not self._paced:
                self._playout = Playout(
                    conv.out_rate_hz,
                    self._downstream_ns,
                    max_ahead_ns=int(self.config.agent_queue_ahead_ms * NS_PER_MS),
                )
        return conv

    def _audio(self, ev: Audio) -> None:
        if not MIN_RATE_HZ <= ev.sample_rate_hz <= MAX_RATE_HZ:
            self.anomalies[AnomalyKind.BAD_AUDIO.value] += 1  # no wire carries such a rate
            return
        conv = self._converter(ev.direction, ev.sample_rate_hz)
        dur = ev.pcm.size * 1_000_000_000 // ev.sample_rate_hz
        self._audio_ns[ev.direction] += dur
        if self._shedding and not self._paced:
            self._shed_audio(ev, dur)
            return
        if ev.direction is CALLER_TO_AGENT:
            self._caller_audio(ev, conv, dur)
            return
        pcm = conv.convert(ev.pcm)
        if self._paced:
            self._agent_on_arrival(pcm, conv.out_rate_hz, ev.t_ns)
        else:
            playout = self._playout
            assert playout is not None
            unkept = playout.unkept_chunks
            start = playout.add(pcm, ev.t_ns)
            if playout.unkept_chunks != unkept:
                self.anomalies[AnomalyKind.AGENT_AUDIO_AHEAD.value] += 1
            if ev.item_id is not None:
                self._note_item(ev.item_id, start, pcm.size * 1_000_000_000 // conv.out_rate_hz)

    def _shed_audio(self, ev: Audio, dur: int) -> None:
        """Audio whose analysis was shed: its span is kept (caller: the time it covers;
        agent: its place on the playout timeline, which stays exact), its samples not."""
        self.anomalies[AnomalyKind.MEASUREMENT_SHED.value] += 1
        if ev.direction is CALLER_TO_AGENT:
            self._caller_chunk_ns.append(dur)
            self._caller_analysed_ns += dur  # its share of real time is spent all the same
            self._caller_unanalysed_ns += dur
            self._note_span(self._shed[CALLER_TO_AGENT], ev.t_ns - dur, ev.t_ns)
            self._caller_break = True  # the detector does not walk across what it missed
            return
        playout = self._playout
        assert playout is not None
        start = playout.add_span(dur, ev.t_ns)
        self._note_span(self._shed[AGENT_TO_CALLER], start, start + dur)
        if ev.item_id is not None:
            self._note_item(ev.item_id, start, dur)

    def _caller_audio(self, ev: Audio, conv: Converter, dur: int) -> None:
        """Caller audio is analysed only as far as it keeps to real time.

        A caller cannot have captured more audio than the time since the call started
        (MEASUREMENT.md 1: a frame arriving at ``t`` covers ``[t - d, t]``). Audio that
        runs further ahead than :data:`CALLER_AHEAD_TOLERANCE_MS` (jitter and a burst
        after a network stall stay within it) is counted (``caller_audio_ahead``,
        ``caller_audio_unanalysed_ms``) but not analysed: the analysis a caller can ask
        for stays within real time, and a message's within what is still due. Of a
        message that overruns, its most recent part (ending at ``t``) is analysed."""
        self._caller_chunk_ns.append(dur)
        det = self._detectors[CALLER_TO_AGENT]
        assert det is not None
        rate = ev.sample_rate_hz
        src = ev.pcm
        budget = ev.t_ns - self.start_ns + _CALLER_AHEAD_NS - self._caller_analysed_ns
        keep = min(src.size, max(0, budget) * rate // 1_000_000_000)
        if keep < src.size:
            self.anomalies[AnomalyKind.CALLER_AUDIO_AHEAD.value] += 1
            self._caller_unanalysed_ns += dur - keep * 1_000_000_000 // rate
            src = src[src.size - keep :]
            splice = ev.t_ns - keep * 1_000_000_000 // rate
            self._note_unheard(CALLER_TO_AGENT, splice, splice)  # what came before is unheard
        kept_ns = keep * 1_000_000_000 // rate
        self._caller_analysed_ns += kept_ns
        if kept_ns > self._max_caller_chunk_ns:
            self._max_caller_chunk_ns = kept_ns
        pcm = conv.convert(src)
        if pcm.size:
            # A captured frame of duration d that arrives at t covers [t - d, t].
            out_dur = pcm.size * 1_000_000_000 // conv.out_rate_hz
            det.push(pcm, ev.t_ns - out_dur, continuous=not self._caller_break)
            self._caller_break = False

    def _agent_on_arrival(self, pcm: Pcm, rate: int, t_ns: int) -> None:
        """Paced agent audio: audible from its arrival (MEASUREMENT.md 3, the identity).

        Each chunk is anchored at its own arrival, so jitter never accumulates; a pause
        in arrivals up to ``_FILL_GAP_NS`` is heard as that much silence, a longer one
        starts a new stretch."""
        det = self._detectors[AGENT_TO_CALLER]
        if det is None or not pcm.size:
            return
        start = t_ns + self._downstream_ns
        end = self._agent_end_ns
        continuous = end is not None and start - end <= _FILL_GAP_NS
        if end is not None and 0 < start - end <= _FILL_GAP_NS:
            det.push(np.zeros((start - end) * rate // 1_000_000_000, dtype=np.int16), end)
        elif not continuous:
            self._heard_silence(det, end, start)
        det.push(pcm, start, continuous=continuous)
        self._agent_end_ns = start + pcm.size * 1_000_000_000 // rate

    def _note_item(self, item_id: str, start_ns: int, dur_ns: int) -> None:
        """Keep where each agent audio item plays, so that a truncate can be checked."""
        item = self._items.get(item_id)
        if item is None:
            if len(self._items) >= _MAX_ITEMS:
                del self._items[next(iter(self._items))]
            self._items[item_id] = _ItemPlay(start_ns, start_ns + dur_ns)
            return
        if start_ns > item.end_ns and len(item.gaps) < _MAX_ITEM_GAPS:
            item.gaps.append((item.end_ns, start_ns - item.end_ns))  # its audio came slowly
        item.end_ns = start_ns + dur_ns

    def _note_truncate(self, ev: Flush) -> None:
        """The client's claimed playout (``claimed_played_ms``) beside the model's.

        The model's figure is how much of the item's audio had played by the
        truncate's arrival: its audible time up to then, less the pauses inside it.
        """
        assert ev.claimed_played_ms is not None
        item = self._items.get(ev.item_id) if ev.item_id is not None else None
        modelled = None
        if item is not None:
            # The truncate is the client's own act, at its arrival; the item's audio is on
            # the playout timeline, which the downstream offset already moved to the ear.
            t = ev.t_ns
            paused = sum(min(n, max(0, t - a)) for a, n in item.gaps)
            modelled = max(0, min(t, item.end_ns) - item.start_ns - paused)
        if len(self._truncations) < MAX_STAGE_MARKS:
            self._truncations.append((ev.t_ns, ev.claimed_played_ms, modelled))

    def _flush(self, ev: Flush) -> None:
        if ev.claimed_played_ms is not None:
            self._note_truncate(ev)
        self._flush_count += 1
        if self._playout is None:
            t = ev.t_ns + self._downstream_ns
            cut = self._paced and self._agent_end_ns is not None and self._agent_end_ns > t
            self._flush_queue.append(FlushMark(t, cut))
            return
        # Audio up to the flush was audible; hand it to the detector first.
        self._release(ev.t_ns)
        result = self._playout.flush(ev.t_ns)
        self._flush_queue.append(FlushMark(result.t_ns, result.cut_audible))

    def _mark_key(self, name: str) -> int:
        if len(name) > MAX_MARK_NAME_CHARS:
            self.anomalies[AnomalyKind.MARK_NAME_TOO_LONG.value] += 1
        return hash(name)  # in memory only, to match the echo

    def _mark_sent(self, ev: MarkSent) -> None:
        key = self._mark_key(ev.name)
        if key not in self._marks and len(self._marks) >= MAX_PENDING_MARKS:
            self._marks.pop(next(iter(self._marks)))
            self.anomalies[AnomalyKind.MARKS_OVER_LIMIT.value] += 1
        cursor = self._playout.cursor_ns if self._playout is not None else None
        t = ev.t_ns + self._downstream_ns
        predicted = t if cursor is None else max(t, cursor)
        self._marks[key] = (predicted, self._flush_count)

    def _mark_echo(self, ev: MarkEcho) -> None:
        sent = self._marks.pop(hash(ev.name), None)  # (a long name was counted when sent)
        if sent is None:
            return
        predicted, flushes_then = sent
        if self._flush_count != flushes_then:
            self._marks_cleared += 1  # a flush came between: the echo says "dropped"
            return
        self._mark_errors.append(ev.t_ns - predicted)

    # -- time ------------------------------------------------------------------------------

    def _release(self, t_ns: int) -> None:
        playout = self._playout
        det = self._detectors[AGENT_TO_CALLER]
        if playout is None or det is None:
            return
        end = playout.audible_until_ns
        rate = playout.sample_rate_hz
        for piece in playout.release(t_ns + self._downstream_ns):
            if piece.pcm is None:
                # It played, but too far ahead of real time for its samples to be kept: the
                # detector hears nothing of it (neither audio nor silence).
                piece_end = piece.start_ns + piece.duration_ns
                self._agent_unanalysed_ns += piece.duration_ns
                self._note_unheard(AGENT_TO_CALLER, piece.start_ns, piece_end)
                self._agent_skipped = True
                end = piece_end
                continue
            continuous = piece.continuous
            if self._agent_skipped:
                # After an unheard span the detector starts afresh; a pause after the span
                # was silence that the caller heard.
                self._agent_skipped = False
                if end is not None and piece.start_ns > end:
                    det.note_silence(piece.start_ns - end)
                continuous = False
            elif not continuous and end is not None and 0 < piece.start_ns - end <= _FILL_GAP_NS:
                # A short underrun (audio paced in real time, arriving with jitter): the far
                # end played silence that long, so the detector hears exactly that.
                gap = np.zeros((piece.start_ns - end) * rate // 1_000_000_000, dtype=np.int16)
                det.push(gap, end, continuous=True)
                continuous = True
            elif not continuous:
                self._heard_silence(det, end, piece.start_ns)
            det.push(piece.pcm, piece.start_ns, continuous=continuous)
            end = piece.start_ns + piece.pcm.size * 1_000_000_000 // rate

    def _heard_silence(self, det: SpeechDetector, end_ns: int | None, start_ns: int) -> None:
        """Nothing played from ``end_ns`` (the call's start, before any agent audio) to
        ``start_ns``: the caller heard silence, and so does the detector (MEASUREMENT.md 2:
        what the detector hears is what the listener hears), without a frame of work."""
        since = self.start_ns + self._downstream_ns if end_ns is None else end_ns
        det.note_silence(start_ns - since)

    def _pump(self, t_ns: int) -> None:
        if t_ns > self._now_ns:
            self._now_ns = t_ns
        now = self._now_ns
        # Pumps stay on this call's own 100 ms grid (from its start). Setting the mark to
        # "now" instead lets one stall of the event loop, which hands many calls' messages
        # over at the same instant, align all their pumps; every later pump then comes as
        # one burst (measured through the proxy: p99 latency 20 ms at 100 calls, ~60% CPU).
        interval = self._pump_interval_ns
        if now - self._last_pump_ns >= interval:
            self._last_pump_ns += (now - self._last_pump_ns) // interval * interval
        self._release(now)
        caller = self._detectors[CALLER_TO_AGENT]
        agent = self._detectors[AGENT_TO_CALLER]
        if caller is not None:
            caller.advance(now)
        if agent is not None:
            agent.advance(now + self._downstream_ns)
        if (
            (caller is not None and caller.spurts)
            or (agent is not None and agent.spurts)
            or (self._flush_queue)
        ):
            self._feed_turns(self._watermark(now))

    def _watermark(self, now: int) -> int:
        """Nothing that starts before this time can still appear."""
        vad = self.config.vad
        slack = (2 * vad.onset_lookback_ms + vad.frame_ms) * NS_PER_MS  # found, walked again
        marks = [now - self._max_caller_chunk_ns - slack]
        for det in self._detectors:
            if det is not None and det.speaking:
                settled = det.settled_ns()
                if settled is not None:
                    marks.append(settled)
        return min(marks)

    def _feed_turns(self, watermark: int) -> None:
        caller = self._detectors[CALLER_TO_AGENT]
        agent = self._detectors[AGENT_TO_CALLER]
        heap: list[tuple[int, int, int]] = []
        if caller is not None and caller.spurts:
            heap.append((caller.spurts[0].onset_ns, 1, 0))
        if agent is not None and agent.spurts:
            heap.append((agent.spurts[0].onset_ns, 2, 1))
        if self._flush_queue:
            heap.append((self._flush_queue[0].t_ns, 0, 2))
        heapq.heapify(heap)
        while heap and heap[0][0] <= watermark:
            _, _, which = heapq.heappop(heap)
            if which == 0:
                assert caller is not None
                spurt = caller.spurts.popleft()
                self._note_never_quiet(CALLER_TO_AGENT, spurt)
                if spurt.voiced:
                    self.turns.caller_spurt(spurt)
                else:
                    self.caller_noise_events += 1  # a cough or a bang: not speech, not a turn
                if caller.spurts:
                    heapq.heappush(heap, (caller.spurts[0].onset_ns, 1, 0))
            elif which == 1:
                assert agent is not None
                agent_spurt = agent.spurts.popleft()
                self._note_never_quiet(AGENT_TO_CALLER, agent_spurt)
                self.turns.agent_spurt(agent_spurt)
                if agent.spurts:
                    heapq.heappush(heap, (agent.spurts[0].onset_ns, 2, 1))
            else:
                self.turns.flush(self._flush_queue.popleft())
                if self._flush_queue:
                    heapq.heappush(heap, (self._flush_queue[0].t_ns, 0, 2))

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
        self._closed = True
        turns: list[Turn] = []
        if not self.measurement_disabled:
            try:
                self._pump(end_ns)
                for det in self._detectors:
                    if det is not None:
                        det.finish(end_ns)
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
            return self._receipt(end_ns, terminal, close, turns, name)
        except Exception:
            if self.strict:
                raise
            # A bug in building the full receipt must not cost the call its receipt: it
            # gets one without the measurements (counted, and flagged measurement_disabled).
            self.note_measurement_error()
            self.measurement_disabled = True
            self.final_turns = []
            self.tool_events = []
            self.stages = []
            self._truncations = []
            return self._receipt(end_ns, terminal, close, [], name)

    def _note_never_quiet(self, direction: Direction, spurt: Spurt) -> None:
        spans = self._never_quiet[direction]
        if spurt.never_quiet and len(spans) < _MAX_NEVER_QUIET:
            spans.append((spurt.onset_ns, spurt.offset_ns))
        if len(self._spans[direction]) < _MAX_SPANS:
            self._spans[direction].append((spurt.onset_ns, spurt.offset_ns))
            masked = self._masked[direction]
            if spurt.masked_onset_ms:
                masked[spurt.onset_ns] = spurt.masked_onset_ms
            if spurt.masked_offset_ms:
                masked[spurt.offset_ns] = spurt.masked_offset_ms
            ambiguous = self._ambiguous[direction]
            if spurt.ambiguous_onset_ms:
                ambiguous[spurt.onset_ns] = spurt.ambiguous_onset_ms
            if spurt.ambiguous_offset_ms:
                ambiguous[spurt.offset_ns] = spurt.ambiguous_offset_ms

    def _judge_busy(self) -> None:
        """A direction that stays active through most of the other side's speech is not
        a talker taking turns but a bed that never goes quiet (babble, music): its edges
        are not speech edges. Barge-ins cover a small share of the other's speech."""
        caller, agent = self._spans

        def share(over: list[tuple[int, int]], under: list[tuple[int, int]]) -> float:
            total = sum(b - a for a, b in under)
            if total < _BUSY_MIN_NS:
                return 0.0
            # Both lists are in time order (spurts are fed in order): one sweep.
            covered, j = 0, 0
            for a, b in under:
                while j < len(over) and over[j][1] <= a:
                    j += 1
                k = j
                while k < len(over) and over[k][0] < b:
                    covered += min(b, over[k][1]) - max(a, over[k][0])
                    k += 1
            return covered / total

        caller_share = share(caller, agent)
        self._busy[CALLER_TO_AGENT] = caller_share >= _BUSY_SHARE
        self._busy[AGENT_TO_CALLER] = (
            caller_share < _BUSY_SHARE and share(agent, caller) >= _BUSY_SHARE
        )

    def _note_unheard(self, direction: Direction, start_ns: int, end_ns: int) -> None:
        """Audio of ``direction`` over ``[start_ns, end_ns]`` was not analysed."""
        self._note_span(self._unheard[direction], start_ns, end_ns)

    @staticmethod
    def _note_span(spans: list[tuple[int, int]], start_ns: int, end_ns: int) -> None:
        """Add a span in time order (bounded: past _MAX_SPANS the last span grows, which
        only withholds more); one that touches the last one extends it."""
        if spans and (start_ns <= spans[-1][1] + _SPAN_JOIN_NS or len(spans) >= _MAX_SPANS):
            spans[-1] = (spans[-1][0], max(spans[-1][1], end_ns))
        else:
            spans.append((start_ns, end_ns))

    def _shed_between(self, *edges: int | None, after_ns: int = 0) -> bool:
        """Audio of either direction was shed within _SHED_MARGIN_NS of these edges, or
        between them (or up to ``after_ns`` after the last): what the detector missed there
        may have held an edge it never saw, or moved one through the state an edge walk
        reads (the utterance's level, the noise floor, the look-backs)."""
        caller, agent = self._shed
        if not caller and not agent:
            return False
        times = [t for t in edges if t is not None]
        if not times:
            return False
        lo = min(times) - _SHED_MARGIN_NS
        hi = max(times) + _SHED_MARGIN_NS + after_ns
        return any(a <= hi and b >= lo for spans in (caller, agent) for a, b in spans)

    def _unheard_near(self, direction: Direction, t_ns: int | None) -> bool:
        """An edge this close to unanalysed audio may be its border, not speech's: within a
        merge gap the detector cannot tell whether the speech went on."""
        if t_ns is None or not self._unheard[direction]:
            return False
        vad = self.config.vad
        margin = int((vad.merge_gap_ms + vad.frame_ms) * NS_PER_MS)
        return any(a - margin <= t_ns <= b + margin for a, b in self._unheard[direction])

    def _quiet_at(self, direction: Direction, t_ns: int | None) -> bool:
        """The edge at ``t_ns`` is a speech edge: its direction went quiet around its
        speech, and no never-quiet spurt holds it."""
        if t_ns is None:
            return True
        if self._busy[direction]:
            return False
        return not any(a <= t_ns <= b for a, b in self._never_quiet[direction])

    def _lag_ms(self, *edges: int | None) -> float:
        lag_ns = 0
        if self._clock_lag is not None:
            for t in edges:
                if t is not None:
                    lag_ns += self._clock_lag(t - _LAG_BEFORE_NS, t + _LAG_AFTER_NS)
        return lag_ns / NS_PER_MS

    def _masked_ms(self, direction: Direction, t_ns: int | None) -> float:
        """How much of the speech edge at ``t_ns`` noise may have hidden (0 for an edge
        that is no spurt's, a flush's time for one)."""
        return 0.0 if t_ns is None else self._masked[direction].get(t_ns, 0.0)

    def _ambiguous_ms(self, direction: Direction, t_ns: int | None) -> float:
        """How far the speech edge at ``t_ns`` moves with the talker's level read
        EDGE_LEVEL_DB off (0 for a steep edge, a flush's time, or no spurt's)."""
        return 0.0 if t_ns is None else self._ambiguous[direction].get(t_ns, 0.0)

    def _uncertainty_ms(self, caller_edge: int | None, agent_edge: int | None) -> float:
        """The detector's own uncertainty, plus the clock lag near each edge, plus what
        noise may hide of each, plus how far each moves with the level read off."""
        masked = self._masked_ms(CALLER_TO_AGENT, caller_edge)
        masked += self._masked_ms(AGENT_TO_CALLER, agent_edge)
        ambiguous = self._ambiguous_ms(CALLER_TO_AGENT, caller_edge)
        ambiguous += self._ambiguous_ms(AGENT_TO_CALLER, agent_edge)
        lag = self._lag_ms(caller_edge, agent_edge)
        return round(DETECTOR_UNCERTAINTY_MS + lag + masked + ambiguous, 1)

    def _withheld(self, caller_edge: int | None, agent_edge: int | None) -> str | None:
        """Why a figure between these edges cannot be published, or None."""
        if not self._quiet_at(CALLER_TO_AGENT, caller_edge):
            return "caller_never_quiet"
        if not self._quiet_at(AGENT_TO_CALLER, agent_edge):
            return "agent_never_quiet"
        if self._shed_between(caller_edge, agent_edge):
            return "measurement_shed"
        if self._unheard_near(CALLER_TO_AGENT, caller_edge):
            return "caller_unanalysed"
        if self._unheard_near(AGENT_TO_CALLER, agent_edge):
            return "agent_unanalysed"
        if self._uncertainty_ms(caller_edge, agent_edge) > self.config.max_uncertainty_ms:
            # The largest share names the reason.
            shares = {
                "caller_noise": self._masked_ms(CALLER_TO_AGENT, caller_edge),
                "agent_noise": self._masked_ms(AGENT_TO_CALLER, agent_edge),
                "caller_edge_ambiguous": self._ambiguous_ms(CALLER_TO_AGENT, caller_edge),
                "agent_edge_ambiguous": self._ambiguous_ms(AGENT_TO_CALLER, agent_edge),
            }
            worst = max(shares, key=lambda k: shares[k])
            if shares[worst] < self._lag_ms(caller_edge, agent_edge):
                return "clock_lag"
            return worst
        return None

    def _receipt(
        self, end_ns: int, terminal: Terminal, close: CloseInfo, turns: list[Turn], dialect: str
    ) -> Receipt:
        cfg = self.config
        start = self.start_ns
        window = cfg.turns.barge_in_window_ms

        def rel(ns: int | None) -> float | None:
            return None if ns is None else _ms(ns - start)

        self._judge_busy()

        def quiet(direction: Direction, ns: int | None) -> int | None:
            heard = self._quiet_at(direction, ns) and not self._unheard_near(direction, ns)
            return ns if heard and not self._shed_between(ns) else None

        barge_onsets = [t.barge_in.onset_ns for t in turns if t.barge_in is not None]
        # (No tool events, nothing to derive: the common case, and the fallback receipt's.)
        effects = derive(self.tool_events, barge_onsets) if self.tool_events else EffectSummary()
        starts = [(t.caller_onset_ns or t.agent_onset_ns or 0, t.index) for t in turns]

        def turn_of(t_ns: int) -> int | None:
            found = None
            for begin, index in starts:
                if begin <= t_ns:
                    found = index
            return found

        tool_turns = [turn_of(c.started_ns) for c in effects.calls]
        records: list[TurnRecord] = []
        for t in turns:
            barge = None
            if t.barge_in is not None:
                b = t.barge_in
                outcome, latency = barge_outcome(b, window)
                evidence = b.evidence()
                stop_ns: int | None = b.stop_ns()
                why = self._withheld(b.onset_ns, stop_ns)
                if why is None and self._shed_between(
                    b.onset_ns, stop_ns, after_ns=int(window * NS_PER_MS)
                ):
                    why = "measurement_shed"  # the stop may lie in what was shed
                barge = BargeInRecord(
                    onset_ms=rel(b.onset_ns) or 0.0,
                    stop_ms=None if why else rel(stop_ns),
                    stop_latency_ms=None if why else _ms(latency),
                    stop_uncertainty_ms=self._uncertainty_ms(b.onset_ns, stop_ns),
                    outcome="unknown" if why else outcome.value,
                    evidence=evidence.value,
                    ambiguous=evidence.value == "ceased",
                    in_pause=b.in_pause,
                    reason=why,
                )
            ttfs_ns, talk_over_ns, reason = t.ttfs_ns, t.talk_over_ns, t.reason
            ttfs_unc = None
            if ttfs_ns is not None:
                ttfs_unc = self._uncertainty_ms(t.caller_offset_ns, t.agent_onset_ns)
                why = self._withheld(t.caller_offset_ns, t.agent_onset_ns)
                if why is None and self._shed_between(t.caller_onset_ns, t.agent_onset_ns):
                    why = "measurement_shed"  # the turn's caller spurts may be grouped anew
                if why is not None:
                    ttfs_ns, talk_over_ns, reason = None, None, why
            elif reason in ("no_response", "call_ended") and self._shed_between(
                t.caller_onset_ns,
                t.caller_offset_ns,
                after_ns=int(cfg.turns.response_timeout_ms * NS_PER_MS),
            ):
                reason = "measurement_shed"  # the answer may have come in what was shed
            reprompt_ns = t.reprompt_ns
            if t.kind is TurnKind.AGENT_INITIATED and not self._quiet_at(
                CALLER_TO_AGENT, t.agent_onset_ns
            ):
                # "No caller speech since" cannot be told when the caller never went quiet.
                reprompt_ns, reason = None, "caller_never_quiet"
            elif (
                reprompt_ns is not None
                and t.agent_onset_ns is not None
                and self._shed_between(t.agent_onset_ns - reprompt_ns, t.agent_onset_ns)
            ):
                reprompt_ns, reason = None, "measurement_shed"  # the caller may have spoken
            records.append(
                TurnRecord(
                    index=t.index,
                    kind=t.kind.value,
                    # An edge in a direction that never went quiet is no speech edge.
                    caller_onset_ms=rel(quiet(CALLER_TO_AGENT, t.caller_onset_ns)),
                    caller_offset_ms=rel(quiet(CALLER_TO_AGENT, t.caller_offset_ns)),
                    agent_onset_ms=rel(quiet(AGENT_TO_CALLER, t.agent_onset_ns)),
                    agent_offset_ms=rel(quiet(AGENT_TO_CALLER, t.agent_offset_ns)),
                    ttfs_ms=_ms(ttfs_ns),
                    ttfs_uncertainty_ms=ttfs_unc,
                    reason=reason,
                    talk_over_ms=_ms(talk_over_ns),
                    reprompt_ms=_ms(reprompt_ns),
                    barge_in=barge,
                    flushes=len(t.flushes),
                    yielded_without_caller_speech=t.yielded_without_caller_speech,
                    stages=self._turn_stages(t, rel),
                    tool_calls=sum(1 for i in tool_turns if i == t.index),
                )
            )
        ttfs = [r.ttfs_ms for r in records if r.ttfs_ms is not None]
        barges = [r.barge_in for r in records if r.barge_in is not None]
        stops = [b.stop_latency_ms for b in barges if b.stop_latency_ms is not None]
        chunks = sorted(self._caller_chunk_ns)
        errs = self._mark_errors
        playout = self._playout
        return Receipt(
            call=self.wire_call_id_hash or keyed_hash(self._secret, self._link_id, "c_"),
            call_id_source="wire" if self.wire_call_id_hash else "proxy",
            dialect=dialect,
            transport=cfg.transport,  # type: ignore[arg-type]
            started_at=self._anchor.iso_at(start),
            duration_ms=_ms(end_ns - start) or 0.0,
            terminal=terminal,
            close=close,
            upstream_connect_ms=rel(self.upstream_connected_ns),
            settings=Settings(
                caller_frame_ms=_ms(chunks[len(chunks) // 2]) if chunks else None,
                vad_frame_ms=cfg.vad.frame_ms,
                vad_mode=cfg.vad.mode,
                merge_gap_ms=cfg.vad.merge_gap_ms,
                min_speech_ms=cfg.vad.min_speech_ms,
                response_timeout_ms=cfg.turns.response_timeout_ms,
                barge_in_window_ms=cfg.turns.barge_in_window_ms,
                agent_turn_gap_ms=cfg.turns.agent_turn_gap_ms,
                downstream_offset_ms=cfg.downstream_offset_ms,
            ),
            summary=Summary(
                turns=len(records),
                responses=sum(1 for r in records if r.kind == "response" and r.ttfs_ms is not None),
                no_responses=sum(1 for r in records if r.kind == "no_response"),
                ttfs_ms_median=round(statistics.median(ttfs), 1) if ttfs else None,
                ttfs_ms_max=max(ttfs) if ttfs else None,
                barge_ins=len(barges),
                barge_ins_stopped=sum(1 for b in barges if b.outcome == "stopped"),
                stop_latency_ms_max=max(stops) if stops else None,
                flushes=self._flush_count,
                yielded_without_caller_speech=self.turns.yielded_without_caller_speech,
                caller_noise_events=self.caller_noise_events,
            ),
            turns=records,
            marks=MarkCheck(
                checked=len(errs),
                cleared=self._marks_cleared,
                mean_error_ms=_ms(int(statistics.fmean(errs))) if errs else None,
                max_abs_error_ms=_ms(max(abs(e) for e in errs)) if errs else None,
            ),
            traffic=Traffic(
                caller_to_agent_messages=self._messages[0],
                agent_to_caller_messages=self._messages[1],
                caller_to_agent_bytes=self._bytes[0],
                agent_to_caller_bytes=self._bytes[1],
                caller_audio_ms=_ms(self._audio_ns[0]) or 0.0,
                agent_audio_ms=_ms(self._audio_ns[1]) or 0.0,
                agent_audio_dropped_ms=_ms(playout.dropped_ns if playout else 0) or 0.0,
                caller_audio_unanalysed_ms=_ms(self._caller_unanalysed_ns) or 0.0,
                agent_audio_unanalysed_ms=_ms(self._agent_unanalysed_ns) or 0.0,
            ),
            anomalies=dict(sorted(self._anomalies_with_wire().items())),
            wire_looks_like=self.wire_looks_like(),
            measurement_disabled=self.measurement_disabled,
            events=[_event_record(e, rel) for e in sorted(self.tool_events, key=lambda e: e.t_ns)],
            tools=[
                ToolCallRecord(
                    operation_id=c.operation_id,
                    tool=c.tool,
                    attempt=c.attempt,
                    turn=turn_index,
                    started_ms=rel(c.started_ns) or 0.0,
                    finished_ms=rel(c.finished_ns),
                    latency_ms=_ms(c.latency_ns),
                    status=c.status,
                    cancelled=c.cancelled_ns is not None,
                    idempotent=c.idempotency_key is not None,
                    stale_write=c.stale_write,
                    stale_cause=c.stale_cause,  # type: ignore[arg-type]
                    unsafe_retry=c.unsafe_retry,
                    source=c.source,  # type: ignore[arg-type]
                    response_cancelled_in_flight=c.response_cancelled_ns is not None,
                )
                for c, turn_index in zip(effects.calls, tool_turns, strict=True)
            ],
            effects=Effects(
                tool_calls=len(effects.calls),
                unfinished=effects.unfinished,
                stale_writes=effects.stale_writes,
                unsafe_retries=effects.unsafe_retries,
                confirmations=effects.confirmations,
                confirmations_before_finish=effects.confirmations_before_finish,
                confirmation_mismatches=effects.confirmation_mismatches,
                backend_verified=effects.backend_verified,
                outcome_verified=effects.outcome_verified,
                responses_cancelled_with_tool_in_flight=(
                    effects.responses_cancelled_with_tool_in_flight
                ),
            )
            if self.tool_events
            else None,
            truncations=[
                TruncationRecord(
                    t_ms=rel(t_ns) or 0.0,
                    turn=turn_of(t_ns),
                    claimed_played_ms=claimed,
                    modelled_played_ms=_ms(modelled),
                    diff_ms=None if modelled is None else round(claimed - modelled / NS_PER_MS, 1),
                )
                for t_ns, claimed, modelled in self._truncations
            ],
        )

    def _turn_stages(self, t: Turn, rel: Callable[[int | None], float | None]) -> TurnStages | None:
        """The wire's stage marks that fall between this turn's caller speech and its answer.

        The chain stages of a realtime server (``server_speech_stopped`` ->
        ``response_created`` -> ``first_audio_delta``, plus ``server_speech_started``
        before and ``response_done`` after) are taken in their order, so that a
        previous response's late marks (a ``response_done`` after a barge-in, say)
        are not taken for this turn's; any other stage name keeps the plain rule:
        the first mark inside the turn's window.
        """
        if not self.stages or t.caller_offset_ns is None:
            return None
        offset = t.caller_offset_ns
        lo = offset - STAGE_LOOKBACK_NS
        hi = (t.agent_onset_ns if t.agent_onset_ns is not None else offset) + STAGE_LOOKAHEAD_NS
        timed = [(m.at_ns if m.at_ns is not None else m.t_ns, m) for m in self.stages]

        def first(name: str, a: int, b: int) -> tuple[int, StageMark] | None:
            return next(((at, m) for at, m in timed if m.name == name and a <= at <= b), None)

        def last(name: str, a: int, b: int) -> tuple[int, StageMark] | None:
            found = None
            for at, m in timed:
                if m.name == name and a <= at <= b:
                    found = (at, m)
            return found

        chosen: dict[str, tuple[int, StageMark]] = {}
        for at, m in timed:
            if m.name not in _CHAIN_STAGES and m.name not in chosen and lo <= at <= hi:
                chosen[m.name] = (at, m)
        # The server's end of this speech lies after its onset (a short utterance soon
        # after the previous one must not take that one's end).
        stop_lo = lo if t.caller_onset_ns is None else max(lo, t.caller_onset_ns)
        stop = first("server_speech_stopped", stop_lo, hi)
        floor = lo if stop is None else stop[0]
        delta = first("first_audio_delta", floor, hi)
        created = (
            last("response_created", floor, delta[0])
            if delta is not None
            else first("response_created", floor, hi)
        )
        onset_lo = (t.caller_onset_ns if t.caller_onset_ns is not None else offset) - (
            STAGE_LOOKBACK_NS
        )
        started = (
            last("server_speech_started", onset_lo, stop[0])
            if stop is not None
            else first("server_speech_started", onset_lo, offset)
        )
        after = created or delta
        done = None
        if after is not None:
            # A response is done before the next one is created (one active at a time).
            following = first("response_created", after[0] + 1, 1 << 62)
            done = first("response_done", after[0], following[0] if following else 1 << 62)
        for name, found in (
            ("server_speech_started", started),
            ("server_speech_stopped", stop),
            ("response_created", created),
            ("first_audio_delta", delta),
            ("response_done", done),
        ):
            if found is not None:
                chosen[name] = found
        if not chosen:
            return None
        marks: dict[str, float] = {}
        details: dict[str, str] = {}
        for name, (at, m) in sorted(chosen.items(), key=lambda kv: kv[1][0]):
            value = rel(at)
            if value is not None:
                marks[name] = value
            if m.detail is not None:
                details[name] = m.detail
        breakdown: dict[str, float] = {}
        previous = offset
        chain = [(n, chosen[n][0]) for n in _CHAIN_STAGES[1:4] if n in chosen]
        if t.agent_onset_ns is not None:
            chain.append(("audible", t.agent_onset_ns))
        if len(chain) > 1 or (chain and chain[0][0] != "audible"):
            for name, at in chain:
                breakdown[name] = _ms(at - previous) or 0.0
                previous = at
        diff = None if stop is None else _ms(stop[0] - offset)
        return TurnStages(
            marks=marks, server_vad_offset_diff_ms=diff, details=details, breakdown_ms=breakdown
        )
