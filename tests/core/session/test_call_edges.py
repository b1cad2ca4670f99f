"""CallSession at its edges: bad input, internal errors, marks, closing, times."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from support.scripted import BargePlan, CallPlan, TurnPlan, render
from support.sessiontime import advance

from voxproxy.clips import load_clips
from voxproxy.core.audio.g711 import pcm_to_ulaw
from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.twilio import TwilioAgentWire, TwilioCallerWire
from voxproxy.core.errors import UsageError
from voxproxy.core.events import AGENT_TO_CALLER as AGENT
from voxproxy.core.events import CALLER_TO_AGENT as CALLER
from voxproxy.core.events import Direction
from voxproxy.core.receipt import CloseInfo, Receipt
from voxproxy.core.session import MAX_MEASUREMENT_ERRORS, CallSession, SessionConfig
from voxproxy.core.timebase import EpochAnchor

MS = 1_000_000
CLOSE = CloseInfo(initiator="caller")
STREAM = "MZ" + "a" * 32
CALL_SID = "CA" + "b" * 32


def session(dialect: str = "twilio", start_ns: int = 0, **kw: object) -> CallSession:
    return CallSession(
        make_decoder(dialect, DialectOptions(secret=b"k")),
        start_ns,
        secret=b"k",
        link_id="link",
        **kw,
    )  # type: ignore[arg-type]


def tone_ulaw(ms: int) -> bytes:
    t = np.arange(ms * 8) / 8000
    return pcm_to_ulaw((8000 * np.sin(2 * np.pi * 300 * t)).astype(np.int16))


def test_anomalies_are_counted_per_kind() -> None:
    caller, agent = TwilioCallerWire(STREAM, CALL_SID), TwilioAgentWire(STREAM)
    s = session()
    messages: list[tuple[Direction, bytes | str]] = [
        (CALLER, caller.connected()),
        (CALLER, caller.start()),
        (CALLER, caller.media(b"\xff" * 160)),
        (CALLER, "{not json"),  # malformed
        (AGENT, "[1, 2]"),  # malformed: not an object
        (CALLER, json.dumps({"event": "media", "media": {}})),  # malformed: no payload
        (AGENT, json.dumps({"event": "media", "media": {"payload": "!!"}})),  # invalid base64
        (CALLER, b"\x00\x01"),  # unexpected binary
        (AGENT, b""),  # unexpected binary
        (AGENT, b"\xff" * 160),  # unexpected binary
        (CALLER, json.dumps({"event": "hangup"})),  # unknown event
        (CALLER, caller.media(b"\xff" * 160)),
        (AGENT, agent.media(b"\xff" * 160)),
        (AGENT, agent.mark("m")),
        (CALLER, caller.dtmf("1")),
        (CALLER, caller.stop()),
    ]
    for i, (d, p) in enumerate(messages):
        s.on_message(d, p, (i + 1) * 20 * MS)
    r = s.close(1000 * MS, "completed", CLOSE)
    assert r.anomalies == {
        "invalid_base64": 1,
        "malformed": 3,
        "unexpected_binary": 3,
        "unknown_event": 1,
    }
    assert list(r.anomalies) == sorted(r.anomalies)
    assert r.traffic.caller_to_agent_messages == 10
    assert r.traffic.agent_to_caller_messages == 6
    assert r.traffic.caller_audio_ms == 40.0  # only the two good media messages
    assert r.traffic.agent_audio_ms == 20.0
    assert s.dtmf == 1 and s.stream_stopped
    assert not r.measurement_disabled
    assert r.call_id_source == "wire"


def test_rate_change_mid_call_is_bad_audio() -> None:
    s = session("raw")
    s.on_message(CALLER, b"\x00\x00" * 320, 20 * MS)
    s.on_message(CALLER, '{"type": "start", "sample_rate": 8000}', 30 * MS)
    s.on_message(CALLER, b"\x00\x00" * 160, 40 * MS)
    r = s.close(100 * MS, "completed", CLOSE)
    assert r.anomalies == {"bad_audio": 1}


class _Boom(Exception):
    pass


def test_measurement_is_disabled_after_repeated_internal_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = session("raw", strict=False)
    calls = 0

    def broken(direction: Direction, payload: bytes | str, t_ns: int) -> list[object]:
        nonlocal calls
        calls += 1
        raise _Boom("bug in a decoder")

    monkeypatch.setattr(s.decoder, "decode", broken)
    for i in range(MAX_MEASUREMENT_ERRORS + 20):
        assert s.on_message(CALLER, b"\x00\x00" * 320, (i + 1) * 20 * MS) == []
    assert MAX_MEASUREMENT_ERRORS == 50
    assert calls == 50  # once disabled, the decoder is not called any more
    assert s.measurement_disabled
    advance(s, 5000 * MS)  # no exception either
    r = s.close(6000 * MS, "completed", CLOSE)
    assert r.measurement_disabled
    assert r.anomalies == {"measurement_error": 50}
    assert r.turns == []
    assert r.traffic.caller_to_agent_messages == 70  # still counted: they were forwarded
    assert r.traffic.caller_to_agent_bytes == 70 * 640


def test_a_few_internal_errors_do_not_stop_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    clips = load_clips()
    call = render(
        CallPlan(
            dialect="raw",
            send_mode="paced",
            turns=(TurnPlan(clips["caller_hello"], clips["agent_reprompt"], 500.0),),
        )
    )
    s = session("raw", strict=False)
    real = s.decoder.decode
    bad_t = {t for t, d, _ in call.messages if d is AGENT}
    bad_t = set(sorted(bad_t)[:10])  # the first ten agent messages blow up

    def flaky(direction: Direction, payload: bytes | str, t_ns: int) -> list[object]:
        if t_ns in bad_t:
            raise _Boom("transient")
        return real(direction, payload, t_ns)  # type: ignore[return-value]

    monkeypatch.setattr(s.decoder, "decode", flaky)
    for t, d, p in call.messages:
        s.on_message(d, p, t)
    r = s.close(call.end_ns, "completed", CLOSE)
    assert r.anomalies == {"measurement_error": 10}
    assert not r.measurement_disabled
    assert r.summary.responses == 1


def test_an_error_while_closing_is_counted_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    s = session("raw", strict=False)
    s.on_message(CALLER, b"\x00\x00" * 320, 20 * MS)

    def boom(end_ns: int) -> list[object]:
        raise _Boom("finish failed")

    monkeypatch.setattr(s.turns, "finish", boom)
    r = s.close(100 * MS, "completed", CLOSE)
    assert r.anomalies == {"measurement_error": 1}
    assert r.turns == []


def test_a_strict_session_raises_its_own_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    s = session("raw", strict=True)

    def broken(direction: Direction, payload: bytes | str, t_ns: int) -> list[object]:
        raise _Boom("bug in a decoder")

    monkeypatch.setattr(s.decoder, "decode", broken)
    with pytest.raises(_Boom, match="bug in a decoder"):
        s.on_message(CALLER, b"\x00\x00" * 320, 20 * MS)
    assert s.anomalies == {}


def test_strict_is_the_test_suites_default_and_not_productions() -> None:
    assert session("raw").strict  # tests/conftest.py
    assert not session("raw", strict=False).strict


def _marks_call(downstream_ms: float = 0.0) -> Receipt:
    caller, agent = TwilioCallerWire(STREAM, CALL_SID), TwilioAgentWire(STREAM)
    s = session(config=SessionConfig(downstream_offset_ms=downstream_ms))
    s.on_message(CALLER, caller.connected(), 0)
    s.on_message(CALLER, caller.start(), 1 * MS)
    # One second of agent audio in a burst at 1000 ms: it plays until 2000 ms.
    s.on_message(AGENT, agent.media(tone_ulaw(1000)), 1000 * MS)
    s.on_message(AGENT, agent.mark("m1"), 1001 * MS)
    off = round(downstream_ms * MS)
    s.on_message(CALLER, caller.mark("m1"), 2000 * MS + off + 400_000)  # 0.4 ms after the model
    # Half a second more, then a clear: the echo that follows says "cleared".
    s.on_message(AGENT, agent.media(tone_ulaw(500)), 2500 * MS)
    s.on_message(AGENT, agent.mark("m2"), 2501 * MS)
    s.on_message(AGENT, agent.clear(), 2600 * MS)
    s.on_message(CALLER, caller.mark("m2"), 2601 * MS)
    s.on_message(CALLER, caller.mark("never-sent"), 2700 * MS)
    # A mark sent with nothing queued echoes at once.
    s.on_message(AGENT, agent.mark("m3"), 4000 * MS)
    s.on_message(CALLER, caller.mark("m3"), 4000 * MS + off - 200_000)
    return s.close(5000 * MS, "completed", CLOSE)


@pytest.mark.parametrize("downstream_ms", [0.0, 60.0])
def test_mark_echoes_check_the_playout_model(downstream_ms: float) -> None:
    r = _marks_call(downstream_ms)
    assert r.marks.checked == 2  # m1 and m3
    assert r.marks.cleared == 1  # m2
    assert r.marks.mean_error_ms == pytest.approx(0.1, abs=0.05)  # (0.4 - 0.2) / 2
    assert r.marks.max_abs_error_ms == 0.4
    assert r.traffic.agent_audio_dropped_ms == 400.0  # the clear at 2600 dropped 400 ms
    assert r.summary.flushes == 1
    assert r.settings.downstream_offset_ms == downstream_ms


def test_no_marks() -> None:
    r = session().close(10 * MS, "completed", CLOSE)
    assert (r.marks.checked, r.marks.cleared, r.marks.mean_error_ms, r.marks.max_abs_error_ms) == (
        0,
        0,
        None,
        None,
    )


def test_close_twice_raises() -> None:
    s = session()
    s.close(10 * MS, "completed", CLOSE)
    with pytest.raises(UsageError, match="already closed"):
        s.close(20 * MS, "completed", CLOSE)


def _float_fields(obj: object, path: str = "") -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _float_fields(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _float_fields(v, f"{path}[{i}]")
    elif isinstance(obj, float):
        out.append((path, obj))
    return out


def _measured(shift_ns: int) -> tuple[Receipt, list[int]]:
    clips = load_clips()
    plan = CallPlan(
        dialect="raw",
        send_mode="burst",
        turns=(
            TurnPlan(
                clips["caller_where_is_order"],
                clips["agent_order_status"],
                700.0,
                BargePlan(after_agent_onset_ms=900.0, reaction_ms=250.0, reaction="flush"),
            ),
            TurnPlan(clips["caller_no_dont"], clips["agent_hours"], 450.0),
        ),
        seed=3,
    )
    call = render(plan)
    s = CallSession(
        make_decoder("raw"),
        shift_ns,
        secret=b"k",
        link_id="link",
        anchor=EpochAnchor(mono_ns=shift_ns, wall_ns=1_750_000_000_123_000_000),
    )
    s.on_upstream_connected(shift_ns + 12_345_678)
    for t, d, p in call.messages:
        s.on_message(d, p, t + shift_ns)
    truth = [call.truth[0].caller_onset_ns, call.truth[0].agent_onset_ns, call.end_ns]
    return s.close(call.end_ns + shift_ns, "completed", CLOSE), truth


def test_times_are_relative_to_the_start_and_rounded_to_a_tenth_of_a_ms() -> None:
    shift = 7_123_456_789
    r, (caller_onset, agent_onset, end) = _measured(shift)
    assert r.started_at == "2025-06-15T15:06:40.123Z"  # the anchor's wall time, at start
    assert r.upstream_connect_ms == 12.3
    assert r.duration_ms == round(end / MS, 1)
    first = r.turns[0]
    assert first.caller_onset_ms is not None and first.agent_onset_ms is not None
    assert abs(first.caller_onset_ms - caller_onset / MS) <= 20
    assert abs(first.agent_onset_ms - agent_onset / MS) <= 20
    assert r.summary.barge_ins == 1
    floats = _float_fields(json.loads(r.to_json_line()))
    assert len(floats) > 20
    for path, value in floats:
        assert round(value, 1) == value, f"{path} = {value!r} is not rounded to 0.1 ms"
        assert not re.search(r"\.\d\d", repr(value)), path
        if path.endswith("_ms") and "ttfs" not in path and "error" not in path:
            assert value >= 0 and value < end / MS + 1000, f"{path} = {value} is not call-relative"
    # The same call started at 0 gives the same relative times.
    r0, _ = _measured(0)
    assert r0.turns == r.turns
    assert r0.summary == r.summary


def test_ttfs_survives_a_stall_in_agent_playout() -> None:
    # The agent's audio runs dry for 200 ms, 750 ms into its answer (a TTS stall), then
    # goes on for 3 s. Playout has a 200 ms hole inside one talk-spurt; the spurt's onset
    # (and so ttfs) must not move by the hole. (It came out 200 ms late before the fix.)
    clips = load_clips()
    caller, agent = clips["caller_yes"], clips["agent_hours"]  # agent speech 250..4130
    rate = 16000
    msgs: list[tuple[int, Direction, bytes]] = []
    track = np.zeros(10 * rate, np.int16)
    track[8000 : 8000 + caller.pcm.size] = caller.pcm
    for k in range(0, track.size, 320):
        msgs.append(((k + 320) * 62_500, CALLER, track[k : k + 320].tobytes()))
    caller_offset_ms = 500 + caller.offset_ms
    send_ms = caller_offset_ms + 400 - agent.onset_ms  # speech audible 400 ms after the caller
    cut = 1000 * 16

    def paced(pcm: np.ndarray, t0_ms: float) -> None:
        for k in range(0, pcm.size, 320):
            msgs.append((round((t0_ms + k / 16) * MS) + 1, AGENT, pcm[k : k + 320].tobytes()))

    paced(agent.pcm[:cut], send_ms)
    paced(agent.pcm[cut:], send_ms + 1000 + 200)
    msgs.sort(key=lambda m: m[0])
    s = session("raw")
    for t, d, p in msgs:
        s.on_message(d, p, t)
    r = s.close(10_000 * MS, "completed", CLOSE)
    (turn,) = r.turns
    assert turn.kind == "response"
    assert turn.ttfs_ms is not None
    assert abs(turn.ttfs_ms - 400.0) <= 20
    assert turn.agent_offset_ms is not None
    assert abs(turn.agent_offset_ms - (send_ms + agent.offset_ms + 200)) <= 20


def _burst_call(agent_queue_ahead_ms: float) -> Receipt:
    """The caller talks twice; the agent answers first with 5 s of audio sent at once, then
    in real time."""
    caller, agent = TwilioCallerWire(STREAM, CALL_SID), TwilioAgentWire(STREAM)
    s = session(config=SessionConfig(agent_queue_ahead_ms=agent_queue_ahead_ms))
    s.on_message(CALLER, caller.start(), 1 * MS)
    tone, quiet = tone_ulaw(20), b"\xff" * 160
    for i in range(1, 600):
        t = i * 20
        talking = 500 <= t - 20 < 1500 or 8000 <= t - 20 < 9000
        s.on_message(CALLER, caller.media(tone if talking else quiet), t * MS + 1)
        if t == 2000:
            for k in range(5):  # 5 s of audio in 5 ms: it plays over [2000, 7000)
                s.on_message(AGENT, agent.media(tone_ulaw(1000)), (2000 + k) * MS)
        if 9500 <= t < 10000:
            s.on_message(AGENT, agent.media(tone), t * MS)
    return s.close(12_000 * MS, "completed", CLOSE)


def test_an_edge_beside_agent_audio_too_far_ahead_to_analyse_is_withheld() -> None:
    full = _burst_call(60_000.0)
    # Kept for analysis: audio due up to 1 s after its arrival, so [2000, 4000) is heard and
    # [4000, 7000) plays unheard.
    bounded = _burst_call(1_000.0)
    assert full.anomalies == {} and full.traffic.agent_audio_unanalysed_ms == 0.0
    assert bounded.anomalies == {"agent_audio_ahead": 3}
    assert bounded.traffic.agent_audio_unanalysed_ms == 3000.0
    first, second = full.turns
    assert (first.agent_onset_ms, first.agent_offset_ms, first.ttfs_ms) == (2000.0, 7000.0, 500.0)
    # What was heard is measured as before; the end of the burst was not heard, so its
    # offset (the detector would put it where analysis stopped, at 4000) is not reported.
    b_first, b_second = bounded.turns
    assert (b_first.agent_onset_ms, b_first.ttfs_ms) == (2000.0, 500.0)
    assert b_first.agent_offset_ms is None
    assert b_second == second  # the next turn, in real time, is untouched


def test_a_burst_after_a_stall_reaches_the_turn_machine_late_and_is_taken() -> None:
    """A caller silent for 2 s, then 4 s of speech at once (as after a network stall): the
    audio covers time the watermark has passed, after an agent flush at 0 was fed. The
    session takes it as it comes (its turn machine is not strict) and measures the turn."""
    caller, agent = TwilioCallerWire(STREAM, CALL_SID), TwilioAgentWire(STREAM)
    speech = load_clips()["caller_where_is_order"].pcm[::2]  # 16 kHz to 8 kHz
    s = session()
    s.on_message(CALLER, caller.connected(), 0)
    s.on_message(CALLER, caller.start(), 0)
    s.on_message(AGENT, agent.clear(), 0)
    s.on_message(CALLER, caller.mark("x"), 2000 * MS)  # a pump: the flush at 0 is fed
    assert s.turns.flushes == 1
    s.on_message(CALLER, caller.media(pcm_to_ulaw(speech[: 4 * 8000])), 2000 * MS)
    r = s.close(3000 * MS, "completed", CLOSE)
    assert s.turns.late_inputs >= 1
    assert r.anomalies == {}
    (turn,) = r.turns  # the caller's speech, from before the flush, is one open turn
    assert turn.caller_onset_ms is not None and turn.caller_onset_ms < 0
    assert turn.reason == "call_ended" and turn.flushes == 0


def test_a_caller_who_sends_a_whole_utterance_in_one_burst_still_has_a_turn() -> None:
    """A caller that buffers its capture: "hello" (speech 251-827 ms) and the silence after
    it, 45 media messages of 20 ms, all arriving at 900 ms; then paced silence, and the
    agent answers at 1400 ms. The speech maps to the 20 ms before the burst's arrival
    (MEASUREMENT.md 1): it was dropped as shorter than min_speech_ms and the answer
    stood as an agent turn no caller speech preceded. It is a turn, its caller offset at
    the arrival and its ttfs measured from there."""
    caller, agent = TwilioCallerWire(STREAM, CALL_SID), TwilioAgentWire(STREAM)
    speech = load_clips()["caller_hello"].pcm[::2]  # 16 kHz to 8 kHz
    silence = np.zeros(160, np.int16)
    s = session()
    s.on_message(CALLER, caller.connected(), 0)
    s.on_message(CALLER, caller.start(), 0)
    for k in range(45):
        chunk = speech[k * 160 : (k + 1) * 160]
        chunk = chunk if chunk.size == 160 else silence
        s.on_message(CALLER, caller.media(pcm_to_ulaw(chunk)), 900 * MS)
    for k in range(46, 200):
        s.on_message(CALLER, caller.media(pcm_to_ulaw(silence)), k * 20 * MS)
        if k * 20 == 1400:
            s.on_message(AGENT, agent.media(tone_ulaw(1000)), 1400 * MS)
    r = s.close(4000 * MS, "completed", CLOSE)
    responses = [t for t in r.turns if t.kind == "response"]
    assert len(responses) == 1, r.turns
    (turn,) = responses
    assert turn.caller_offset_ms is not None and 880.0 <= turn.caller_offset_ms <= 900.0
    assert turn.ttfs_ms is not None and 500.0 <= turn.ttfs_ms <= 525.0, turn
