"""The WebRTC relay under load: CPU per call and added latency, relay path vs transcoding path.

    .venv/bin/python benchmarks/webrtc.py [--calls 50] [--seconds 20]

The proxy (``WebRtcProxy``: relay plus measurement, a ``CallSession`` per call)
runs in a process of its own pinned to CPU 0; the callers and agents run in
this process, pinned to CPU 1. Each caller and each agent sends a 20 ms packet
every 20 ms for the whole run (speech from a fixture clip, looped; calls
staggered over the 20 ms period), as browsers and Pipecat do.

* **relay path**: both legs negotiate Opus; payloads are forwarded unchanged
  and decoded once for measurement;
* **transcoding path**: the agent accepts only PCMU, so each packet is decoded
  and re-encoded (Opus -> PCMU towards the agent, PCMU -> Opus back).

Figures per path:

* ``cpu_per_call_pct``: the proxy process's CPU time over the measured window,
  per call, in % of one core; ``calls_per_core`` = 100 / that;
* ``forward_ms``: inside the proxy, from a packet's arrival (when its
  datagram reached the host: the kernel's stamp) to its departure (written to the
  other leg's socket; with pacing, aiortc's sender taking it, after which it is
  packed, encrypted and written at once), p50/p99/max over all packets;
* ``e2e_added_ms`` (relay path): one-way caller -> agent and agent -> caller
  latency through the proxy minus the same calls made directly, from send and
  arrival times of unchanged payloads (medians and p99s);
* ``codec_delay_ms`` (transcoding path): what decoding and re-encoding move the
  audio by in stream time (resampling, frame buffering, Opus look-ahead),
  measured offline on a tone burst, per direction;
* ``added_latency_ms``: relay = e2e added p50 (worst direction); transcoding =
  forward p50 + codec delay (worst direction);
* ``relay_jitter``: what the relay does to the spacing of the packets it forwards
  (both directions, every call): RFC 3550's transit difference ``|D|`` of the
  packets' arrivals at the proxy (kernel stamps) against their RTP timestamps, of
  their departures (as ``forward_ms``), and the relay's own share
  (the change of the forwarding delay from one packet to the next), p50/p99/max in
  ms, with RFC 3550's running ``J`` averaged; ``caller_arrival_jitter_ms``: ``|D|``
  and ``J`` of the agents' packets as the callers received them (kernel stamps),
  direct and through the proxy: what a caller's jitter buffer sees.

The last line is one JSON object with both paths' figures. The machine is
shared, so tails move from run to run: run it twice. Diagnostics for the proxy
process: ``VOXPROXY_BENCH_PROFILE=FILE`` (cProfile), ``VOXPROXY_BENCH_HIST=1``
(forwarding latency histogram), ``VOXPROXY_BENCH_DEBUG=1`` (asyncio debug,
callbacks over 20 ms logged), ``VOXPROXY_BENCH_GC=off``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import multiprocessing
import os
import resource
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import aiohttp
import numpy as np
import record

from voxproxy.core.timebase import NS_PER_MS

FRAME_NS = 20 * NS_PER_MS


def _pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and cpu < (os.cpu_count() or 1):
        os.sched_setaffinity(0, {cpu})


# -- the proxy process ----------------------------------------------------------------------


def proxy_main(
    conn: Connection,
    upstream: str,
    agent_codecs: list[str] | None,
    measure: bool = True,
    pace_ms: float | None = None,
    stall_ms: float = 0.0,
) -> None:
    _pin(0)
    from voxproxy.proxy.webrtc import WebRtcProxy, WebRtcProxyConfig
    from voxproxy.transports.webrtc import (
        LATENCY_BINS,
        WebRtcRelayConfig,
        use_host_addresses,
    )

    use_host_addresses(["127.0.0.1"])
    if os.environ.get("VOXPROXY_BENCH_GC") == "off":
        import gc

        gc.disable()

    async def main() -> None:
        receipts: list[Any] = []
        proxy = WebRtcProxy(
            WebRtcProxyConfig(
                WebRtcRelayConfig(
                    upstream,
                    agent_codecs=tuple(agent_codecs) if agent_codecs else None,
                    ice_timeout_s=60.0,
                    measure=measure,
                    **({} if pace_ms is None else {"pace_ms": pace_ms}),
                ),
                secret=b"bench",
            ),
            sinks=[receipts.append],
        )
        await proxy.start("127.0.0.1", 0)
        import gc

        gc.freeze()  # as `voxproxy proxy` does once started
        conn.send(proxy.url())
        loop = asyncio.get_running_loop()
        if stall_ms:
            # The proxy's own long callbacks (a turn's analysis, a receipt, the collector):
            # its loop blocked stall_ms every 100 ms, its core otherwise free.

            async def stall() -> None:
                while True:
                    await asyncio.sleep(0.1)
                    time.sleep(stall_ms / 1000)

            stalls = loop.create_task(stall())
            del stalls
        while True:
            cmd = await loop.run_in_executor(None, conn.recv)
            if cmd == "cpu":
                ru = resource.getrusage(resource.RUSAGE_SELF)
                conn.send((ru.ru_utime + ru.ru_stime, time.monotonic(), proxy.active))
            elif cmd == "stats":
                hist = [0] * LATENCY_BINS
                packets = [0, 0, 0, 0]  # passthrough c->a, a->c, transcoded c->a, a->c
                series: list[list[tuple[int, int, int]]] = []
                for relay in proxy.server.relays:
                    for track in (relay.caller.track, relay.agent.track):
                        for i, n in enumerate(track.latency_hist):
                            hist[i] += n
                        track.latency_hist = [0] * LATENCY_BINS
                        if track.departures:
                            series.append(track.departures)
                        track.departures = []  # from now on
                    for i, d in enumerate(relay._dirs):
                        packets[i] += d.passthrough
                        packets[2 + i] += d.transcoded
                conn.send((hist, packets, relay_jitter(series)))
            elif cmd == "stop":
                await proxy.stop()
                conn.send(len(receipts))
                return

    profile = os.environ.get("VOXPROXY_BENCH_PROFILE")  # a file for the proxy's cProfile stats
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    if os.environ.get("VOXPROXY_BENCH_DEBUG"):  # log callbacks that hold the loop > 20 ms
        import logging

        logging.basicConfig(level=logging.WARNING, filename="/tmp/voxproxy-bench-slow.log")

        async def debug_main() -> None:
            asyncio.get_running_loop().slow_callback_duration = 0.02
            await main()

        asyncio.run(debug_main(), debug=True)
    else:
        try:
            import uvloop

            uvloop.run(main())
        except ImportError:
            asyncio.run(main())
    if profile:
        prof.disable()
        prof.dump_stats(f"{profile}.{'transcoding' if agent_codecs else 'relay'}")


def _spread(values: list[float]) -> dict[str, float | None]:
    return {"p50": _pct(values, 50), "p99": _pct(values, 99), "max": _pct(values, 100)}


def transit_jitter(packets: list[tuple[int, int]]) -> tuple[list[float], float]:
    """RFC 3550's transit differences of one stream: for each packet after the first,
    ``|D(i-1, i)|`` in ms (the gap between two arrivals less the gap between their RTP
    timestamps), and the mean of its running jitter estimate ``J`` (section 6.4.1).
    ``packets``: (RTP timestamp in ns, arrival in ns), in arrival order."""
    out: list[float] = []
    j, js = 0.0, []
    for (ts0, t0), (ts1, t1) in itertools.pairwise(packets):
        d = abs((t1 - t0) - (ts1 - ts0)) / NS_PER_MS
        if d > 1000.0:  # a pause in the stream (or its timestamps), not jitter
            continue
        out.append(d)
        j += (d - j) / 16
        js.append(j)
    return out, (sum(js) / len(js) if js else 0.0)


def relay_jitter(series: list[list[tuple[int, int, int]]]) -> dict[str, Any]:
    """What the relay did to the spacing of the packets it forwarded: the inter-arrival
    jitter at the proxy (|D| of arrivals, kernel stamps), the inter-departure jitter (|D|
    of departures), and what the relay added (|change of the forwarding delay| from one
    packet to the next), ms; ``j_*``: RFC 3550's J, its mean over the streams."""
    arr: list[float] = []
    dep: list[float] = []
    added: list[float] = []
    j_in: list[float] = []
    j_out: list[float] = []
    for s in series:
        a, ja = transit_jitter([(ts, t_in) for ts, t_in, _ in s])
        d, jd = transit_jitter([(ts, t_out) for ts, _, t_out in s])
        arr += a
        dep += d
        j_in.append(ja)
        j_out.append(jd)
        fwd = [t_out - t_in for _, t_in, t_out in s]
        added += [abs(y - x) / NS_PER_MS for x, y in itertools.pairwise(fwd)]
    return {
        "arrival_ms": _spread(arr),
        "departure_ms": _spread(dep),
        "added_ms": _spread(added),
        "j_arrival_ms": round(sum(j_in) / len(j_in), 3) if j_in else None,
        "j_departure_ms": round(sum(j_out) / len(j_out), 3) if j_out else None,
        "packets": len(added),
    }


# -- the load side --------------------------------------------------------------------------


@dataclass
class Load:
    """Send and arrival times of unique payloads, per direction."""

    sent: list[dict[bytes, int]] = field(default_factory=lambda: [{}, {}])
    lat_ns: list[list[int]] = field(default_factory=lambda: [[], []])
    # Per receiving peer, (RTP timestamp in ns, kernel arrival) of what it received.
    arrivals: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    recording: bool = False


def _variants(codec: str, n: int, packets: int) -> list[list[bytes]]:
    """``n`` distinct loops of a speech clip, ``packets`` 20 ms payloads each."""
    from voxproxy.clips import clip
    from voxproxy.core.audio.resample import resample_linear
    from voxproxy.transports.webrtc import encode_clip

    c = clip("agent_long_answer")
    rate = 48000 if codec == "opus" else 8000
    pcm = resample_linear(c.pcm, c.sample_rate_hz, rate)
    step = rate // 50
    out = []
    for i in range(n):
        # A different start (and a tiny gain change) per variant: every payload is unique.
        part = pcm[i * 37 : i * 37 + packets * step]
        part = np.clip(part.astype(np.int32) * (1000 + i) // 1000, -32768, 32767).astype(np.int16)
        out.append(encode_clip(codec, part, rate))
    return out


class BenchAgent:
    """A WHIP endpoint whose peers send their loop of payloads every 20 ms."""

    def __init__(self, load: Load, payloads: list[list[bytes]], codecs: tuple[str, ...] | None):
        from voxproxy.transports.webrtc import SignalingServer

        self.load = load
        self.payloads = payloads
        self.codecs = codecs
        self.peers: list[Any] = []
        self.server = SignalingServer(self._open)

    async def _open(self, offer: Any) -> tuple[str, Any]:
        from voxproxy.transports.webrtc import AudioPeer

        peer = AudioPeer(codecs=self.codecs, name="bench-agent")
        answer = await peer.answer(offer.sdp)
        peer.on_rtp = lambda p: _arrived(self.load, 0, p)
        self.peers.append(peer)

        class _S:
            id = f"a{len(self.peers)}"

            async def hang_up(self) -> None:
                await peer.close()

            async def add_candidates(self, c: list[dict[str, Any]]) -> None:
                del c

        return answer, _S()


def _arrived(load: Load, direction: int, p: Any, peer: Any = None) -> None:
    from voxproxy.simcall.webrtc import payload_key

    if not load.recording:
        return
    if direction == 1:  # what a caller's jitter buffer sees
        ts_ns = p.timestamp * 1_000_000_000 // p.codec.clock_rate
        load.arrivals.setdefault(id(peer), []).append((ts_ns, p.t_ns))
    sent = load.sent[direction].get(payload_key(p.payload))
    if sent is not None and 0 < p.t_ns - sent < 1_000_000_000:
        load.lat_ns[direction].append(p.t_ns - sent)


async def _ticker(load: Load, senders: list[tuple[Any, list[bytes], int]], stop: asyncio.Event):
    """Every 20 ms each sender sends its next payload; sender i at offset i mod 20 ms."""
    from voxproxy.simcall.webrtc import payload_key

    t0 = time.monotonic_ns()
    k = 0
    groups = 20
    while not stop.is_set():
        for g in range(groups):
            at = t0 + k * FRAME_NS + g * FRAME_NS // groups
            delay = (at - time.monotonic_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            for i in range(g, len(senders), groups):
                peer, loop_payloads, direction = senders[i]
                payload = loop_payloads[k % len(loop_payloads)]
                if peer.send_encoded(payload):
                    load.sent[direction][payload_key(payload)] = time.monotonic_ns()
        k += 1


def _pct(values: list[int] | list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 2) if len(values) else None


def _hist_pct(hist: list[int], q: float) -> float | None:
    from voxproxy.transports.webrtc import LATENCY_BIN_NS

    total = sum(hist)
    if not total:
        return None
    need = total * q / 100
    acc = 0
    for i, n in enumerate(hist):
        acc += n
        if acc >= need:
            return round((i + 0.5) * LATENCY_BIN_NS / NS_PER_MS, 3)
    return None


PACKETS = 250  # 5 s loops


async def run_path(
    path: str,
    calls: int,
    seconds: float,
    agent_codecs: tuple[str, ...] | None,
    measure: bool = True,
    pace_ms: float | None = None,
    stall_ms: float = 0.0,
) -> dict[str, Any]:
    """One run: ``calls`` callers through a proxy process ("relay", "transcoding") or
    straight to the agents ("direct")."""
    load = Load()
    agent_codec = agent_codecs[0] if agent_codecs else "opus"
    agent = BenchAgent(load, _variants(agent_codec, calls, PACKETS), agent_codecs)
    await agent.server.start()
    if path == "direct":
        out = await run_calls(load, agent, agent.server.url(), calls, seconds, None)
        await agent.server.stop()
        return out
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(
        target=proxy_main,
        args=(
            child,
            agent.server.url(),
            list(agent_codecs) if agent_codecs else None,
            measure,
            pace_ms,
            stall_ms,
        ),
    )
    proc.start()
    loop = asyncio.get_running_loop()
    proxy_url = await loop.run_in_executor(None, parent.recv)
    try:
        out = await run_calls(load, agent, proxy_url, calls, seconds, parent)
        parent.send("stop")
        out["receipts"] = await loop.run_in_executor(None, parent.recv)
    finally:
        await loop.run_in_executor(None, proc.join, 30)
        if proc.is_alive():
            proc.kill()
        await agent.server.stop()
    return out


async def run_calls(
    load: Load,
    agent: BenchAgent,
    url: str,
    calls: int,
    seconds: float,
    proxy_conn: Connection | None,
) -> dict[str, Any]:
    """``calls`` callers offering to ``url`` (the proxy, or the agents themselves)."""
    from voxproxy.transports.webrtc import AudioPeer, post_offer

    caller_loops = _variants("opus", calls, PACKETS)
    callers: list[Any] = []
    async with aiohttp.ClientSession() as http:
        for _ in range(calls):
            peer = AudioPeer(name="bench-caller")
            peer.on_rtp = lambda p, peer=peer: _arrived(load, 1, p, peer)
            answer = await post_offer(http, url, "whip", await peer.create_offer())
            await peer.accept_answer(answer.sdp)
            callers.append(peer)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
            all(p.state == "connected" for p in callers)
            and len(agent.peers) == calls
            and all(p.state == "connected" for p in agent.peers)
        ):
            await asyncio.sleep(0.1)
        connected = sum(p.state == "connected" for p in callers)
        stop = asyncio.Event()
        senders = [(p, caller_loops[i], 0) for i, p in enumerate(callers)] + [
            (p, agent.payloads[i % calls], 1) for i, p in enumerate(agent.peers)
        ]
        tick = asyncio.create_task(_ticker(load, senders, stop))
        await asyncio.sleep(3.0)  # warm-up
        loop = asyncio.get_running_loop()
        if proxy_conn is not None:
            await loop.run_in_executor(None, proxy_conn.send, "stats")  # reset the histograms
            await loop.run_in_executor(None, proxy_conn.recv)
            await loop.run_in_executor(None, proxy_conn.send, "cpu")
            cpu0 = await loop.run_in_executor(None, proxy_conn.recv)
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.monotonic()
        load.recording = True
        await asyncio.sleep(seconds)
        load.recording = False
        wall = time.monotonic() - t0
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        out: dict[str, Any] = {"calls": calls, "connected": connected}
        if proxy_conn is not None:
            await loop.run_in_executor(None, proxy_conn.send, "cpu")
            cpu1 = await loop.run_in_executor(None, proxy_conn.recv)
            await loop.run_in_executor(None, proxy_conn.send, "stats")
            hist, relayed, jitter = await loop.run_in_executor(None, proxy_conn.recv)
            out["relay_jitter"] = jitter
            proxy_cpu = (cpu1[0] - cpu0[0]) / (cpu1[1] - cpu0[1])
            out["proxy_cpu_pct"] = round(100 * proxy_cpu, 1)
            out["cpu_per_call_pct"] = round(100 * proxy_cpu / calls, 3)
            out["calls_per_core"] = round(calls / proxy_cpu, 1) if proxy_cpu else None
            if os.environ.get("VOXPROXY_BENCH_HIST"):
                from voxproxy.transports.webrtc import LATENCY_BIN_NS

                shape = {}
                for i, n in enumerate(hist):
                    if n:
                        ms = int(i * LATENCY_BIN_NS / NS_PER_MS)
                        bucket = ms if ms < 5 else (ms // 10) * 10
                        shape[bucket] = shape.get(bucket, 0) + n
                print("forward histogram (ms: packets):", shape, file=sys.stderr)
            out["forward_ms"] = {
                "p50": _hist_pct(hist, 50),
                "p99": _hist_pct(hist, 99),
                "max": _hist_pct(hist, 100),
                "packets": sum(hist),
            }
            out["packets"] = {
                "passthrough": relayed[0] + relayed[1],
                "transcoded": relayed[2] + relayed[3],
            }
        load_cpu = (ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime) / wall
        out["load_side_cpu_pct"] = round(100 * load_cpu, 1)
        far: list[float] = []
        far_j: list[float] = []
        for series in load.arrivals.values():
            d_ms, j = transit_jitter(series)
            far += d_ms
            far_j.append(j)
        out["caller_arrival_jitter_ms"] = {
            **_spread(far),
            "j": round(sum(far_j) / len(far_j), 3) if far_j else None,
        }
        for d, name in ((0, "caller_to_agent"), (1, "agent_to_caller")):
            ms = [x / NS_PER_MS for x in load.lat_ns[d]]
            out[f"e2e_{name}_ms"] = {"p50": _pct(ms, 50), "p99": _pct(ms, 99), "n": len(ms)}
        stop.set()
        await tick
        for p in callers:
            await p.close()
        for p in agent.peers:
            await p.close()
    return out


def codec_delays() -> dict[str, float]:
    """Stream-time shift that transcoding adds, per direction (a tone burst's onset)."""
    from voxproxy.transports.webrtc import AudioDecoder, AudioEncoder, default_codec

    opus, pcmu = default_codec("opus"), default_codec("pcmu")

    def burst(rate: int) -> np.ndarray:
        x = np.zeros(rate, dtype=np.int16)
        n = np.arange(rate // 2)
        x[rate // 4 : rate // 4 + n.size] = (8000 * np.sin(2 * np.pi * 440 * n / rate)).astype(
            np.int16
        )
        return x

    def first_loud(pcm: np.ndarray, rate: int) -> float:
        return 1000.0 * int(np.argmax(np.abs(pcm.astype(np.int32)) > 2000)) / rate

    def through(pcm: np.ndarray, rate: int, src: Any, dst: Any) -> tuple[float, float]:
        """(onset after the source codec alone, onset after source -> transcode -> dst)."""
        enc = AudioEncoder(src)
        dec_src = AudioDecoder(src)
        re = AudioEncoder(dst)
        dec_dst = AudioDecoder(dst)
        direct, relayed = [], []
        step = rate // 50
        for k in range(0, pcm.size, step):
            for p in enc.encode(pcm[k : k + step], rate):
                x = dec_src.decode(p, 0)
                direct.append(x)
                for q in re.encode(x, dec_src.sample_rate_hz):
                    relayed.append(dec_dst.decode(q, 0))
        a = first_loud(np.concatenate(direct), dec_src.sample_rate_hz)
        b = first_loud(np.concatenate(relayed), dec_dst.sample_rate_hz)
        return a, b

    a1, b1 = through(burst(48000), 48000, opus, pcmu)
    a2, b2 = through(burst(8000), 8000, pcmu, opus)
    return {"caller_to_agent": round(b1 - a1, 2), "agent_to_caller": round(b2 - a2, 2)}


async def load_main(args: argparse.Namespace) -> dict[str, Any]:
    from voxproxy.transports.webrtc import use_host_addresses

    use_host_addresses(["127.0.0.1"])
    results: dict[str, Any] = {}
    for path, codecs, calls in (
        ("direct", None, args.calls),
        ("relay", None, args.calls),
        ("transcoding", ("pcmu",), args.transcoding_calls or args.calls),
    ):
        out = await run_path(
            path, calls, args.seconds, codecs, not args.no_measure, args.pace_ms, args.stall_ms
        )
        fwd = out.get("forward_ms", {}).get("p50")
        if fwd is not None:
            out["saturated"] = fwd > 20.0  # the proxy no longer keeps up in real time
        results[path] = out
        print(f"{path}: {json.dumps(out)}", flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--transcoding-calls",
        type=int,
        default=25,
        help="calls for the transcoding path (0: as many as --calls); at 50 it saturates a core",
    )
    parser.add_argument(
        "--pace-ms",
        type=float,
        default=None,
        help="the relay's pacing constant (default: WebRtcRelayConfig's; 0: no pacing)",
    )
    parser.add_argument(
        "--stall-ms",
        type=float,
        default=0.0,
        help="block the proxy's event loop this long every 100 ms (its own long callbacks)",
    )
    parser.add_argument(
        "--no-measure", action="store_true", help="relay only (no decoding, no CallSession)"
    )
    record.add_flag(parser)
    args = parser.parse_args()
    _pin(1)
    delays = codec_delays()
    results = asyncio.run(load_main(args))
    direct, relay, trans = results["direct"], results["relay"], results["transcoding"]

    def added(path: dict[str, Any], q: str) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for d in ("caller_to_agent", "agent_to_caller"):
            a, b = path[f"e2e_{d}_ms"][q], direct[f"e2e_{d}_ms"][q]
            out[d] = None if a is None or b is None else round(a - b, 2)
        return out

    relay["e2e_added_ms"] = {"p50": added(relay, "p50"), "p99": added(relay, "p99")}
    relay["added_latency_p99_ms"] = max(
        (v for v in relay["e2e_added_ms"]["p99"].values() if v is not None), default=None
    )
    trans["codec_delay_ms"] = delays
    relay_added = max(v for v in relay["e2e_added_ms"]["p50"].values() if v is not None)
    trans_added = (trans["forward_ms"]["p50"] or 0.0) + max(delays.values())
    relay["added_latency_ms"] = round(relay_added, 2)
    trans["added_latency_ms"] = round(trans_added, 2)
    print()
    print(f"{'':28s}{'relay':>14s}{'transcoding':>14s}")
    for label, key in (
        ("calls", "calls"),
        ("proxy CPU, % of a core", "proxy_cpu_pct"),
        ("CPU per call, % of a core", "cpu_per_call_pct"),
        ("calls per core", "calls_per_core"),
        ("added latency, ms", "added_latency_ms"),
    ):
        print(f"{label:28s}{relay.get(key)!s:>14s}{trans.get(key)!s:>14s}")
    print(
        f"{'forward p50/p99, ms':28s}"
        f"{relay['forward_ms']['p50']!s:>7s}/{relay['forward_ms']['p99']!s:<6s}"
        f"{trans['forward_ms']['p50']!s:>7s}/{trans['forward_ms']['p99']!s:<6s}"
    )

    def jit(path: dict[str, Any], key: str) -> str:
        j = path.get("relay_jitter", {}).get(key, {})
        return f"{j.get('p50')!s}/{j.get('p99')!s}/{j.get('max')!s}"

    for label, key in (
        ("|D| arrivals p50/p99/max", "arrival_ms"),
        ("|D| departures p50/p99/max", "departure_ms"),
        ("added by relay p50/p99/max", "added_ms"),
    ):
        print(f"{label:28s}{jit(relay, key):>20s}{jit(trans, key):>20s}")
    print(f"{'':28s}{'direct':>14s}{'relay':>14s}")
    far = [p["caller_arrival_jitter_ms"] for p in (direct, relay)]
    print(
        f"{'|D| at callers p99/max':28s}"
        + "".join(f"{str(f['p99']) + '/' + str(f['max']):>14s}" for f in far)
    )
    print(f"{'J at callers (RFC 3550)':28s}" + "".join(f"{f['j']!s:>14s}" for f in far))
    goal = {
        "calls_per_core_ge_50": bool(relay.get("calls_per_core") and relay["calls_per_core"] >= 50),
        "relay_added_latency_le_20ms": relay["added_latency_ms"] <= 20.0,
        "relay_added_latency_p99_le_20ms": (relay["added_latency_p99_ms"] or 1e9) <= 20.0,
    }
    record.finish(
        "webrtc", {"direct": direct, "relay": relay, "transcoding": trans, "goal": goal}, args
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
