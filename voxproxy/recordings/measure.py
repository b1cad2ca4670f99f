"""A recording through the measurement core: samples in, the receipt out. Pure.

Each channel is cut into chunks of ``chunk_ms`` and handed to
:meth:`~voxproxy.core.session.CallSession.on_audio` in time order, with times taken from
sample positions (the core reads no clock): a caller chunk covering samples
``[i, j)`` arrives at the time of sample ``j`` (it covers ``[t - d, t]``, as a caller's
frame does on any wire, MEASUREMENT.md 1); an agent chunk is audible from the time of
its first sample (the session's ``agent_playout="arrival"``: the recording is what the
caller heard, when it heard it, so there is no playout model). The call starts at the
recording's first sample; a recording starts with the call connected, so the receipt's
``upstream_connect_ms`` is 0 and its terminal ``completed``.

Before that, the agent's audio leaking into the caller's channel is looked for and
removed (:mod:`voxproxy.recordings.echo`); where it cannot be removed well enough, the
figures it could move are withheld with the reason ``caller_echo``.
"""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, replace

from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Audio, Direction, Event
from voxproxy.core.receipt import (
    CloseInfo,
    EchoRecord,
    Receipt,
    RecordingInfo,
    TurnRecord,
)
from voxproxy.core.session import CallSession, SessionConfig
from voxproxy.core.timebase import NS_PER_MS, EpochAnchor
from voxproxy.recordings.echo import (
    EchoResult,
    caller_threshold_dbfs,
    find_and_remove,
    leak_left_dbfs,
)
from voxproxy.recordings.files import Channel, Recording

DEFAULT_CHUNK_MS = 20
ECHO_REASON = "caller_echo"
ECHO_MARGIN_DB = 6.0  # the leak left this close under an edge threshold may still move it
# An edge of the caller this close after agent audio may be the leak's (its lag, and the
# tail of the echo path after it).
_ECHO_TAIL_NS = 300 * NS_PER_MS


class RecordingDecoder:
    """The session's decoder for a recording: no wire messages, only the codec each
    channel was stored in (the speech detector's quantization band for G.711)."""

    name = "recording"

    def __init__(self, caller_codec: str, agent_codec: str) -> None:
        self._codecs = (caller_codec, agent_codec)

    def decode(self, direction: Direction, payload: bytes | str, t_ns: int) -> list[Event]:
        del direction, payload, t_ns
        return []

    def codec(self, direction: Direction) -> str:
        return self._codecs[direction]


@dataclass(frozen=True, slots=True)
class Measured:
    """A recording's receipt (not yet judged) and what was found of its echo."""

    receipt: Receipt
    echo: EchoResult


def _chunks(
    ch: Channel, direction: Direction, chunk_ms: int
) -> Iterator[tuple[int, int, int, int]]:
    """``(t_ns, direction, first sample, end sample)`` of each chunk, in time order."""
    rate = ch.sample_rate_hz
    step = max(1, rate * chunk_ms // 1000)
    n = ch.pcm.size
    for i in range(0, n, step):
        j = min(n, i + step)
        edge = j if direction is CALLER_TO_AGENT else i
        yield ch.start_ns + edge * 1_000_000_000 // rate, int(direction), i, j


def measure(
    rec: Recording,
    *,
    secret: bytes,
    config: SessionConfig | None = None,
    started_wall_ns: int = 0,
    chunk_ms: int = DEFAULT_CHUNK_MS,
    echo: bool = True,
) -> Measured:
    """The receipt of one recording (``source: recording``, ``vantage: listener``)."""
    cfg = replace(config or SessionConfig(), transport="offline", agent_playout="arrival")
    found = find_and_remove(rec.caller, rec.agent) if echo else EchoResult.none()
    caller = found.caller if found.caller is not None else rec.caller
    session = _session(rec, secret, cfg, started_wall_ns)
    _feed(session, caller, rec.agent, chunk_ms, [])
    end_ns = rec.duration_ns
    receipt = session.close(end_ns, "completed", CloseInfo(initiator="none"))
    cuts = _cuts(receipt)
    if cuts:
        # A second pass that knows where barge-ins cut the agent's answers short: their
        # level is read from what was heard of them, and their edges' band says so.
        session = _session(rec, secret, cfg, started_wall_ns)
        _feed(session, caller, rec.agent, chunk_ms, cuts)
        receipt = session.close(end_ns, "completed", CloseInfo(initiator="none"))
    if found.caller is not None:
        receipt, withheld = withhold_echo(receipt, found, caller, rec.agent)
        if withheld:
            found = replace(found, action="withheld")
    info = RecordingInfo(
        container=rec.container,  # type: ignore[arg-type]
        encoding=rec.caller.encoding,
        sample_rate_hz=rec.caller.sample_rate_hz,
        layout=rec.layout,  # type: ignore[arg-type]
        offset_ms=round(rec.offset_ms, 3),
        echo=found.record(),
    )
    receipt = receipt.model_copy(
        update={
            "call_id_source": "file",
            "source": "recording",
            "vantage": "listener",
            "recording": info,
        }
    )
    return Measured(receipt, found)


def _session(rec: Recording, secret: bytes, cfg: SessionConfig, wall_ns: int) -> CallSession:
    session = CallSession(
        RecordingDecoder(rec.caller.encoding, rec.agent.encoding),
        0,
        secret=secret,
        link_id=rec.name,
        config=cfg,
        anchor=EpochAnchor(mono_ns=0, wall_ns=wall_ns),
    )
    session.on_upstream_connected(0)
    return session


def _feed(
    session: CallSession, caller: Channel, agent: Channel, chunk_ms: int, cuts: list[int]
) -> None:
    """Both channels to the session in time order; ``session.note_cut(t)`` once the
    agent's audio has reached each time in ``cuts`` (sorted)."""
    channels = (caller, agent)
    streams = [
        _chunks(caller, CALLER_TO_AGENT, chunk_ms),
        _chunks(agent, AGENT_TO_CALLER, chunk_ms),
    ]
    feed = session.on_audio
    pending = list(reversed(cuts))
    for t_ns, d, i, j in heapq.merge(*streams):
        while pending and d == AGENT_TO_CALLER and t_ns >= pending[-1]:
            session.note_cut(pending.pop())
        ch = channels[d]
        feed(Audio(Direction(d), ch.pcm[i:j], ch.sample_rate_hz, t_ns))


def _cuts(receipt: Receipt) -> list[int]:
    """Where the agent's audio ceased after a barge-in (ns): its answer was cut there. A
    stop withheld still ended the talked-over answer where its speech ended."""
    out = []
    previous = None
    for t in receipt.turns:
        b = t.barge_in
        if b is not None and b.evidence == "ceased" and b.outcome != "not_stopped":
            end = b.stop_ms
            if end is None and previous is not None:
                end = previous.agent_offset_ms
            if end is not None:
                out.append(round(end * NS_PER_MS))
        previous = t
    return sorted(out)


def withhold_echo(
    receipt: Receipt, found: EchoResult, caller: Channel, agent: Channel
) -> tuple[Receipt, int]:
    """``receipt`` with every figure withheld (``caller_echo``) whose caller edge lies under
    agent audio (or within the leak's lag and tail after it) where the leak left after
    removal stands within :data:`ECHO_MARGIN_DB` of that utterance's edge threshold; and
    how many were withheld."""
    tail = (found.lag_ms or 0.0) + _ECHO_TAIL_NS / NS_PER_MS
    spans = [
        (t.agent_onset_ms, t.agent_offset_ms + tail)
        for t in receipt.turns
        if t.agent_onset_ms is not None and t.agent_offset_ms is not None
    ]

    def moved(edge_ms: float | None, onset_ms: float | None, offset_ms: float | None) -> bool:
        if edge_ms is None or not any(a <= edge_ms <= b for a, b in spans):
            return False
        t_ns = round(edge_ms * NS_PER_MS)
        left = leak_left_dbfs(found, agent, t_ns, caller)
        if onset_ms is None or offset_ms is None or left is None:
            return left is not None
        threshold = caller_threshold_dbfs(
            caller, round(onset_ms * NS_PER_MS), round(offset_ms * NS_PER_MS)
        )
        return threshold is None or left > threshold - ECHO_MARGIN_DB

    turns: list[TurnRecord] = []
    withheld = 0
    for t in receipt.turns:
        update: dict[str, object] = {}
        if t.ttfs_ms is not None and moved(
            t.caller_offset_ms, t.caller_onset_ms, t.caller_offset_ms
        ):
            update.update(ttfs_ms=None, talk_over_ms=None, reason=ECHO_REASON)
        b = t.barge_in
        if (
            b is not None
            and b.stop_latency_ms is not None
            and moved(b.onset_ms, b.onset_ms, t.caller_offset_ms)
        ):
            update["barge_in"] = b.model_copy(
                update={
                    "stop_ms": None,
                    "stop_latency_ms": None,
                    "outcome": "unknown",
                    "reason": ECHO_REASON,
                }
            )
        if update:
            withheld += 1
            turns.append(t.model_copy(update=update))
        else:
            turns.append(t)
    if not withheld:
        return receipt, 0
    ttfs = [t.ttfs_ms for t in turns if t.ttfs_ms is not None]
    barges = [t.barge_in for t in turns if t.barge_in is not None]
    stops = [b.stop_latency_ms for b in barges if b.stop_latency_ms is not None]
    summary = receipt.summary.model_copy(
        update={
            "responses": sum(1 for t in turns if t.kind == "response" and t.ttfs_ms is not None),
            "ttfs_ms_median": round(statistics.median(ttfs), 1) if ttfs else None,
            "ttfs_ms_max": max(ttfs) if ttfs else None,
            "barge_ins_stopped": sum(1 for b in barges if b.outcome == "stopped"),
            "stop_latency_ms_max": max(stops) if stops else None,
        }
    )
    return receipt.model_copy(update={"turns": turns, "summary": summary}), withheld


__all__ = ["DEFAULT_CHUNK_MS", "ECHO_REASON", "EchoRecord", "Measured", "measure"]
