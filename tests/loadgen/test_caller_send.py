"""A scripted caller's paced frames reach the other end whole and in order, whether the
socket takes them at once or they wait their turn behind a full write buffer."""

from __future__ import annotations

import asyncio
import json

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
                [Say(clip("caller_iban")), Silence(200.0)],
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
    c = clip("caller_iban")
    clip_frames = -(-round(c.pcm.size * 8000 / c.sample_rate_hz) // 160)
    for n, rec in enumerate(records):
        assert rec.error is None
        assert got[f"/{n}"] == rec.messages_sent  # all of them, in order, nothing else
        media = [m for m in rec.messages_sent if isinstance(m, str) and '"media"' in m]
        assert len(media) == len(rec.pacing_lag_ns)  # one lag per frame sent
        assert len(media) >= clip_frames  # the whole clip was sent before the silence
        seqs = [int(json.loads(m)["sequenceNumber"]) for m in media]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
