"""The mock agent over real loopback sockets: timing, pacing, wire format, barge-in, faults."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import random
import re
import time

import numpy as np
import pytest
from support.mockcaller import (
    MS,
    STREAM_SID,
    CallerRun,
    agent_audio,
    gaps_ms,
    run_caller,
    speech_play_ns,
    wait_ended,
)
from support.waiting import wait_until
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.protocol import State
from websockets.typing import Subprotocol

from voxproxy.clips import clip
from voxproxy.core.audio.g711 import pcm_to_ulaw
from voxproxy.core.dialects.raw import RawWire
from voxproxy.core.dialects.twilio import TwilioCallerWire
from voxproxy.mockagent import CallLog, MockAgent, MockAgentConfig, run_cli
from voxproxy.mockagent.config import halve_rate

# -- answering: timing, pacing, transparency ------------------------------------------------


async def _answer_call(
    cfg: MockAgentConfig, total_ms: float, **caller: object
) -> tuple[CallerRun, CallLog]:
    async with MockAgent(cfg) as agent:
        run = await run_caller(
            agent.url + "/agent?call=7",
            "raw",
            [("caller_hello", 300)],
            total_ms,
            **caller,  # type: ignore[arg-type]
        )
        log = agent.calls[0]
        await wait_ended(log)
    return run, log


@pytest.mark.slow
async def test_raw_answers_after_the_delay_paced_and_in_bursts() -> None:
    reprompt_only = MockAgentConfig(responses=["agent_reprompt"])
    (run, log), (burst_run, burst_log), (quick_run, quick_log) = await asyncio.gather(
        _answer_call(
            reprompt_only,
            3100,
            subprotocols=["vox.test", "other"],
            headers={"X-Probe": "42"},
            close=(4001, "bye"),
        ),
        _answer_call(dataclasses.replace(reprompt_only, send_mode="burst"), 2500),
        _answer_call(dataclasses.replace(reprompt_only, delay_ms=200), 2800),
    )
    hello, reprompt = clip("caller_hello"), clip("agent_reprompt")

    # paced: the VAD found the caller's true offset and the answer followed it by 600 ms.
    true_offset = run.true_ns(300, hello.offset_ms)
    assert [s.offset_ns for s in log.caller_spurts] == [log.responses[0].caller_offset_ns]
    assert abs(log.caller_spurts[0].offset_ns - true_offset) < 30 * MS
    [resp] = log.responses
    assert (resp.clip, resp.stream_pos, resp.planned_delay_ms) == ("agent_reprompt", 0, 600.0)
    assert resp.interrupted_ns is None and not resp.flushed
    assert resp.samples_sent == resp.total_samples == reprompt.pcm.size - resp.skipped_samples
    chunks = agent_audio(run, "raw")
    delay_ms = (speech_play_ns(chunks, 16000) - true_offset) / MS
    assert 600 - 80 <= delay_ms <= 600 + 80, delay_ms

    # paced: 20 ms chunks, about 20 ms apart, no drift over the response.
    sizes = [pcm.size for _, pcm in chunks]
    assert sizes[:-1] == [320] * (len(sizes) - 1) and 0 < sizes[-1] <= 320
    assert sum(sizes) == resp.samples_sent
    gaps = gaps_ms([t for t, _ in chunks])
    assert 19.0 <= float(np.median(gaps)) <= 21.0
    span_ms = (chunks[-1][0] - chunks[0][0]) / MS
    assert abs(span_ms - 20 * (len(chunks) - 1)) < 25, span_ms

    # paced: handshake and transparency log.
    assert log.path == "/agent?call=7"
    assert log.headers["x-probe"] == "42"
    assert log.headers["sec-websocket-protocol"] == "vox.test, other"
    assert log.subprotocol == run.subprotocol == "vox.test"
    assert log.caller_messages == run.sent
    assert log.sent_messages == [(is_text, p) for _, is_text, p in run.received]
    assert (log.close_code, log.close_reason) == (4001, "bye")
    assert log.errors == []

    # burst: 200 ms chunks ten times faster than real time, speech still on time.
    [resp] = burst_log.responses
    chunks = agent_audio(burst_run, "raw")
    sizes = [pcm.size for _, pcm in chunks]
    assert sizes[:-1] == [3200] * (len(sizes) - 1)
    assert sum(sizes) == resp.samples_sent == resp.total_samples
    span_ms = (chunks[-1][0] - chunks[0][0]) / MS
    assert abs(span_ms - (len(chunks) - 1) * 200 / 10) < 15, span_ms
    assert span_ms < sum(sizes) / 16 / 5
    true_offset = burst_run.true_ns(300, hello.offset_ms)
    delay_ms = (speech_play_ns(chunks, 16000) - true_offset) / MS
    assert 600 - 80 <= delay_ms <= 600 + 80, delay_ms
    assert burst_log.errors == []

    # 200 ms is shorter than the VAD's detection latency: the answer starts at once, with its
    # leading silence skipped, and the log records the real delay.
    [resp] = quick_log.responses
    assert resp.planned_delay_ms == 200.0
    assert resp.skipped_samples == round(reprompt.onset_ms * 16)
    assert resp.caller_offset_ns is not None and resp.first_send_ns is not None
    assert resp.actual_delay_ms is not None and 400 < resp.actual_delay_ms < 600
    assert abs(resp.first_send_ns - resp.speech_ns) < 3 * MS
    true_offset = quick_run.true_ns(300, hello.offset_ms)
    delay_ms = (speech_play_ns(agent_audio(quick_run, "raw"), 16000) - true_offset) / MS
    assert abs(delay_ms - resp.actual_delay_ms) < 30, (delay_ms, resp.actual_delay_ms)


@pytest.mark.slow
async def test_raw_8k_jitter_transcripts_and_a_caller_that_goes_quiet() -> None:
    cfg = MockAgentConfig(
        sample_rate_hz=8000,
        responses=["agent_reprompt"],
        jitter_ms=100,
        seed=5,
        transcripts=True,
        transcript_text=lambda turn: f"turn {turn}",
        announce_rate=True,
    )
    async with MockAgent(cfg) as agent:
        run = await run_caller(
            agent.url,
            "raw",
            [("caller_hello", 300)],
            3100,
            rate=8000,
            preamble=[RawWire.start(8000)],
            stop_audio_ms=300 + 900,  # the agent's VAD timer must close the turn
        )
        log = agent.calls[0]
        await wait_ended(log)

    # Call 0's jitter comes from random.Random("<seed>:0"); seed 5 gives about -95 ms.
    expected_delay = 600 + random.Random("5:0").uniform(-100, 100)
    [resp] = log.responses
    assert resp.planned_delay_ms == pytest.approx(expected_delay)
    assert resp.planned_delay_ms < 520
    assert log.caller_rate_hz == 8000

    first_is_text, first = run.received[0][1:]
    assert first_is_text and json.loads(first) == {"type": "start", "sample_rate": 8000}
    true_offset = run.true_ns(300, clip("caller_hello").offset_ms)
    [(t_transcript, transcript)] = [(t, p) for t, p in run.texts() if "transcript" in p]
    assert json.loads(transcript) == {
        "type": "transcript",
        "role": "user",
        "text": "turn 0",
        "final": True,
    }
    chunks = agent_audio(run, "raw")
    assert true_offset < t_transcript < chunks[0][0]
    assert {pcm.size for _, pcm in chunks[:-1]} == {160}  # 20 ms at 8 kHz
    expected = halve_rate(clip("agent_reprompt").pcm)[resp.skipped_samples :]
    np.testing.assert_array_equal(np.concatenate([p for _, p in chunks]), expected)
    delay_ms = (speech_play_ns(chunks, 8000) - true_offset) / MS
    assert abs(delay_ms - expected_delay) <= 80, (delay_ms, expected_delay)


@pytest.mark.slow
async def test_twilio_media_and_marks_follow_the_callers_stream() -> None:
    cfg = MockAgentConfig(dialect="twilio", greeting="agent_reprompt", responses=["agent_reprompt"])
    async with MockAgent(cfg) as agent:
        run = await run_caller(agent.url, "twilio", [("caller_hello", 1600)], 4400)
        log = agent.calls[0]
        await wait_ended(log)

    assert log.stream_sid == STREAM_SID
    greeting, answer = log.responses
    assert greeting.greeting and greeting.caller_offset_ns is None
    assert (answer.clip, answer.greeting) == ("agent_reprompt", False)
    assert answer.stream_pos == greeting.samples_sent == halve_rate(clip("agent_reprompt").pcm).size

    events: list[str] = []
    media: list[bytes] = []
    marks: list[str] = []
    for _, is_text, payload in run.received:
        assert is_text and isinstance(payload, str)
        msg = json.loads(payload)
        events.append(msg["event"])
        assert msg["streamSid"] == STREAM_SID
        if msg["event"] == "media":
            assert set(msg) == {"event", "streamSid", "media"}
            assert set(msg["media"]) == {"payload"}
            media.append(base64.b64decode(msg["media"]["payload"], validate=True))
        else:
            assert msg["event"] == "mark" and set(msg) == {"event", "streamSid", "mark"}
            marks.append(msg["mark"]["name"])
    assert marks == ["resp-1", "resp-2"]
    n_greeting = -(-greeting.samples_sent // 160)
    n_answer = -(-answer.samples_sent // 160)
    assert events == ["media"] * n_greeting + ["mark"] + ["media"] * n_answer + ["mark"]
    assert {len(m) for m in media[: n_greeting - 1]} == {160}

    # The greeting is the clip itself, μ-law at 8 kHz, unskipped.
    ulaw = pcm_to_ulaw(halve_rate(clip("agent_reprompt").pcm))
    assert b"".join(media[:n_greeting]) == ulaw
    assert b"".join(media[n_greeting:]) == ulaw[answer.skipped_samples :]
    # Nothing was sent before the caller's start message; the greeting followed it at once.
    assert 0 <= (run.received[0][0] - greeting.first_send_ns) < 5 * MS  # type: ignore[operator]
    assert greeting.first_send_ns is not None and greeting.first_send_ns <= run.t0_ns + 20 * MS

    true_offset = run.true_ns(1600, clip("caller_hello").offset_ms)
    chunks = agent_audio(run, "twilio")[n_greeting:]
    delay_ms = (speech_play_ns(chunks, 8000) - true_offset) / MS
    assert 520 <= delay_ms <= 680, delay_ms


# -- barge-in ---------------------------------------------------------------------------------

BARGE_ONSET_MS = 300 + 827 + 600 + 500  # caller_yes starts 500 ms into the agent's speech
BARGE_AT_MS = BARGE_ONSET_MS - 250  # clip start (caller_yes has 250 ms of lead silence)


async def _barge_call(policy: str) -> tuple[CallerRun, CallLog]:
    cfg = MockAgentConfig(barge_in=policy, responses=["agent_confirm", "agent_reprompt"])  # type: ignore[arg-type]
    async with MockAgent(cfg) as agent:
        run = await run_caller(
            agent.url, "raw", [("caller_hello", 300), ("caller_yes", BARGE_AT_MS)], 4500
        )
        log = agent.calls[0]
        await wait_ended(log)
    return run, log


def _audio_after(run: CallerRun, t_ns: int) -> list[int]:
    return [t for t, is_text, _ in run.received if not is_text and t > t_ns]


@pytest.mark.slow
async def test_barge_in_flush_silent_and_never() -> None:
    (flush_run, flush_log), (silent_run, silent_log), (never_run, never_log) = await asyncio.gather(
        _barge_call("flush"), _barge_call("silent"), _barge_call("never")
    )
    yes = clip("caller_yes")

    # flush: stops and clears 150 ms after its VAD hears the caller, then answers the new turn.
    onset = flush_run.true_ns(BARGE_AT_MS, yes.onset_ms)
    first, second = flush_log.responses
    assert first.clip == "agent_confirm" and first.flushed
    assert first.interrupted_ns is not None and 0 <= first.interrupted_ns - onset < 60 * MS
    assert first.samples_sent < first.total_samples
    [(t_clear, clear)] = flush_run.texts()
    assert json.loads(clear) == {"type": "clear"}
    assert 145 * MS <= t_clear - onset <= (150 + 100) * MS, (t_clear - onset) / MS
    # Its reaction timer can fire late on a busy machine, never early.
    assert first.flush_ns is not None
    assert 0 <= first.flush_ns - first.interrupted_ns - 150 * MS < 50 * MS
    assert _audio_after(flush_run, t_clear)[0] >= second.first_send_ns  # type: ignore[operator]
    assert second.clip == "agent_reprompt"
    true_yes_offset = flush_run.true_ns(BARGE_AT_MS, yes.offset_ms)
    assert second.caller_offset_ns is not None
    assert abs(second.caller_offset_ns - true_yes_offset) < 30 * MS

    # silent: audio stops just as quickly, with no clear.
    onset = silent_run.true_ns(BARGE_AT_MS, yes.onset_ms)
    first = silent_log.responses[0]
    assert silent_run.texts() == [] and not first.flushed
    assert first.interrupted_ns is not None and first.stopped_ns is not None
    second_start = silent_log.responses[1].first_send_ns
    assert second_start is not None
    last_audio = max(t for t, is_text, _ in silent_run.received if not is_text and t < second_start)
    assert 125 * MS <= last_audio - onset <= (150 + 100) * MS, (last_audio - onset) / MS
    assert len(silent_log.responses) == 2

    # never: keeps talking to the end of the clip and ignores the overlapping turn.
    onset = never_run.true_ns(BARGE_AT_MS, yes.onset_ms)
    [only] = never_log.responses
    assert never_run.texts() == []
    assert only.interrupted_ns is not None and 0 <= only.interrupted_ns - onset < 60 * MS
    assert only.samples_sent == only.total_samples and not only.flushed
    assert max(_audio_after(never_run, onset)) - onset > 1500 * MS
    assert never_log.ignored_spurts == 1 and len(never_log.caller_spurts) == 2


# -- faults -----------------------------------------------------------------------------------


async def test_refuse_answers_the_handshake_with_the_status() -> None:
    async with MockAgent(MockAgentConfig(refuse_status=403)) as agent:
        with pytest.raises(InvalidStatus) as info:
            async with connect(agent.url + "/x", compression=None):
                pass
        assert info.value.response.status_code == 403
        [log] = agent.calls
        assert (log.status, log.path, log.faults) == (403, "/x", ["refuse"])


async def _faulted_call(cfg: MockAgentConfig) -> tuple[CallerRun, CallLog]:
    """One silent raw call to an agent with ``cfg``, until the agent's side has ended."""
    async with MockAgent(cfg) as agent:
        run = await run_caller(agent.url, "raw", [], 2000)
        await wait_ended(log := agent.calls[0])
    return run, log


async def test_close_after_sends_the_close_code() -> None:
    run, log = await _faulted_call(MockAgentConfig(close_after_ms=200, greeting="agent_reprompt"))
    assert (run.close_code, run.close_reason, run.close_frame_received) == (
        1011,
        "mock fault",
        True,
    )
    assert run.closed_ns is not None and run.closed_ns - run.t0_ns < 400 * MS
    assert (log.close_sent_code, log.close_sent_reason, log.faults) == (
        1011,
        "mock fault",
        ["close"],
    )
    assert run.received and not _audio_after(run, run.t0_ns + 230 * MS)


async def test_drop_ends_the_connection_without_a_close_frame() -> None:
    run, log = await _faulted_call(MockAgentConfig(drop_after_ms=200, greeting="agent_reprompt"))
    assert not run.close_frame_received and run.close_code == 1006
    assert run.closed_ns is not None and run.closed_ns - run.t0_ns < 400 * MS
    assert len(agent_audio(run, "raw")) >= 5  # greeting audio flowed until the drop
    assert log.close_sent_code is None and log.faults == ["drop"]


@pytest.mark.slow
async def test_stall_stops_reading_and_sending_but_keeps_the_connection() -> None:
    cfg = MockAgentConfig(stall_after_ms=300, greeting="agent_reprompt")
    agent = MockAgent(cfg)
    await agent.start()
    try:
        received: list[int] = []
        async with connect(agent.url, compression=None, ping_interval=None) as ws:
            t_open = time.monotonic_ns()

            async def receive(conn: ClientConnection) -> None:
                try:
                    async for _ in conn:
                        received.append(time.monotonic_ns())
                except ConnectionClosed:
                    pass

            rx = asyncio.create_task(receive(ws))
            for _ in range(40):  # 800 ms of caller silence, still accepted by TCP
                await ws.send(bytes(640))
                await asyncio.sleep(0.02)
            assert ws.state is State.OPEN
            pong = await ws.ping()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(pong, 0.3)
            assert received and max(received) - t_open < 330 * MS
            assert agent.calls[0].faults == ["stall"]
            await agent.stop()
            await asyncio.wait_for(rx, 2)
            assert ws.protocol.close_rcvd is None  # aborted, as a stalled peer would be
    finally:
        await agent.stop()


async def test_garbage_is_sent_once_and_the_call_carries_on() -> None:
    cfg = MockAgentConfig(dialect="twilio", garbage_after_ms=200, greeting="agent_reprompt")
    async with MockAgent(cfg) as agent:
        run = await run_caller(agent.url, "twilio", [], 700)
        log = agent.calls[0]
        await wait_ended(log)
    kinds = [
        "garbage-text" if p == "{not json" else "binary" if not is_text else json.loads(p)["event"]
        for _, is_text, p in run.received
    ]
    i = kinds.index("garbage-text")
    assert kinds.count("garbage-text") == 1 and kinds.count("binary") == 1
    assert kinds[i + 1] == "binary" and len(run.received[i + 1][2]) == 157
    assert kinds[:i] == ["media"] * i and i >= 5
    assert kinds[i + 2 :] and set(kinds[i + 2 :]) == {"media"}
    assert log.faults == ["garbage"]
    assert log.sent_messages == [(is_text, p) for _, is_text, p in run.received]


# -- robustness, configuration, CLI -----------------------------------------------------------


async def test_odd_caller_input_never_breaks_the_call() -> None:
    junk_raw: list[str | bytes] = [
        "{not json",
        "[1, 2]",
        '{"type": "start", "sample_rate": "fast"}',
        '{"type": "start", "sample_rate": 12345}',
        b"\x01",
        b"\x02\x03\x04",
        bytes(4000),
    ]
    junk_twilio: list[str | bytes] = [
        b"\x00\x01",
        "{not json",
        '{"event": "media", "media": {"payload": "%%%"}}',
        '{"event": "start", "start": 5}',
    ]
    raw_agent = MockAgent(MockAgentConfig(greeting="agent_reprompt"))
    tw_agent = MockAgent(MockAgentConfig(dialect="twilio", greeting="agent_reprompt"))
    async with raw_agent, tw_agent:
        raw_run, tw_run = await asyncio.gather(
            run_caller(raw_agent.url, "raw", [], 400, preamble=junk_raw),
            run_caller(tw_agent.url, "twilio", [], 400, preamble=junk_twilio),
        )
        for agent in (raw_agent, tw_agent):
            await wait_ended(agent.calls[0])
    for run, agent in ((raw_run, raw_agent), (tw_run, tw_agent)):
        log = agent.calls[0]
        assert log.errors == []
        assert log.caller_messages == run.sent
        assert log.close_code == 1000
        assert len(log.responses) == 1 and log.responses[0].samples_sent > 0
    assert raw_agent.calls[0].caller_rate_hz == 12345
    assert tw_agent.calls[0].stream_sid == STREAM_SID


async def test_subprotocol_option_picks_among_the_offered() -> None:
    cfg = MockAgentConfig(subprotocols=["b.v2"])
    async with MockAgent(cfg) as agent:
        async with connect(
            agent.url,
            subprotocols=[Subprotocol("a.v1"), Subprotocol("b.v2")],
            compression=None,
        ) as ws:
            assert ws.subprotocol == "b.v2"
        async with connect(agent.url, compression=None) as ws:
            assert ws.subprotocol is None
        await wait_ended(agent.calls[1])
    assert [c.subprotocol for c in agent.calls] == ["b.v2", None]


async def test_run_cli_prints_its_address_and_serves(capsys: pytest.CaptureFixture[str]) -> None:
    task = asyncio.create_task(run_cli(MockAgentConfig(dialect="twilio"), "127.0.0.1", 0))
    try:
        printed: list[str] = []

        def out() -> str:
            printed.append(capsys.readouterr().out)
            return "".join(printed)

        line = await wait_until(out, 3.0, "the address printed")
        m = re.fullmatch(
            r"mock-agent listening on ws://127\.0\.0\.1:(\d+) \(dialect=twilio, mode=paced\)\n",
            line,
        )
        assert m is not None, line
        async with connect(f"ws://127.0.0.1:{m.group(1)}", compression=None) as ws:
            await ws.send(TwilioCallerWire(STREAM_SID, "CA1").connected())
    finally:
        task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
