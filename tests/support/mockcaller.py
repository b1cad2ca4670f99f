"""A test caller for the mock agent over loopback: caller audio sent in 20 ms frames on
absolute deadlines, everything that comes back recorded with its arrival time, and the
agent's audio read back out of it (tests/mockagent)."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from support.waiting import wait_until
from voxproxy.clips import clip
from voxproxy.core.audio.g711 import pcm_to_ulaw, ulaw_to_pcm
from voxproxy.core.audio.levels import window_energy_db
from voxproxy.core.dialects.twilio import TwilioCallerWire
from voxproxy.core.events import Pcm
from voxproxy.mockagent import CallLog
from voxproxy.mockagent.config import halve_rate

MS = 1_000_000
FRAME_MS = 20
STREAM_SID = "MZ0123456789abcdef0123456789abcdef"
SPEECH_DBFS = -50.0  # the fixture manifest's truth rule


# -- a test caller --------------------------------------------------------------------------


def at_rate(pcm: Pcm, rate: int) -> Pcm:
    return pcm if rate == 16000 else halve_rate(pcm)


def render(script: Sequence[tuple[str, float]], total_ms: float, rate: int) -> Pcm:
    """Caller audio: each (clip, start_ms) placed on a silent timeline."""
    out = np.zeros(round(total_ms * rate / 1000), dtype=np.int16)
    for name, start_ms in script:
        pcm = at_rate(clip(name).pcm, rate)
        a = round(start_ms * rate / 1000)
        out[a : a + pcm.size] = pcm[: out.size - a]
    return out


@dataclass
class CallerRun:
    t0_ns: int = 0  # clock time of caller sample 0 (frame k is sent when it has been "heard")
    sent: list[tuple[bool, bytes | str]] = field(default_factory=list)
    received: list[tuple[int, bool, bytes | str]] = field(default_factory=list)
    subprotocol: str | None = None
    close_code: int | None = None
    close_reason: str | None = None
    close_frame_received: bool = False
    closed_ns: int | None = None

    def true_ns(self, start_ms: float, at_ms: float) -> int:
        """Clock time of a point ``at_ms`` into a clip placed at ``start_ms``."""
        return self.t0_ns + round((start_ms + at_ms) * MS)

    def texts(self) -> list[tuple[int, str]]:
        return [(t, p) for t, is_text, p in self.received if is_text and isinstance(p, str)]


async def run_caller(
    url: str,
    dialect: str,
    script: Sequence[tuple[str, float]],
    total_ms: float,
    *,
    rate: int = 16000,
    preamble: Sequence[str | bytes] = (),
    subprotocols: Sequence[str] | None = None,
    headers: dict[str, str] | None = None,
    close: tuple[int, str] = (1000, ""),
    stop_audio_ms: float | None = None,
) -> CallerRun:
    """Send caller audio in 20 ms frames on absolute deadlines; record what comes back.

    With ``stop_audio_ms`` no frames are sent after that point (the connection
    stays open until ``total_ms``).
    """
    if dialect == "twilio":
        rate = 8000
    pcm = render(script, total_ms, rate)
    run = CallerRun()
    wire = TwilioCallerWire(STREAM_SID, "CA" + "1" * 32)
    frame = rate * FRAME_MS // 1000
    async with connect(
        url,
        subprotocols=[Subprotocol(p) for p in subprotocols] if subprotocols else None,
        additional_headers=headers,
        compression=None,
        ping_interval=None,
    ) as ws:
        run.subprotocol = ws.subprotocol

        async def send(message: str | bytes) -> None:
            await ws.send(message)
            run.sent.append((isinstance(message, str), message))

        async def receive() -> None:
            try:
                async for message in ws:
                    run.received.append((time.monotonic_ns(), isinstance(message, str), message))
            except ConnectionClosed:
                pass

        rx = asyncio.create_task(receive())
        try:
            for message in preamble:
                await send(message)
            if dialect == "twilio":
                await send(wire.connected())
                await send(wire.start())
            run.t0_ns = time.monotonic_ns()
            for k in range(pcm.size // frame):
                deadline = run.t0_ns + (k + 1) * FRAME_MS * MS
                delay = (deadline - time.monotonic_ns()) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
                if stop_audio_ms is not None and (k + 1) * FRAME_MS > stop_audio_ms:
                    continue
                chunk = pcm[k * frame : (k + 1) * frame]
                if dialect == "twilio":
                    await send(wire.media(pcm_to_ulaw(chunk)))
                else:
                    await send(chunk.astype("<i2").tobytes())
            await ws.close(*close)
        except ConnectionClosed:
            pass
        await rx
        run.closed_ns = time.monotonic_ns()
        run.close_code = ws.close_code
        run.close_reason = ws.close_reason
        run.close_frame_received = ws.protocol.close_rcvd is not None
    return run


async def wait_ended(log: CallLog, timeout_s: float = 3.0) -> None:
    await wait_until(lambda: log.ended_ns is not None, timeout_s, "the agent's call log ended")


# -- reading the agent's audio --------------------------------------------------------------


def agent_audio(run: CallerRun, dialect: str) -> list[tuple[int, Pcm]]:
    """(arrival, samples) of every agent audio message."""
    out: list[tuple[int, Pcm]] = []
    for t, is_text, payload in run.received:
        if dialect == "raw" and not is_text and isinstance(payload, bytes):
            out.append((t, np.frombuffer(payload, dtype="<i2").astype(np.int16)))
        elif dialect == "twilio" and isinstance(payload, str):
            msg = json.loads(payload)
            if msg["event"] == "media":
                out.append((t, ulaw_to_pcm(base64.b64decode(msg["media"]["payload"]))))
    return out


def speech_play_ns(chunks: Sequence[tuple[int, Pcm]], rate: int) -> int:
    """When the first speech sample plays, with playout start = max(arrival, cursor)."""
    cursor = 0
    win = rate // 1000
    for t, pcm in chunks:
        start = max(t, cursor)
        cursor = start + pcm.size * 1_000_000_000 // rate
        above = np.nonzero(window_energy_db(pcm, win) > SPEECH_DBFS)[0]
        if above.size:
            return start + int(above[0]) * MS
    raise AssertionError("no agent speech received")


def gaps_ms(times: Sequence[int]) -> list[float]:
    return [(b - a) / MS for a, b in itertools.pairwise(times)]
