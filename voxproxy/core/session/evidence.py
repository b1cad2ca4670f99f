"""What a figure's edges rest on: when the session must withhold it, and how uncertain it is.

:class:`Evidence` keeps, per direction, the spans the detectors reported (every spurt's,
the never-quiet ones', the unheard and the shed audio's) and how much noise or a level
read off may move each edge. At the receipt it answers, for the edges of a figure,
whether they are speech edges one can publish (:meth:`Evidence.withheld`) and the
figure's uncertainty (:meth:`Evidence.uncertainty_ms`). Sans-I/O, like the session.
"""

from __future__ import annotations

from collections.abc import Callable

from voxproxy.core.analysis.vad import Spurt, VadConfig
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Direction
from voxproxy.core.timebase import NS_PER_MS

_MAX_NEVER_QUIET = 256  # never-quiet spans kept per direction
_MAX_SPANS = 4096  # spurt spans kept per direction
_BUSY_SHARE = 0.5  # active through this share of the other side's speech: never quiet
_BUSY_MIN_NS = 500 * NS_PER_MS  # ... judged once the other side spoke this long
# What an edge leaves unknown once its band is stated (how far it moves with the level read
# off, an onset also with the windows' grid: edges.py): the 1 ms windows, the smoothing,
# the scripted 0-2 ms jitter of a chunk's arrival. A figure (two edges) states
# FIGURE_BASE_MS. A figure's error less its bands over the offline test space
# (test_call.py's calls, test_call_space.py's seeds 5 and 77, its G.711 and flush sweeps:
# 2,308 figures; docs/performance.md): p99.5 2.9 ms, at most 3.8 ms but for one flush stop.
EDGE_BASE_MS = 2.0
FIGURE_BASE_MS = 2 * EDGE_BASE_MS
# A figure with an edge read over a bed of noise (a masked band: the audible walk,
# analysis/audible.py) keeps the flat base every figure stated before: there the heard
# truth's own per-window comparison with the bed spreads with the bed's realisation, and
# a final burst the truth joins may go unread, which the clean space's 2 ms an edge does
# not measure. Live, white noise 10 dB under the caller, 4-6 of the snr10 class's 17
# published figures lay 1-5 ms outside with 2 or 5 ms an edge, 1 with 10 ms a figure
# (docs/performance.md, "A base of 2 ms an edge").
NOISY_FIGURE_BASE_MS = 10.0
# Arrival stamps around an edge that may place it. A caller's chunk is heard up to its
# arrival (session.intake): the stamp that places a caller edge comes after it, by up to
# a chunk. An agent's chunk plays from its arrival or from the end of the audio before it
# (MEASUREMENT.md 3): the stamps that place an agent edge come at or before it, and a
# later one cannot move it, however late (a bursting agent's burst, read in one go while
# the loop ran late, stated that lateness on the answer's onset ahead of it).
_LAG_BEFORE_NS = 100 * NS_PER_MS
_LAG_AFTER_NS = 350 * NS_PER_MS
_AGENT_LAG_AFTER_NS = NS_PER_MS
# Shed audio this close to an edge withholds its figure: the noise floor's window (2 s)
# covers the utterance gap (1 s) and the onset walks' two look-backs (640 ms).
_SHED_MARGIN_NS = 2_000 * NS_PER_MS
_SPAN_JOIN_NS = 100 * NS_PER_MS  # unanalysed spans this close are kept as one

Spans = list[tuple[int, int]]


class Evidence:
    """The spans behind one call's speech edges, per direction, and the rules that
    withhold a figure.

    ``clock_lag(start_ns, end_ns)``: the most a clock reading the shell took in that
    interval can be late, or ``None`` when not measured. ``downstream(t_ns)``: how much
    later than the playout timeline (declared offset included) the caller may have heard
    the agent's audio at ``t_ns``, in ms, from what the shell could observe of the way to
    the caller (WebRTC: the caller's own jitter reports, the relay's late packets), or
    ``None`` where nothing of it is observed."""

    def __init__(
        self,
        vad: VadConfig,
        max_uncertainty_ms: float,
        clock_lag: Callable[[int, int], int] | None = None,
        downstream: Callable[[int], float] | None = None,
    ) -> None:
        self._vad = vad
        self._max_uncertainty_ms = max_uncertainty_ms
        self._clock_lag = clock_lag
        self._downstream = downstream
        # Spans of spurts so long that their direction was never quiet, per direction, and
        # every spurt's span (for how much each direction talked over the other).
        self._never_quiet: tuple[Spans, Spans] = ([], [])
        self._spans: tuple[Spans, Spans] = ([], [])
        # Per direction, how much of each spurt edge (by its time) noise may have hidden.
        self._masked: tuple[dict[int, float], dict[int, float]] = ({}, {})
        # ... and how far each moves with the talker's level read EDGE_LEVEL_DB off.
        self._ambiguous: tuple[dict[int, float], dict[int, float]] = ({}, {})
        # ... and which of them were read over a steady bed (their band bounds the truth).
        self._steady: tuple[set[int], set[int]] = (set(), set())
        self._busy: list[bool] = [False, False]  # a direction active under the other's speech
        # Spans of each direction the detector did not hear although audio was there (audio
        # too far ahead of real time): an edge near one is not a speech edge one can trust.
        self._unheard: tuple[Spans, Spans] = ([], [])
        # Spans of each direction's audio that measurement shed under load (not analysed:
        # the shell's measurement fell behind its forwarding); figures near one are withheld.
        self._shed: tuple[Spans, Spans] = ([], [])
        # Spans where a bed stood so near the talker's level that they could speak unheard.
        self._masked_spans: tuple[Spans, Spans] = ([], [])

    # -- as the call goes ------------------------------------------------------------------

    def note_spurt(self, direction: Direction, spurt: Spurt) -> None:
        """A spurt of ``direction``, as it is fed to the turn machine (in time order)."""
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
            steady = self._steady[direction]
            if spurt.steady_onset:
                steady.add(spurt.onset_ns)
            if spurt.steady_offset:
                steady.add(spurt.offset_ns)

    def note_unheard(self, direction: Direction, start_ns: int, end_ns: int) -> None:
        """Audio of ``direction`` over ``[start_ns, end_ns]`` was not analysed."""
        _note_span(self._unheard[direction], start_ns, end_ns)

    def note_shed(self, direction: Direction, start_ns: int, end_ns: int) -> None:
        """Audio of ``direction`` over ``[start_ns, end_ns]`` was shed (not analysed)."""
        _note_span(self._shed[direction], start_ns, end_ns)

    def note_masked(self, direction: Direction, spans: Spans) -> None:
        """The spans of ``direction`` where its detector heard a bed a talker could speak
        under unheard (``SpeechDetector.masked_spans``), as the call closes."""
        self._masked_spans[direction].extend(spans)

    # -- at the receipt --------------------------------------------------------------------

    def masked_at(self, direction: Direction, t_ns: int | None) -> bool:
        """At ``t_ns`` (give or take a merge gap) ``direction`` carried a bed a talker could
        have spoken under unheard: no speech there is no evidence of silence."""
        if t_ns is None:
            return False
        margin = int(self._vad.merge_gap_ms * NS_PER_MS)
        return any(a - margin <= t_ns <= b + margin for a, b in self._masked_spans[direction])

    def masked_share(self, direction: Direction, start_ns: int | None, end_ns: int | None) -> float:
        """The share of ``[start_ns, end_ns]`` that ``direction`` carried a bed a talker
        could have spoken under unheard (0 for no span or none given)."""
        if start_ns is None or end_ns is None or end_ns <= start_ns:
            return 0.0
        covered = 0
        for a, b in self._masked_spans[direction]:
            lo, hi = max(a, start_ns), min(b, end_ns)
            if hi > lo:
                covered += hi - lo
        return min(covered / (end_ns - start_ns), 1.0)

    def judge_busy(self) -> None:
        """A direction that stays active through most of the other side's speech is not
        a talker taking turns but a bed that never goes quiet (babble, music): its edges
        are not speech edges. Barge-ins cover a small share of the other's speech."""
        caller, agent = self._spans

        def share(over: Spans, under: Spans) -> float:
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

    def shed_between(self, *edges: int | None, after_ns: int = 0) -> bool:
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

    def unheard_near(self, direction: Direction, t_ns: int | None) -> bool:
        """An edge this close to unanalysed audio may be its border, not speech's: within a
        merge gap the detector cannot tell whether the speech went on."""
        if t_ns is None or not self._unheard[direction]:
            return False
        vad = self._vad
        margin = int((vad.merge_gap_ms + vad.frame_ms) * NS_PER_MS)
        return any(a - margin <= t_ns <= b + margin for a, b in self._unheard[direction])

    def quiet_at(self, direction: Direction, t_ns: int | None) -> bool:
        """The edge at ``t_ns`` is a speech edge: its direction went quiet around its
        speech, and no never-quiet spurt holds it."""
        if t_ns is None:
            return True
        if self._busy[direction]:
            return False
        return not any(a <= t_ns <= b for a, b in self._never_quiet[direction])

    def lag_ms(self, caller_edge: int | None, agent_edge: int | None) -> float:
        """How late the arrival stamps that may place either edge may be (ms)."""
        lag_ns = 0
        if self._clock_lag is not None:
            if caller_edge is not None:
                t = caller_edge
                lag_ns += self._clock_lag(t - _LAG_BEFORE_NS, t + _LAG_AFTER_NS)
            if agent_edge is not None:
                t = agent_edge
                lag_ns += self._clock_lag(t - _LAG_BEFORE_NS, t + _AGENT_LAG_AFTER_NS)
        return lag_ns / NS_PER_MS

    def downstream_ms(self, agent_edge: int | None) -> float:
        """How much later than its place on the playout timeline the caller may have
        heard the agent's edge at ``agent_edge`` (the listener's jitter buffer)."""
        if agent_edge is None or self._downstream is None:
            return 0.0
        return self._downstream(agent_edge)

    def masked_ms(self, direction: Direction, t_ns: int | None) -> float:
        """How much of the speech edge at ``t_ns`` noise may have hidden (0 for an edge
        that is no spurt's, a flush's time for one)."""
        return 0.0 if t_ns is None else self._masked[direction].get(t_ns, 0.0)

    def ambiguous_ms(self, direction: Direction, t_ns: int | None) -> float:
        """How far the speech edge at ``t_ns`` moves with the talker's level read
        EDGE_LEVEL_DB off (0 for a steep edge, a flush's time, or no spurt's)."""
        return 0.0 if t_ns is None else self._ambiguous[direction].get(t_ns, 0.0)

    def uncertainty_ms(self, caller_edge: int | None, agent_edge: int | None) -> float:
        """The base of two edges (:meth:`base_ms`), plus the clock lag near each edge, plus what
        noise may hide of each, plus how far each moves with the level read off, plus
        how much later the caller may have heard the agent's edge (downstream jitter)."""
        masked = self.masked_ms(CALLER_TO_AGENT, caller_edge)
        masked += self.masked_ms(AGENT_TO_CALLER, agent_edge)
        ambiguous = self.ambiguous_ms(CALLER_TO_AGENT, caller_edge)
        ambiguous += self.ambiguous_ms(AGENT_TO_CALLER, agent_edge)
        lag = self.lag_ms(caller_edge, agent_edge)
        downstream = self.downstream_ms(agent_edge)
        base = self.base_ms(caller_edge, agent_edge)
        return round(base + lag + masked + ambiguous + downstream, 1)

    def base_ms(self, caller_edge: int | None, agent_edge: int | None) -> float:
        """What the two edges leave unknown once their bands are stated: FIGURE_BASE_MS,
        or NOISY_FIGURE_BASE_MS where either was read over a bed of noise."""
        edges = ((CALLER_TO_AGENT, caller_edge), (AGENT_TO_CALLER, agent_edge))
        noisy = any(self.masked_ms(d, t) > 0.0 for d, t in edges)
        return NOISY_FIGURE_BASE_MS if noisy else FIGURE_BASE_MS

    def withheld(self, caller_edge: int | None, agent_edge: int | None) -> str | None:
        """Why a figure between these edges cannot be published, or None."""
        if not self.quiet_at(CALLER_TO_AGENT, caller_edge):
            return "caller_never_quiet"
        if not self.quiet_at(AGENT_TO_CALLER, agent_edge):
            return "agent_never_quiet"
        if self.shed_between(caller_edge, agent_edge):
            return "measurement_shed"
        if self.unheard_near(CALLER_TO_AGENT, caller_edge):
            return "caller_unanalysed"
        if self.unheard_near(AGENT_TO_CALLER, agent_edge):
            return "agent_unanalysed"
        if self.uncertainty_ms(caller_edge, agent_edge) > self._max_uncertainty_ms:
            # The largest share names the reason.
            shares = {
                "caller_noise": self.masked_ms(CALLER_TO_AGENT, caller_edge),
                "agent_noise": self.masked_ms(AGENT_TO_CALLER, agent_edge),
                "caller_edge_ambiguous": self.ambiguous_ms(CALLER_TO_AGENT, caller_edge),
                "agent_edge_ambiguous": self.ambiguous_ms(AGENT_TO_CALLER, agent_edge),
                "downstream_jitter": self.downstream_ms(agent_edge),
            }
            worst = max(shares, key=lambda k: shares[k])
            if shares[worst] < self.lag_ms(caller_edge, agent_edge):
                return "clock_lag"
            return worst
        return None

    def bounds(self, caller_edge: int | None, agent_edge: int | None) -> bool:
        """Whether a figure between these edges, withheld, still lies within their gap
        less and plus :meth:`uncertainty_ms`: withheld only as too uncertain (where the
        truth's level puts an edge, the clock's lag, the listener's jitter buffer), or for
        noise where each edge noise may hide was read over a steady bed. Not for a shed,
        an unheard or a never-quiet stretch (the edges themselves are in doubt), nor for
        noise that swells (its band is no bound: an offset walked hundreds of ms on)."""
        why = self.withheld(caller_edge, agent_edge)
        if why in _BOUNDING_REASONS:
            return True
        if why not in ("caller_noise", "agent_noise") or caller_edge is None or agent_edge is None:
            return False
        edges = ((CALLER_TO_AGENT, caller_edge), (AGENT_TO_CALLER, agent_edge))
        return all(t in self._steady[d] for d, t in edges if self.masked_ms(d, t) > 0.0)


_BOUNDING_REASONS = frozenset(
    {"caller_edge_ambiguous", "agent_edge_ambiguous", "clock_lag", "downstream_jitter"}
)


def _note_span(spans: Spans, start_ns: int, end_ns: int) -> None:
    """Add a span in time order (bounded: past _MAX_SPANS the last span grows, which
    only withholds more); one that touches the last one extends it."""
    if spans and (start_ns <= spans[-1][1] + _SPAN_JOIN_NS or len(spans) >= _MAX_SPANS):
        spans[-1] = (spans[-1][0], max(spans[-1][1], end_ns))
    else:
        spans.append((start_ns, end_ns))
