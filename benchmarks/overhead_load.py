"""The load of ``benchmarks/overhead.py`` (its ``--load`` subprocess mode): an agent and
real-time Twilio callers on the stock websockets asyncio layer, each frame stamped with
its sender's monotonic time so that the receiver reads its one-way latency. Its speech
frames and Twilio ``start`` are ``benchmarks/capacity_load.py``'s too."""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from voxproxy.clips import load_clips
from voxproxy.core.audio.g711 import pcm_to_ulaw

FRAME_MS = 20


def twilio_start(n: int, sid: str) -> str:
    """Twilio's ``start`` message of call ``n`` on stream ``sid`` (mu-law, 8 kHz)."""
    media_format = {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}
    start = {"streamSid": sid, "callSid": f"CA{n:032d}", "accountSid": "AC" + "0" * 32}
    start |= {"tracks": ["inbound"], "mediaFormat": media_format, "customParameters": {}}
    return json.dumps({"event": "start", "sequenceNumber": "1", "start": start, "streamSid": sid})


def _frames(name: str, n: int) -> list[bytes]:
    clips = load_clips()
    pcm = clips[name].pcm
    pcm8 = pcm[: (pcm.size // 2) * 2].reshape(-1, 2).astype(np.int32).mean(axis=1).astype(np.int16)
    ulaw = pcm_to_ulaw(pcm8)
    step = 8 * FRAME_MS
    out = [ulaw[i : i + step] for i in range(0, len(ulaw) - step, step)]
    return [out[i % len(out)] for i in range(n)]


@dataclass
class Stats:
    latencies_ns: list[int] = field(default_factory=list)
    recording: bool = False
    errors: int = 0


async def run_load(
    target_port: int, agent_port: int, calls: int, seconds: float, warmup: float
) -> tuple[Stats, int]:
    import uvloop  # noqa: F401  (the event loop is set up by main)
    from websockets.asyncio.client import connect
    from websockets.asyncio.server import ServerConnection
    from websockets.exceptions import ConnectionClosed

    stats = Stats()
    caller_frames = [base64.b64encode(f).decode() for f in _frames("caller_where_is_order", 400)]
    agent_frames = [base64.b64encode(f).decode() for f in _frames("agent_long_answer", 400)]
    stop_at = [0.0]
    loop = asyncio.get_running_loop()

    def note(message: str | bytes) -> None:
        if not stats.recording:
            return
        msg = json.loads(message)
        stats.latencies_ns.append(time.monotonic_ns() - int(msg["t"]))

    async def paced(send: object, make: object) -> None:
        k = 0
        t0 = loop.time()
        while loop.time() < stop_at[0]:
            k += 1
            delay = t0 + k * FRAME_MS / 1000 - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await send(make(k))  # type: ignore[operator]

    async def agent_handler(ws: ServerConnection) -> None:
        sid = "MZbench"

        def make(k: int) -> str:
            return '{"event":"media","streamSid":"%s","media":{"payload":"%s"},"t":%d}' % (
                sid,
                agent_frames[k % len(agent_frames)],
                time.monotonic_ns(),
            )

        async def recv() -> None:
            async for m in ws:
                if '"media"' in m:
                    note(m)

        r = asyncio.create_task(recv())
        with contextlib.suppress(ConnectionClosed):
            await paced(ws.send, make)
        r.cancel()

    from websockets.asyncio.server import serve

    async def caller(n: int) -> None:
        try:
            async with connect(
                f"ws://127.0.0.1:{target_port}/", compression=None, open_timeout=30
            ) as ws:
                sid = f"MZ{n:032d}"
                await ws.send(
                    json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"})
                )
                await ws.send(twilio_start(n, sid))

                def make(k: int) -> str:
                    return (
                        '{"event":"media","sequenceNumber":"%d","media":{"track":"inbound",'
                        '"chunk":"%d","timestamp":"%d","payload":"%s"},"streamSid":"%s","t":%d}'
                        % (
                            k + 1,
                            k,
                            k * 20,
                            caller_frames[k % len(caller_frames)],
                            sid,
                            time.monotonic_ns(),
                        )
                    )

                async def recv() -> None:
                    async for m in ws:
                        note(m)

                r = asyncio.create_task(recv())
                await paced(ws.send, make)
                # The agent may hang up first at the end of the run: not an error.
                with contextlib.suppress(ConnectionClosed):
                    await ws.send(json.dumps({"event": "stop", "streamSid": sid, "stop": {}}))
                r.cancel()
        except (TimeoutError, OSError, ConnectionClosed) as exc:
            if loop.time() >= stop_at[0] - 0.1:
                return  # the run is over; a close racing the last frame is not an error
            stats.errors += 1
            if stats.errors <= 3:
                print(f"caller {n}: {type(exc).__name__}: {exc}", file=sys.stderr)

    async with serve(agent_handler, "127.0.0.1", agent_port, compression=None):
        stop_at[0] = loop.time() + warmup + seconds + 2.0
        tasks = []
        for n in range(calls):
            tasks.append(asyncio.create_task(caller(n)))
            await asyncio.sleep(0.002)
        await asyncio.sleep(warmup)
        stats.recording = True
        await asyncio.sleep(seconds)
        stats.recording = False
        await asyncio.gather(*tasks)
    return stats, len(stats.latencies_ns)


def load_main(args: argparse.Namespace) -> None:
    import uvloop

    stats, _n = uvloop.run(
        run_load(args.target_port, args.agent_port, args.calls, args.seconds, args.warmup)
    )
    json.dump({"latencies_ns": stats.latencies_ns, "errors": stats.errors}, sys.stdout)
