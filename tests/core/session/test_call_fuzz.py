"""Property-based: the session core takes whatever comes, over valid but odd sequences
of each wire (events out of order, media before start, marks never echoed or echoed
unsent, flushes with nothing queued, huge and empty payloads, rate and format changes,
time jumps) and over raw event streams: no exception leaves it, no internal error is
counted, every bad message is counted as an anomaly, traffic adds up and the receipt is
valid (the decoders: tests/core/dialects/test_decoders_fuzz.py, the relay:
tests/proxy/test_fuzz.py). Bounded (``support.fuzzing.bounded``); ``VOXPROXY_FUZZ_SCALE=20``
searches deeper."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.fuzzing import DIRECTIONS, EVENT_TYPES, MS, bounded
from support.sessiontime import advance, next_deadline

from voxproxy.clips import load_clips
from voxproxy.core import events as ev
from voxproxy.core.audio.g711 import pcm_to_alaw, pcm_to_ulaw
from voxproxy.core.audio.pcm import pcm_to_bytes
from voxproxy.core.audio.resample import resample_linear
from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import Decoder, DialectOptions
from voxproxy.core.dialects.detect import PENDING, guess
from voxproxy.core.dialects.exotel import ExotelAgentWire, ExotelCallerWire
from voxproxy.core.dialects.openai_realtime import (
    FORMATS,
    OpenAIRealtimeAgentWire,
    OpenAIRealtimeCallerWire,
)
from voxproxy.core.dialects.plivo import L16, MULAW, PlivoAgentWire, PlivoCallerWire
from voxproxy.core.dialects.raw import RawWire
from voxproxy.core.dialects.telnyx import TelnyxAgentWire, TelnyxCallerWire
from voxproxy.core.dialects.twilio import TwilioAgentWire, TwilioCallerWire
from voxproxy.core.dialects.vonage import VonageAgentWire, VonageCallerWire
from voxproxy.core.receipt import CloseInfo, Receipt
from voxproxy.core.session import CallSession

# -- the session over valid but odd wire sequences ------------------------------------------


@cache
def _speech() -> dict[int, ev.Pcm]:
    """A stretch of real speech at each rate the wires use (VAD then finds turns)."""
    clips = load_clips()
    pcm16k = np.concatenate([clips["caller_where_is_order"].pcm, clips["agent_long_answer"].pcm])
    return {r: resample_linear(pcm16k, 16000, r) for r in (8000, 16000, 24000)}


@st.composite
def pcm(draw: st.DrawFn, rate: int = 8000) -> ev.Pcm:
    """Speech, silence or noise; from nothing to ten seconds (a huge payload)."""
    ms = draw(st.sampled_from([0, 1, 10, 20, 20, 20, 40, 200, 1000, 10_000]))
    n = rate * ms // 1000
    kind = draw(st.sampled_from(["speech", "speech", "silence", "noise"]))
    if kind == "silence":
        return np.zeros(n, dtype=np.int16)
    if kind == "noise":
        seed = draw(st.integers(0, 2**16))
        return np.random.default_rng(seed).integers(-3000, 3000, n).astype(np.int16)
    src = _speech()[rate]
    start = draw(st.integers(0, max(0, src.size - n)))
    out: ev.Pcm = src[start : start + n]
    return out


Step = tuple[ev.Direction, bytes | str, bool]  # (direction, message, certainly an anomaly)
Kit = list[Callable[[st.DrawFn], Step]]
_NAMES = st.sampled_from(["m0", "m1", "m2", "never-sent"])
_IDS = st.sampled_from(["a", "b", "c"])


def _bad(draw: st.DrawFn, binary_is_bad: bool = True) -> Step:
    """Something every JSON wire counts as an anomaly."""
    d = draw(DIRECTIONS)
    choice = draw(st.sampled_from(["notjson", "array", "unknown"] + (["bin"] * binary_is_bad)))
    if choice == "bin":
        return d, draw(st.binary(min_size=1, max_size=50)), True
    if choice == "notjson":
        return d, "{not json " + draw(st.text(max_size=10)), True
    if choice == "array":
        return d, json.dumps(draw(st.lists(st.integers(), max_size=3))), True
    return d, json.dumps({"event": "no.such.event", "type": "no.such.event"}), True


def _twilio(draw: st.DrawFn) -> Kit:
    sid = "CA" + "3" * 32
    caller = TwilioCallerWire("MZ" + sid[2:], sid)
    agent = TwilioAgentWire("MZ" + sid[2:])
    rate = st.sampled_from([8000, 8000, 16000])

    def start(dr: st.DrawFn) -> Step:
        m = json.loads(caller.start())
        r = dr(rate)
        m["start"]["mediaFormat"]["sampleRate"] = r
        if dr(st.booleans()):
            del m["start"]["callSid"]
        return ev.CALLER_TO_AGENT, json.dumps(m), r != 8000

    return [
        lambda dr: (ev.CALLER_TO_AGENT, caller.connected(), False),
        start,
        lambda dr: (ev.CALLER_TO_AGENT, caller.media(pcm_to_ulaw(dr(pcm()))), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.media(pcm_to_ulaw(dr(pcm()))), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.media(pcm_to_ulaw(dr(pcm()))), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.media(pcm_to_ulaw(dr(pcm()))), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.mark(dr(_NAMES)), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.mark(dr(_NAMES)), False),  # echoes, maybe unsent
        lambda dr: (ev.AGENT_TO_CALLER, agent.clear(), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.dtmf("5"), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.stop(), False),
        lambda dr: (
            ev.AGENT_TO_CALLER,
            json.dumps({"event": "media", "media": {"payload": "%%"}}),
            True,
        ),
        _bad,
    ]


def _raw(draw: st.DrawFn) -> Kit:
    rates = st.sampled_from([8000, 16000, 24000, 44100, 48000, 11025, 4000, 192000, 7919])

    def audio(d: ev.Direction) -> Callable[[st.DrawFn], Step]:
        def make(dr: st.DrawFn) -> Step:
            data = pcm_to_bytes(dr(pcm(16000)))
            if dr(st.booleans()):
                data = data[: dr(st.integers(0, len(data)))]  # odd lengths, empty
            return d, RawWire.audio(data), False

        return make

    return [
        lambda dr: (ev.CALLER_TO_AGENT, RawWire.start(dr(rates), dr(st.none() | _IDS)), False),
        lambda dr: (ev.AGENT_TO_CALLER, RawWire.start(dr(rates)), False),
        audio(ev.CALLER_TO_AGENT),
        audio(ev.CALLER_TO_AGENT),
        audio(ev.AGENT_TO_CALLER),
        audio(ev.AGENT_TO_CALLER),
        lambda dr: (ev.AGENT_TO_CALLER, RawWire.clear(), False),
        lambda dr: (ev.AGENT_TO_CALLER, RawWire.transcript(dr(st.text(max_size=20))), False),
        lambda dr: _bad(dr, binary_is_bad=False),
    ]


def _realtime(draw: st.DrawFn) -> Kit:
    beta = draw(st.booleans())
    caller = OpenAIRealtimeCallerWire(beta=beta)
    agent = OpenAIRealtimeAgentWire(beta=beta)
    fmt = st.sampled_from(FORMATS)
    ms = st.integers(0, 600_000)

    def enc(dr: st.DrawFn) -> bytes:
        f = dr(fmt)
        return f.encode(dr(pcm(f.sample_rate_hz if f.sample_rate_hz in (8000, 24000) else 8000)))

    return [
        lambda dr: (ev.CALLER_TO_AGENT, caller.session_update(dr(fmt), dr(fmt)), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.append(enc(dr)), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.append(enc(dr)), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.commit(), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.truncate(dr(_IDS), dr(ms)), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.response_cancel(dr(st.none() | _IDS)), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.response_create(), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.function_call_output(dr(_IDS), "{}"), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.output_audio_buffer_clear(), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.session_created("s", dr(fmt), dr(fmt)), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.session_updated("s", dr(fmt), dr(fmt)), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.speech_started(dr(ms), dr(_IDS)), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.speech_stopped(dr(ms), dr(_IDS)), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.committed(dr(_IDS)), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.response_created(dr(_IDS)), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.audio_delta(dr(_IDS), dr(_IDS), enc(dr)), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.audio_delta(dr(_IDS), dr(_IDS), enc(dr)), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.audio_done(dr(_IDS), dr(_IDS)), False),
        lambda dr: (
            ev.AGENT_TO_CALLER,
            agent.function_call_arguments_done(dr(_IDS), dr(_IDS), dr(_IDS), "tool", "{}"),
            False,
        ),
        lambda dr: (
            ev.AGENT_TO_CALLER,
            agent.response_done(dr(_IDS), dr(st.sampled_from(["completed", "cancelled"]))),
            False,
        ),
        lambda dr: (ev.AGENT_TO_CALLER, agent.input_transcription_completed("a", "words"), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.item_truncated(dr(_IDS), dr(ms)), False),
        _bad,
    ]


def _telnyx_payload(x: ev.Pcm, encoding: str) -> bytes:
    if encoding == "PCMU":
        return pcm_to_ulaw(x)
    if encoding == "PCMA":
        return pcm_to_alaw(x)
    return x.astype(">i2").tobytes()  # L16: network byte order


Draw = Callable[[st.DrawFn], Any]


def _media_stream_kit(
    caller: Any, agent: Any, digit: str, heard: Draw, said: Draw | None = None
) -> Kit:
    """The messages of a telephony media stream with marks, clear and a key press; the
    caller's audio drawn by ``heard``, the agent's by ``said`` (by default the same)."""
    said = said or heard
    return [
        lambda dr: (ev.CALLER_TO_AGENT, caller.connected(), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.start(), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.media(heard(dr)), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.media(heard(dr)), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.media(said(dr)), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.mark(dr(_NAMES)), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.mark(dr(_NAMES)), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.clear(), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.dtmf(digit), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.stop(), False),
        _bad,
    ]


def _telnyx(draw: st.DrawFn) -> Kit:
    encoding = draw(st.sampled_from(["PCMU", "PCMA", "L16"]))
    rate = 16000 if encoding == "L16" and draw(st.booleans()) else 8000
    caller = TelnyxCallerWire("s1", "v3:call", encoding, rate)
    heard: Draw = lambda dr: _telnyx_payload(dr(pcm(rate)), encoding)  # noqa: E731
    return _media_stream_kit(caller, TelnyxAgentWire, "1", heard, lambda dr: pcm_to_ulaw(dr(pcm())))


def _plivo(draw: st.DrawFn) -> Kit:
    ctype = draw(st.sampled_from([MULAW, L16]))
    rate = 16000 if ctype == L16 and draw(st.booleans()) else 8000
    caller = PlivoCallerWire("s1", "call-1", ctype, rate)
    agent = PlivoAgentWire("s1", draw(st.sampled_from([MULAW, L16])), 8000)
    return [
        lambda dr: (ev.CALLER_TO_AGENT, caller.start(), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.media(dr(pcm(rate))), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.media(dr(pcm(rate))), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.play_audio(dr(pcm())), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.checkpoint(dr(_NAMES)), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.played_stream(dr(_NAMES)), False),
        lambda dr: (ev.AGENT_TO_CALLER, agent.clear_audio(), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.cleared_audio(), False),
        lambda dr: (ev.CALLER_TO_AGENT, caller.dtmf("2"), False),
        _bad,
    ]


def _vonage(draw: st.DrawFn) -> Kit:
    rate = draw(st.sampled_from([8000, 16000, 24000]))
    caller = VonageCallerWire(rate)
    return [
        lambda dr: (ev.CALLER_TO_AGENT, caller.connected(), False),
        lambda dr: (ev.CALLER_TO_AGENT, VonageCallerWire.audio(dr(pcm(rate))), False),
        lambda dr: (ev.CALLER_TO_AGENT, VonageCallerWire.audio(dr(pcm(rate))), False),
        lambda dr: (ev.AGENT_TO_CALLER, VonageAgentWire.audio(dr(pcm(rate))), False),
        lambda dr: (ev.AGENT_TO_CALLER, VonageAgentWire.clear(), False),
        lambda dr: (ev.CALLER_TO_AGENT, VonageCallerWire.cleared(), False),
        lambda dr: (ev.CALLER_TO_AGENT, VonageCallerWire.dtmf("3"), False),
        lambda dr: (ev.AGENT_TO_CALLER, VonageAgentWire.notify({"k": 1}), False),
        lambda dr: _bad(dr, binary_is_bad=False),
    ]


def _exotel(draw: st.DrawFn) -> Kit:
    rate = draw(st.sampled_from([8000, 16000, 24000]))
    caller = ExotelCallerWire("s1", "c1", rate)
    return _media_stream_kit(caller, ExotelAgentWire("s1"), "4", lambda dr: dr(pcm(rate)))


KITS: dict[str, Callable[[st.DrawFn], Kit]] = {
    "twilio": _twilio,
    "raw": _raw,
    "openai-realtime": _realtime,
    "telnyx": _telnyx,
    "plivo": _plivo,
    "vonage": _vonage,
    "exotel": _exotel,
}
GAPS_NS = st.sampled_from([0, 0, 1, 20 * MS, 20 * MS, 20 * MS, 100 * MS, 2_000 * MS, 60_000 * MS])


def check_session(
    decoder: Decoder, steps: list[tuple[int, Step]], end_ns: int, advance_at: set[int]
) -> Receipt:
    """Feed ``steps`` to a session; check what must hold; return the receipt."""
    session = CallSession(decoder, 0, secret=b"fuzz", link_id="fuzz")
    sent = [0, 0]
    sent_bytes = [0, 0]
    for i, (t_ns, (direction, message, _bad)) in enumerate(steps):
        events = session.on_message(direction, message, t_ns)
        assert all(isinstance(event, EVENT_TYPES) for event in events)
        sent[direction] += 1
        sent_bytes[direction] += len(message)
        if i in advance_at:
            deadline = next_deadline(session)
            advance(session, t_ns if deadline is None else max(t_ns, deadline))
    receipt = session.close(end_ns, "caller_closed", CloseInfo(initiator="caller"))
    assert receipt.anomalies.get("measurement_error", 0) == 0, receipt.anomalies
    assert not receipt.measurement_disabled
    t = receipt.traffic
    assert [t.caller_to_agent_messages, t.agent_to_caller_messages] == sent
    assert [t.caller_to_agent_bytes, t.agent_to_caller_bytes] == sent_bytes
    bad = sum(1 for _, (_, _, b) in steps if b)
    assert sum(receipt.anomalies.values()) >= bad
    assert Receipt.model_validate_json(receipt.to_json_line()) == receipt
    for turn in receipt.turns:
        if turn.ttfs_ms is not None and turn.kind == "response":
            assert turn.caller_offset_ms is not None and turn.agent_onset_ms is not None
    return receipt


@pytest.mark.slow
@pytest.mark.parametrize("dialect", sorted(KITS))
@bounded(25)
@given(data=st.data())
def test_the_session_takes_odd_but_valid_sequences(dialect: str, data: st.DataObject) -> None:
    kit = KITS[dialect](data.draw)
    n = data.draw(st.integers(0, 40), label="messages")
    t = 0
    steps: list[tuple[int, Step]] = []
    for _ in range(n):
        t += data.draw(GAPS_NS)
        make = kit[data.draw(st.integers(0, len(kit) - 1))]
        steps.append((t, make(data.draw)))
    advance_at = set(data.draw(st.lists(st.integers(0, 40), max_size=5)))
    end = t + data.draw(st.sampled_from([0, 1, 500 * MS, 10_000 * MS]))
    name = (
        "auto" if dialect in ("telnyx", "plivo", "exotel") and data.draw(st.booleans()) else dialect
    )
    if name == "auto" and _auto_picks(steps) == "raw":
        # A binary message before any that names the wire makes ``auto`` choose raw,
        # where binary is audio, not an anomaly (voxproxy/core/dialects/detect.py).
        steps = [(t_ns, (d, m, bad and not isinstance(m, bytes))) for t_ns, (d, m, bad) in steps]
    check_session(make_decoder(name, DialectOptions(secret=b"k")), steps, end, advance_at)


def _auto_picks(steps: list[tuple[int, Step]]) -> str | None:
    """The wire the ``auto`` decoder settles on: the first message that names one."""
    for _, (_, message, _) in steps:
        found = guess(message)
        if found is not None and found != PENDING:
            return found
    return None


# -- the session core over raw event streams ------------------------------------------------


class Scripted:
    """A decoder that hands the session pre-built events, whatever the payload."""

    name = "scripted"

    def __init__(self, events: list[list[ev.Event]]) -> None:
        self._events = iter(events)

    def decode(self, direction: ev.Direction, payload: bytes | str, t_ns: int) -> list[ev.Event]:
        return [_retime(event, t_ns) for event in next(self._events, [])]


def _retime(event: ev.Event, t_ns: int) -> ev.Event:
    """The event stamped at ``t_ns`` (a stage mark's own position kept relative to it)."""
    if isinstance(event, ev.StageMark) and event.at_ns is not None:
        return dataclasses.replace(event, t_ns=t_ns, at_ns=t_ns + event.at_ns)
    if isinstance(event, ev.Audio):  # a plain class (compiled with the core), not a dataclass
        return ev.Audio(event.direction, event.pcm, event.sample_rate_hz, t_ns, event.item_id)
    return dataclasses.replace(event, t_ns=t_ns)


_RATES = st.sampled_from([8000, 16000, 24000, 32000, 48000, 44100, 11025, 4000, 192000, 7919])
_OPS = st.sampled_from(["op1", "op2", "op3"])


@st.composite
def core_event(draw: st.DrawFn) -> ev.Event:
    kind = draw(st.integers(0, 10))
    if kind <= 3:
        rate = draw(_RATES)
        samples = draw(st.sampled_from([0, 1, 7, 80, 160, 320, 480, 4000, 48000]))
        seed = draw(st.integers(0, 99))
        loud = draw(st.sampled_from([0, 300, 8000, 32767]))
        x = np.random.default_rng(seed).integers(-loud - 1, loud + 1, samples).astype(np.int16)
        item = draw(st.none() | _IDS)
        return ev.Audio(draw(DIRECTIONS), x, rate, 0, item)
    if kind == 4:
        claimed = draw(st.none() | st.floats(0, 1e7, allow_nan=False))
        return ev.Flush(0, "clear", claimed, draw(st.none() | _IDS))
    if kind == 5:
        return ev.MarkSent(draw(_NAMES), 0)
    if kind == 6:
        return ev.MarkEcho(draw(_NAMES), 0)
    if kind == 7:
        name = draw(
            st.sampled_from(
                [
                    "server_speech_started",
                    "server_speech_stopped",
                    "response_created",
                    "first_audio_delta",
                    "response_done",
                    "custom",
                ]
            )
        )
        return ev.StageMark(name, 0, draw(st.none() | st.integers(-5_000 * MS, 5_000 * MS)))
    if kind == 8:
        return ev.ToolEvent(
            draw(st.sampled_from(ev.TOOL_EVENT_KINDS)),
            0,
            source=draw(st.sampled_from(["api", "wire"])),
            operation_id=draw(st.none() | _OPS),
            tool=draw(st.none() | st.just("lookup")),
            attempt=draw(st.none() | st.integers(1, 3)),
            state_version=draw(st.none() | st.integers(0, 3)),
            idempotency_key=draw(st.none() | st.just("k")),
            status=draw(st.none() | st.sampled_from(["ok", "error", "timeout", "malformed"])),
            field=draw(st.none() | st.just("address")),
            version=draw(st.none() | st.integers(0, 3)),
            value_hash=draw(st.none() | st.sampled_from(["h1", "h2"])),
            verified=draw(st.none() | st.booleans()),
        )
    if kind == 9:
        return draw(
            st.sampled_from(
                [
                    ev.StreamStart("wire-id", 8000, "ulaw", 0),
                    ev.StreamStart(None, None, None, 0),
                    ev.StreamStop(0),
                    ev.Dtmf(0),
                    ev.Transcript("user", "hello", True, 0),
                ]
            )
        )
    return draw(st.sampled_from([ev.StreamStart("x", 16000, "pcm_s16le", 0), ev.Dtmf(0)]))


@bounded(150)
@given(
    batches=st.lists(
        st.tuples(GAPS_NS, DIRECTIONS, st.lists(core_event(), max_size=4)), max_size=30
    ),
    api_events=st.lists(st.tuples(st.integers(0, 29), core_event()), max_size=6),
)
@pytest.mark.slow
def test_the_session_core_takes_any_event_stream(
    batches: list[tuple[int, ev.Direction, list[ev.Event]]], api_events: list[tuple[int, ev.Event]]
) -> None:
    session = CallSession(Scripted([b for _, _, b in batches]), 0, secret=b"k", link_id="x")
    t = 0
    for i, (gap, direction, _) in enumerate(batches):
        t += gap
        session.on_message(direction, b"", t)
        for at, event in api_events:
            if at == i and isinstance(event, ev.ToolEvent | ev.StageMark):
                session.on_event(_retime(event, t))  # type: ignore[arg-type]
        if i % 7 == 3:
            advance(session, t)
        next_deadline(session)
    receipt = session.close(t + 1, "completed", CloseInfo(initiator="none"))
    assert receipt.anomalies.get("measurement_error", 0) == 0, receipt.anomalies
    assert Receipt.model_validate_json(receipt.to_json_line()) == receipt
