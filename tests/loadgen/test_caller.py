"""A scripted caller's paced frames reach the other end whole and in order, whether the
socket takes them at once or they wait their turn behind a full write buffer."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from websockets.asyncio.server import ServerConnection, serve

from voxproxy.clips import clip
from voxproxy.loadgen import caller as caller_mod
from voxproxy.loadgen.caller import CallerConfig, CallRecord, Say, ScriptedCaller, Silence
from voxproxy.loadgen.pacing import pacer


async def _call(calls: int) -> tuple[list[CallRecord], dict[str, list[str | bytes]]]:
    got: dict[str, list[str | bytes]] = {}

    async def handler(ws: ServerConnection) -> None:
        assert ws.request is not None
        got[ws.request.path] = [m async for m in ws]

    async with serve(handler, "127.0.0.1", 0, compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        callers = [
            ScriptedCaller(
                CallerConfig(
                    url=f"ws://127.0.0.1:{port}/{n}",
                    dialect="twilio",
                    call_id=f"CA{n:032d}",
                    tail_ms=100.0,
                ),
                [Say(clip("caller_hello")), Silence(200.0)],
            )
            for n in range(calls)
        ]
        records = await asyncio.gather(*(c.run() for c in callers))
        assert len(pacer()) == 0  # every sender left the shared pacer
    return records, got


@pytest.mark.parametrize("write_limit", [caller_mod.WRITE_LIMIT, -1])
def test_every_frame_arrives_once_in_order(
    write_limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # -1: the write buffer always counts as full, so every frame takes the queued path
    monkeypatch.setattr(caller_mod, "WRITE_LIMIT", write_limit)
    records, got = asyncio.run(_call(3))
    c = clip("caller_hello")
    clip_frames = -(-round(c.pcm.size * 8000 / c.sample_rate_hz) // 160)
    for n, rec in enumerate(records):
        assert rec.error is None
        assert got[f"/{n}"] == rec.messages_sent  # all of them, in order, nothing else
        media = [m for m in rec.messages_sent if isinstance(m, str) and '"media"' in m]
        assert len(media) == len(rec.pacing_lag_ns)  # one lag per frame sent
        assert len(media) >= clip_frames  # the whole clip was sent before the silence
        seqs = [int(json.loads(m)["sequenceNumber"]) for m in media]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def _heard(chunks: list[tuple[int, int, str | None]], flush_at: int | None = None) -> CallRecord:
    """A caller fed agent audio directly: (arrival ms, samples, item id) per message."""
    from voxproxy.core.events import AGENT_TO_CALLER, Audio

    c = ScriptedCaller(CallerConfig(url="ws://unused", dialect="twilio"), [])
    for t_ms, n, item in chunks:
        t = t_ms * 1_000_000
        if flush_at is not None and t >= flush_at * 1_000_000 > 0:
            c._agent_flush(flush_at * 1_000_000)
            flush_at = None
        pcm = np.full(n, 1000, dtype=np.int16)
        c._agent_audio(Audio(AGENT_TO_CALLER, pcm, 8000, t, item), t)
    if flush_at is not None:
        c._agent_flush(flush_at * 1_000_000)
    return c.record


def test_a_run_of_agent_audio_is_one_chunk_with_the_same_play_times() -> None:
    # 20 ms messages arriving in a burst (queued ahead: contiguous on the timeline), a
    # gap, a run arriving in real time, a gap, two messages of odd sizes.
    msgs = [(1000 + k, 160, None) for k in range(10)]
    msgs += [(2000 + 20 * k, 160, None) for k in range(5)]
    msgs += [(2200, 161, None), (2200, 163, None)]
    rec = _heard(msgs)
    assert [(c.stream_pos, c.n) for c in rec.agent_chunks] == [(0, 1600), (1600, 800), (2400, 324)]
    # Every sample plays when the messages apart put it (Playout: n * 1e9 // rate each).
    ns = 1_000_000_000 // 8000
    assert rec.play_time(0) == 1000 * 1_000_000
    assert rec.play_time(1599) == 1000 * 1_000_000 + 1599 * ns
    assert rec.play_time(1600) == 2000 * 1_000_000
    assert rec.play_time(2399) == 2000 * 1_000_000 + 799 * ns
    assert rec.play_time(2400 + 161) == 2200 * 1_000_000 + 161 * ns
    assert rec.play_time(2400 + 324) is None


def test_a_flush_cuts_a_merged_run_where_it_cut_the_messages() -> None:
    msgs = [(1000 + k, 160, "i1") for k in range(10)]  # 200 ms queued from 1000 ms
    rec = _heard(msgs, flush_at=1050)  # 50 ms played, the rest never will be
    assert [(c.stream_pos, c.n) for c in rec.agent_chunks] == [(0, 400)]
    assert rec.play_time(399) is not None and rec.play_time(400) is None


@pytest.mark.parametrize("bed", [None, "noise_babble"])
def test_a_caller_reads_the_truth_of_its_clips_before_its_call_not_on_its_clock(
    bed: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first level reading imports scipy and each takes tens of ms: read when the first
    # Say ran, it stalled the loop 1.1-1.4 s after the call began (the proxy and the agent
    # share it in the tests), and the caller's first words left in one burst, which the
    # agent heard nothing in (tests/proxy/test_eventapi.py's live call, whose agent then
    # answered one turn late). A caller made reads them all; its script then reads none.
    from voxproxy.core.analysis import truth
    from voxproxy.loadgen.caller import BargeIn, NoiseBed

    for cache in ("_THRESHOLDS", "_CARRIED", "_NAMED"):  # nothing read before this test
        monkeypatch.setattr(truth, cache, {})
    said = [clip("caller_hello"), clip("caller_interrupt")]
    config = CallerConfig(
        url="ws://unused",
        dialect="twilio",
        noise_bed=None if bed is None else NoiseBed(clip(bed), 20.0),
    )
    c = ScriptedCaller(config, [Say(said[0]), BargeIn(after_ms=700, clip=said[1])])

    def no_reading(*_a: object) -> None:
        raise AssertionError("a level read on the caller's clock")

    monkeypatch.setattr(truth, "truth_threshold_dbfs", no_reading)
    c._sending_over = True  # no socket: each Say records its truth and returns

    async def say_all() -> None:
        for x in said:
            await c._say(Say(x))

    asyncio.run(say_all())
    assert [s.clip for s in c.record.speech] == ["caller_hello", "caller_interrupt"]
