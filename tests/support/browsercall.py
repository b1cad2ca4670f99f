"""One call from headless Chromium through voxproxy (webrtc) to the WebRTC mock agent.

Run it inside a private network namespace with only loopback (docs/protocols.md
section 8: even with 127.0.0.1 offered on both sides Chromium may pair a
candidate on an outside interface)::

    unshare -n sh -c 'ip link set lo up && exec python tests/support/browsercall.py --out r.json'

What happens:

* a WAV is written: 1 s of silence, a fixture caller clip, then silence; it is
  Chromium's fake microphone (``--use-file-for-fake-audio-capture=...%noloop``);
* the page (served from a third origin, so CORS is exercised) creates its peer
  connection and an ``oai-events`` channel, offers to the proxy by WHIP with
  ``fetch``, waits to be connected, and only then calls ``getUserMedia`` and
  swaps the microphone track in (the fake device starts playing during
  ``getUserMedia``). An AudioWorklet watches its own copy of the microphone to
  find when the file's first loud sample played, and the agent's audio (played
  into a muted ``<audio>`` element) to find when its speech was heard;
* Chromium is driven over the DevTools protocol (a websocket); the page's clock
  (``performance.timeOrigin + performance.now()``) is tied to this process's
  monotonic clock by the round trip with the smallest delay;
* after the agent's answer, the page hangs up with a WHIP ``DELETE``.

The result (JSON): the receipt, the proxy's call start, the agent's responses,
the page's measurements and the clock mapping, all in this process's
``time.monotonic_ns`` (milliseconds as floats).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import websockets
from aiohttp import web

try:
    from support.child import stop
    from support.waiting import wait_until
except ImportError:  # run as a script (see above): this folder is first on the path
    from child import stop  # type: ignore[no-redef]
    from waiting import wait_until  # type: ignore[no-redef]

from voxproxy.clips import clip, write_wav
from voxproxy.core.audio.resample import resample_linear
from voxproxy.core.receipt import Receipt
from voxproxy.core.session import SessionConfig
from voxproxy.mockagent import MockAgentConfig
from voxproxy.mockagent.webrtc import WebRtcMockAgent
from voxproxy.proxy.webrtc import WebRtcProxy, WebRtcProxyConfig
from voxproxy.transports.webrtc import WebRtcRelayConfig, use_host_addresses

RATE = 48000
LEAD_MS = 1000.0
TAIL_MS = 9000.0
THRESHOLD = 64  # int16: the first sample above it marks the file's start in the page's copy
CALLER_CLIP = "caller_where_is_order"
AGENT_CLIP = "agent_confirm"
AGENT_DELAY_MS = 700.0
# The playout delay declared for this caller (the proxy's downstream_offset_ms): headless
# Chromium's floor as this page hears it, NetEq's least target (20-23 ms here), its 10 ms
# output chunks and the page's own WebAudio copy (docs/measurement.md).
DOWNSTREAM_OFFSET_MS = 40.0

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream",
    "--allow-loopback-in-peer-connection",
    "--disable-features=WebRtcHideLocalIpsWithMdns",
    "--autoplay-policy=no-user-gesture-required",
    "--remote-debugging-port=0",
]

WORKLET = r"""
class Edges extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.name = options.processorOptions.name;
    this.threshold = options.processorOptions.threshold / 32768;
    this.first = null;
    this.win = Math.round(sampleRate / 100);  // 10 ms windows
    this.acc = 0; this.n = 0; this.start = null;
  }
  process(inputs) {
    const ch = inputs[0] && inputs[0][0];
    if (!ch) return true;
    for (let i = 0; i < ch.length; i++) {
      const x = ch[i];
      if (this.first === null && Math.abs(x) > this.threshold) {
        this.first = currentTime + i / sampleRate;
        this.port.postMessage({kind: 'first', name: this.name, t: this.first});
      }
      if (this.start === null) this.start = currentTime + i / sampleRate;
      this.acc += x * x; this.n++;
      if (this.n === this.win) {
        const db = 10 * Math.log10(this.acc / this.n + 1e-12);
        this.port.postMessage({kind: 'level', name: this.name, t: this.start, db: db});
        this.acc = 0; this.n = 0; this.start = null;
      }
    }
    return true;
  }
}
registerProcessor('edges', Edges);
"""

PAGE = r"""<!doctype html><html><body><audio id="remote" muted autoplay></audio>
<script>
const WORKLET = %WORKLET%;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.timeOrigin + performance.now();
window.runCall = async (whipUrl, holdMs, threshold) => {
  const out = {events: {}, first: {}, levels: {mic: [], remote: []}, errors: []};
  const ctx = new AudioContext({sampleRate: 48000});
  await ctx.audioWorklet.addModule(
    URL.createObjectURL(new Blob([WORKLET], {type: 'application/javascript'})));
  // Context time -> page time: ctx.currentTime (the context time being processed now; it
  // moves in steps, one per audio callback) against the page clock, taken right after it
  // steps, the smallest difference over 80 ms of polling. (getOutputTimestamp() would give
  // the time the sample reaches the speaker, later by the output latency.)
  const ctxOffset = () => {
    let best = Infinity, last = ctx.currentTime;
    const end = performance.now() + 80;
    while (performance.now() < end) {
      const c = ctx.currentTime, p = now();
      if (c !== last) { best = Math.min(best, p - c * 1000); last = c; }
    }
    return best;
  };
  const raw = {first: {}, levels: {mic: [], remote: []}};
  const watch = (stream, name) => {
    const node = new AudioWorkletNode(ctx, 'edges', {processorOptions: {name, threshold}});
    node.port.onmessage = (ev) => {
      const m = ev.data;
      if (m.kind === 'first') raw.first[name] = m.t;
      else raw.levels[name].push([m.t, m.db]);
    };
    ctx.createMediaStreamSource(stream).connect(node);
    node.connect(ctx.destination);  // keep it pulled (it outputs silence)
  };
  const pc = new RTCPeerConnection({iceServers: []});
  const tr = pc.addTransceiver('audio', {direction: 'sendrecv'});
  const dc = pc.createDataChannel('oai-events');
  dc.onmessage = (ev) => { out.channel = ev.data; };
  dc.onopen = () => dc.send('{"type":"session.update","session":{}}');
  pc.ontrack = (ev) => {
    const el = document.getElementById('remote');
    el.srcObject = new MediaStream([ev.track]);
    el.muted = true; el.play().catch(() => {});
    watch(el.srcObject, 'remote');
  };
  await pc.setLocalDescription(await pc.createOffer());
  while (pc.iceGatheringState !== 'complete') await sleep(10);
  out.candidates = pc.localDescription.sdp.split('\r\n').filter((l) => l.startsWith('a=candidate'));
  const resp = await fetch(whipUrl, {method: 'POST', headers: {'Content-Type': 'application/sdp'},
                                     body: pc.localDescription.sdp});
  out.status = resp.status;
  const answer = await resp.text();
  if (resp.status !== 201) { out.errors.push(answer); return out; }
  out.location = new URL(resp.headers.get('Location'), whipUrl).href;
  await pc.setRemoteDescription({type: 'answer', sdp: answer});
  for (let i = 0; i < 1000 && pc.connectionState !== 'connected'; i++) await sleep(10);
  out.events.connected = now();
  out.latency = {base: ctx.baseLatency, output: ctx.outputLatency};
  const offsetBefore = ctxOffset();
  out.connectionState = pc.connectionState;
  out.events.gum_called = now();
  const mic = await navigator.mediaDevices.getUserMedia({audio: {
    echoCancellation: false, noiseSuppression: false, autoGainControl: false}});
  out.events.gum_resolved = now();
  watch(mic, 'mic');
  await tr.sender.replaceTrack(mic.getAudioTracks()[0]);
  out.events.track_swapped = now();
  const until = now() + holdMs;
  while (now() < until) await sleep(100);
  const offsetAfter = ctxOffset();
  out.ctx_offset_ms = {before: offsetBefore, after: offsetAfter};
  const map = (t) => t * 1000 + (offsetBefore + offsetAfter) / 2;
  for (const name of ['mic', 'remote']) {
    if (raw.first[name] !== undefined) out.first[name] = map(raw.first[name]);
    out.levels[name] = raw.levels[name].map(([t, db]) => [map(t), db]);
  }
  const stats = await pc.getStats();
  stats.forEach((s) => { if (s.type === 'inbound-rtp' && s.kind === 'audio') out.inbound = {
    packetsReceived: s.packetsReceived, jitterBufferDelay: s.jitterBufferDelay,
    jitterBufferEmittedCount: s.jitterBufferEmittedCount,
    jitterBufferTargetDelay: s.jitterBufferTargetDelay,
    jitterBufferMinimumDelay: s.jitterBufferMinimumDelay, jitter: s.jitter}; });
  const del = await fetch(out.location, {method: 'DELETE'});
  out.delete_status = del.status;
  out.events.hung_up = now();
  pc.close();
  return out;
};
</script></body></html>"""


def make_wav(path: Path) -> dict[str, float]:
    """The fake microphone's file; returns its known edges (ms from its first sample)."""
    c = clip(CALLER_CLIP)
    speech = resample_linear(c.pcm, c.sample_rate_hz, RATE)
    lead = np.zeros(int(LEAD_MS * RATE / 1000), dtype=np.int16)
    tail = np.zeros(int(TAIL_MS * RATE / 1000), dtype=np.int16)
    pcm = np.concatenate((lead, speech, tail))
    write_wav(path, pcm, RATE)
    first = int(np.argmax(np.abs(pcm.astype(np.int32)) > THRESHOLD))
    return {
        "first_loud_ms": 1000.0 * first / RATE,
        "onset_ms": LEAD_MS + c.onset_ms,
        "offset_ms": LEAD_MS + c.offset_ms,
        "duration_ms": 1000.0 * pcm.size / RATE,
    }


async def _devtools_port(user_data: Path, proc: subprocess.Popen[bytes]) -> int:
    marker = user_data / "DevToolsActivePort"

    def port() -> int | None:
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with {proc.returncode}")
        text = marker.read_text().split() if marker.exists() else []
        return int(text[0]) if text else None

    return await wait_until(port, 15.0, "chromium's DevTools port")


class Cdp:
    """A minimal DevTools protocol client for one page."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.next_id = 0

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        my_id = self.next_id
        await self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(await self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                result: dict[str, Any] = msg.get("result", {})
                return result

    async def evaluate(self, expression: str, timeout_s: float = 60.0) -> Any:
        async with asyncio.timeout(timeout_s):
            r = await self.call(
                "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
            )
        if "exceptionDetails" in r:
            raise RuntimeError(f"page error: {r['exceptionDetails']}")
        return r["result"].get("value")


@asynccontextmanager
async def chromium_page(
    chromium: str, flags: Sequence[str], user_data: Path, url: str
) -> AsyncIterator[Cdp]:
    """Chromium started with ``flags`` (its profile in ``user_data``), one page opened at
    ``url`` and driven over the DevTools protocol for the block; Chromium is stopped at
    its end."""
    proc = subprocess.Popen(
        [chromium, *flags, f"--user-data-dir={user_data}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port = await _devtools_port(user_data, proc)
        async with aiohttp.ClientSession() as http:
            async with http.put(f"http://127.0.0.1:{port}/json/new?{url}") as resp:
                target = await resp.json()
        async with websockets.connect(target["webSocketDebuggerUrl"], max_size=None) as ws:
            yield Cdp(ws)
    finally:
        stop(proc)


async def run(out_path: Path, chromium: str) -> dict[str, Any]:
    use_host_addresses(["127.0.0.1"])
    work = Path(tempfile.mkdtemp(prefix="voxproxy-browser-"))
    wav = work / "mic.wav"
    truth = make_wav(wav)
    agent = WebRtcMockAgent(
        MockAgentConfig(delay_ms=AGENT_DELAY_MS, responses=(AGENT_CLIP,), reaction_ms=150.0),
        idle="silence",
    )
    await agent.start()
    receipts: list[Receipt] = []
    starts: list[int] = []
    proxy = WebRtcProxy(
        WebRtcProxyConfig(
            WebRtcRelayConfig(agent.url(), ice_timeout_s=20.0),
            secret=b"browser",
            session=SessionConfig(downstream_offset_ms=DOWNSTREAM_OFFSET_MS),
        ),
        sinks=[receipts.append],
    )
    factory = proxy.server.observer_factory

    def observe(t_ns: int, offer: Any) -> Any:
        starts.append(t_ns)
        return factory(t_ns, offer)

    proxy.server.observer_factory = observe
    await proxy.start("127.0.0.1", 0)
    page = PAGE.replace("%WORKLET%", json.dumps(WORKLET))
    app = web.Application()
    app.router.add_get("/", lambda r: web.Response(text=page, content_type="text/html"))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    page_port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    flags = [*CHROMIUM_FLAGS, f"--use-file-for-fake-audio-capture={wav}%noloop"]
    result: dict[str, Any] = {"truth_file": truth}
    try:
        page_url = f"http://127.0.0.1:{page_port}/"
        async with chromium_page(chromium, flags, work / "profile", page_url) as cdp:

            async def loaded() -> bool:
                # The page's own script has run (readyState alone may still be about:blank's).
                return bool(await cdp.evaluate("typeof window.runCall === 'function'"))

            await wait_until(loaded, what="the page loaded")
            # Tie the page's clock to ours: the round trip with the smallest delay wins.
            best: tuple[int, float] | None = None
            for _ in range(20):
                t1 = time.monotonic_ns()
                page_ms = await cdp.evaluate("performance.timeOrigin + performance.now()")
                t2 = time.monotonic_ns()
                offset = float(page_ms) - (t1 + t2) / 2 / 1e6  # page ms = mono ms + offset
                if best is None or t2 - t1 < best[0]:
                    best = (t2 - t1, offset)
            assert best is not None
            result["clock"] = {"page_minus_mono_ms": best[1], "round_trip_ms": best[0] / 1e6}
            hold_ms = truth["duration_ms"] - 1500.0
            page_out = await cdp.evaluate(
                f"runCall({json.dumps(proxy.url())}, {hold_ms}, {THRESHOLD})",
                timeout_s=hold_ms / 1000 + 40,
            )
            result["page"] = page_out
            await wait_until(lambda: receipts, what="the receipt")
    finally:
        await proxy.stop()
        await agent.stop()
        await runner.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    result["receipt"] = receipts[0].model_dump(by_alias=True) if receipts else None
    stats = proxy.relay_stats[0] if proxy.relay_stats else None
    result["relay"] = (
        {
            # Packets towards the caller (the page) that left the relay late, and the most.
            "late_to_caller": stats.late[1],
            "late_max_to_caller_ms": stats.late_max_ns[1] / 1e6,
        }
        if stats is not None
        else None
    )
    result["call_start_mono_ms"] = starts[0] / 1e6 if starts else None
    log = agent.calls[0] if agent.calls else None
    result["agent"] = (
        {
            "responses": [
                {
                    "clip": r.clip,
                    "speech_mono_ms": r.speech_ns / 1e6,
                    "caller_offset_mono_ms": (r.caller_offset_ns or 0) / 1e6,
                    "actual_delay_ms": r.actual_delay_ms,
                }
                for r in log.responses
            ],
            "channel_messages": [m for _, m in log.channel_messages if isinstance(m, str)],
        }
        if log is not None
        else None
    )
    out_path.write_text(json.dumps(result, indent=1))
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()
    if os.environ.get("VOXPROXY_BROWSER_ALLOW_NETWORK") != "1":
        # Refuse to run with any interface but loopback up: nothing may leave the machine.
        # (/proc/net/dev lists the interfaces of this process's own network namespace.)
        lines = Path("/proc/net/dev").read_text().splitlines()[2:]
        others = [
            line.split(":")[0].strip() for line in lines if line.split(":")[0].strip() != "lo"
        ]
        if others:
            print(f"refusing to run outside a private network namespace: {others}", file=sys.stderr)
            return 3
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run(Path(args.out), args.chromium))
    return 0


if __name__ == "__main__":
    sys.exit(main())
