"""The WebRTC transport: voxproxy as a measuring media relay, on aiortc.

DTLS-SRTP keys are negotiated end to end, so a proxy that passed the caller's
SDP through untouched could read nothing. voxproxy therefore terminates each
leg (a back-to-back user agent): it answers the caller with its own
``RTCPeerConnection`` and opens a second one to the agent, which it offers with
the same signaling the caller used on it (it is the agent's WHIP or Pipecat
client). Everything here is the forwarding plane; measurement receives copies
through :class:`RelayObserver` and never holds a packet up.

Signaling, as served to callers and spoken to agents:

- **WHIP** (RFC 9725 section 4): ``POST`` of the SDP offer with
  ``Content-Type: application/sdp``; ``201 Created`` with the SDP answer and a
  ``Location`` header naming the session; ``DELETE`` on that URL ends the
  session (``200``). aiortc gathers every candidate before it answers (its
  ``setLocalDescription`` waits for ICE gathering), so there is no trickle: a
  ``PATCH`` is answered ``405`` as RFC 9725 section 4.3 asks of a session that
  supports neither trickle nor ICE restarts.
- **Pipecat SmallWebRTC** (pipecat ``runner/run.py``): ``POST /api/offer`` with
  JSON ``{sdp, type, pc_id?, restart_pc?, request_data?}``, answered with
  ``{sdp, type, pc_id}``; ``PATCH /api/offer`` with ``{pc_id, candidates}``
  trickles remote candidates. A hang-up is the peer connection closing.
  Reusing a live ``pc_id`` (renegotiation) is answered ``501``.
- The caller's offer is checked and applied first, but answered only once the
  agent has answered ours, so a refusal reaches the caller as an HTTP error
  (the agent's own 4xx/5xx, ``502`` unreachable, ``504`` silent) and a bad
  offer as ``400``/``415``; either way a receipt says what happened and both
  peer connections are closed. CORS is answered for pages on other origins.

Media (audio only; video m-lines are rejected by aiortc's answerer as any other
unsupported kind would be):

- aiortc's receiver holds every audio frame in ``JitterBuffer(capacity=16,
  prefetch=4)`` and only hands it to its decoder thread once four more frames
  have arrived: about 80 ms late at 20 ms packets. A relay cannot afford that,
  and a measurement that wants "audible time = arrival" (MEASUREMENT.md
  section 3) cannot use it. So each receiver is *tapped*: its
  ``_handle_rtp_packet`` (which aiortc's ``RTCDtlsTransport`` calls for every
  decrypted RTP packet) is replaced on the instance by :func:`_tap`, which
  stamps the arrival on the monotonic clock and hands the payload on at once.
  The stock path (jitter buffer, decoder thread) is bypassed entirely.
- Where both legs send with the same codec, the payloads are forwarded as they
  came: the sending leg's track returns pre-encoded ``av.Packet`` objects, which
  aiortc's ``RTCRtpSender`` packs without re-encoding (``Encoder.pack``), with
  the RTP timestamps carried over. A copy is decoded for measurement only
  (:class:`MeasuredStream`; Opus straight to 16 kHz by libopus), scheduled after
  the send so that it never delays it. Where the codecs differ, the payload is
  decoded once and re-encoded for the other leg's codec, inline (aiortc's
  sender would run its encoder in a thread pool). ``benchmarks/webrtc.py``
  measures both paths.
- aiortc falls back to Google's public STUN server when ``iceServers`` is None
  (``RTCIceGatherer.getDefaultIceServers``), so :func:`rtc_configuration` always
  passes an explicit list (empty by default). aioice gathers host candidates
  on every interface address except 127.0.0.1 and has no option to choose
  them; :func:`use_host_addresses` replaces its ``get_host_addresses`` for the
  process (tests and private network namespaces use 127.0.0.1 only).

Data channels are relayed by label, in both directions, messages unchanged: a
channel the caller opens is opened with the same label, ordering, reliability
and subprotocol towards the agent, and the other way round; messages sent
before the other side's channel is open are held (bounded) until it opens.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import fractions
import functools
import json
import logging
import time
import uuid
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn, Protocol

import aiohttp
import aioice.ice
import numpy as np
import numpy.typing as npt
from aiohttp import web
from aiortc import (
    MediaStreamTrack,
    RTCConfiguration,
    RTCDataChannel,
    RTCIceServer,
    RTCPeerConnection,
    RTCRtpCodecParameters,
    RTCRtpTransceiver,
    RTCSessionDescription,
)
from aiortc.codecs import get_capabilities, get_decoder, get_encoder
from aiortc.jitterbuffer import JitterFrame
from aiortc.rtcconfiguration import RTCBundlePolicy
from aiortc.rtp import RtpPacket
from aiortc.sdp import SessionDescription, candidate_from_sdp
from av import AudioFrame, AudioResampler, CodecContext
from av.packet import Packet
from yarl import URL

from voxproxy.audio.g711 import alaw_to_pcm, ulaw_to_pcm
from voxproxy.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Direction, Pcm
from voxproxy.httpserve import (
    HEADER_TIMEOUT_S,
    BodyTimeout,
    app_runner,
    body_timeout_response,
    read_body,
)
from voxproxy.transports.websocket import Admission

log = logging.getLogger("voxproxy.webrtc")
# aioice logs every candidate pair, with the caller's IP address and port, at INFO: a
# caller's address is personal data, so its INFO lines are off (warnings still show).
logging.getLogger("aioice").setLevel(logging.WARNING)

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000
Signaling = Literal["whip", "pipecat"]
SIGNALINGS: tuple[Signaling, ...] = ("whip", "pipecat")
PIPECAT_PATH = "/api/offer"
WHIP_PATH = "/whip"
MAX_OFFER_BYTES = 64 * 1024
OUT_QUEUE_PACKETS = 8  # packets a sending leg may hold (160 ms at 20 ms): a relay does not buffer
CHANNEL_BACKLOG = 256  # data channel messages held until the other side's channel opens

# -- ICE ----------------------------------------------------------------------------------

_default_host_addresses = aioice.ice.get_host_addresses
_host_addresses: tuple[str, ...] | None = None


def use_host_addresses(addresses: Sequence[str] | None) -> None:
    """Gather ICE host candidates on exactly ``addresses`` (None: aioice's default).

    aioice (0.9 to 0.13) reads ``aioice.ice.get_host_addresses`` at gathering
    time and leaves 127.0.0.1 out; this replaces that function for the whole
    process. Tests and browser runs inside a private network namespace pass
    ``["127.0.0.1"]`` so that no packet leaves loopback.
    """
    global _host_addresses
    _host_addresses = tuple(addresses) if addresses is not None else None
    if _host_addresses is None:
        aioice.ice.get_host_addresses = _default_host_addresses
        return
    chosen = list(_host_addresses)

    def chosen_addresses(use_ipv4: bool, use_ipv6: bool) -> list[str]:
        return [a for a in chosen if (":" in a and use_ipv6) or (":" not in a and use_ipv4)]

    aioice.ice.get_host_addresses = chosen_addresses


def rtc_configuration(ice_servers: Sequence[str] = ()) -> RTCConfiguration:
    """An explicit configuration: no STUN/TURN server unless named, one bundled transport."""
    return RTCConfiguration(
        iceServers=[RTCIceServer(urls=u) for u in ice_servers],
        bundlePolicy=RTCBundlePolicy.MAX_BUNDLE,
    )


_PEERS: weakref.WeakSet[RTCPeerConnection] = weakref.WeakSet()


def open_peer_connections() -> int:
    """Peer connections made by this module (any role) that are not closed yet."""
    return sum(1 for pc in list(_PEERS) if pc.connectionState != "closed")


# -- codecs -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CodecInfo:
    """A negotiated audio codec, as the RTP payload type names it."""

    name: str  # lower case: "opus", "pcmu", "pcma", "g722"
    clock_rate: int
    channels: int | None
    payload_type: int
    params: RTCRtpCodecParameters = field(compare=False, repr=False)

    @staticmethod
    def of(codec: RTCRtpCodecParameters) -> CodecInfo:
        return CodecInfo(
            codec.mimeType.split("/", 1)[-1].lower(),
            codec.clockRate,
            codec.channels,
            codec.payloadType if codec.payloadType is not None else -1,
            codec,
        )

    def same_as(self, other: CodecInfo) -> bool:
        """Payloads of one can be sent as the other's (the payload type may differ)."""
        return (
            self.name == other.name
            and self.clock_rate == other.clock_rate
            and (self.channels or 1) == (other.channels or 1)
        )

    @property
    def time_base(self) -> fractions.Fraction:
        return _time_base(self.clock_rate)


@functools.lru_cache(maxsize=16)
def _time_base(clock_rate: int) -> fractions.Fraction:
    return fractions.Fraction(1, clock_rate)


def _frame_ticks(codec: CodecInfo) -> int:
    """RTP clock ticks in one 20 ms payload."""
    return codec.clock_rate // 50


_LIBOPUS: Any = None  # ctypes handle, False when not found


def _libopus() -> Any:
    """libopus, for decoding at a detector rate: the copy PyAV ships, else the system's."""
    global _LIBOPUS
    if _LIBOPUS is None:
        import ctypes
        import ctypes.util
        from pathlib import Path

        import av

        candidates = sorted((Path(av.__file__).parent.parent / "av.libs").glob("libopus*.so*"))
        found = ctypes.util.find_library("opus")
        names = [str(c) for c in candidates] + ([found] if found else [])
        _LIBOPUS = False
        for name in names:
            try:
                lib = ctypes.CDLL(name)
                lib.opus_decoder_create.restype = ctypes.c_void_p
                lib.opus_decoder_create.argtypes = [
                    ctypes.c_int32,
                    ctypes.c_int,
                    ctypes.POINTER(ctypes.c_int),
                ]
                lib.opus_decode.restype = ctypes.c_int
                lib.opus_decode.argtypes = [
                    ctypes.c_void_p,
                    ctypes.c_char_p,
                    ctypes.c_int32,
                    ctypes.c_void_p,
                    ctypes.c_int,
                    ctypes.c_int,
                ]
                lib.opus_decoder_destroy.argtypes = [ctypes.c_void_p]
                _LIBOPUS = lib
                break
            except (OSError, AttributeError):
                continue
    return _LIBOPUS if _LIBOPUS is not False else None


class _OpusDecoder16k:
    """libopus called directly (ctypes), decoding to mono 16 kHz.

    libopus decodes to any of 8/12/16/24/48 kHz itself (RFC 6716 section 4); at
    16 kHz it skips its own upsampling, and the 48 -> 16 kHz filter that a
    48 kHz decode would need here: about 27 µs per 20 ms packet against 62 µs
    through PyAV plus :class:`Decimator`. (PyAV's ``libopus`` decoder ignores the
    requested rate and always gives 48 kHz.)
    """

    RATE = 16000

    def __init__(self, lib: Any) -> None:
        import ctypes

        err = ctypes.c_int()
        self._lib = lib
        self._dec = lib.opus_decoder_create(self.RATE, 1, ctypes.byref(err))
        if not self._dec or err.value != 0:
            raise OSError(f"opus_decoder_create failed ({err.value})")
        self._buf = np.zeros(self.RATE * 120 // 1000, dtype=np.int16)  # 120 ms: Opus's longest
        self._ptr = self._buf.ctypes.data

    def decode(self, payload: bytes) -> Pcm:
        n = self._lib.opus_decode(self._dec, payload, len(payload), self._ptr, self._buf.size, 0)
        if n < 0:
            raise ValueError(f"opus_decode: error {n}")
        out: Pcm = self._buf[:n].copy()
        return out

    def __del__(self) -> None:
        dec = getattr(self, "_dec", None)
        if dec:
            self._lib.opus_decoder_destroy(dec)
            self._dec = None


class AudioDecoder:
    """Decodes one stream's RTP payloads to mono 16-bit PCM (for measurement and transcoding).

    Opus is decoded by libopus straight to mono at 16 kHz (:class:`_OpusDecoder16k`)
    or, where libopus cannot be loaded directly, through PyAV at 48 kHz (which
    still costs less than aiortc's stereo decoder); G.711 is decoded by
    voxproxy's own tables; anything else by aiortc's decoder, downmixed.
    """

    def __init__(self, codec: CodecInfo, *, direct: bool = True) -> None:
        self.codec = codec
        self._opus: Any = None
        self._opus16: _OpusDecoder16k | None = None
        self._other: Any = None
        lib = _libopus() if codec.name == "opus" and direct else None
        if lib is not None:
            self._opus16 = _OpusDecoder16k(lib)
            self.sample_rate_hz = _OpusDecoder16k.RATE
        elif codec.name == "opus":
            ctx = CodecContext.create("libopus", "r")
            ctx.format = "s16"
            ctx.layout = "mono"
            ctx.sample_rate = 48000
            self._opus = ctx
            self.sample_rate_hz = 48000
        elif codec.name in ("pcmu", "pcma"):
            self.sample_rate_hz = 8000
        else:
            self._other = get_decoder(codec.params)
            self.sample_rate_hz = 16000 if codec.name == "g722" else codec.clock_rate
        self.errors = 0

    def decode(self, payload: bytes, timestamp: int) -> Pcm:
        """The samples of one payload (empty when it could not be decoded)."""
        try:
            if self._opus16 is not None:
                return self._opus16.decode(payload)
            if self._opus is not None:
                frames = self._opus.decode(Packet(payload))
                parts = [f.to_ndarray().reshape(-1) for f in frames]
            elif self.codec.name == "pcmu":
                return ulaw_to_pcm(payload)
            elif self.codec.name == "pcma":
                return alaw_to_pcm(payload)
            else:
                frames = self._other.decode(JitterFrame(payload, timestamp))
                parts = []
                for f in frames:
                    x = f.to_ndarray()
                    if x.ndim == 2 and x.shape[0] == 1 and len(f.layout.channels) > 1:
                        x = x.reshape(-1, len(f.layout.channels)).mean(axis=1)  # packed
                    elif x.ndim == 2 and x.shape[0] > 1:
                        x = x.mean(axis=0)
                    parts.append(np.asarray(x).reshape(-1).astype(np.int16))
                    self.sample_rate_hz = f.sample_rate
        except Exception:
            self.errors += 1
            return np.zeros(0, dtype=np.int16)
        if not parts:
            return np.zeros(0, dtype=np.int16)
        out: Pcm = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return out.astype(np.int16, copy=False)


def _lowpass(factor: int, taps_per_phase: int = 24) -> npt.NDArray[np.float64]:
    """A windowed-sinc low-pass for decimating by ``factor`` (-6 dB at 0.47 of the new rate)."""
    n = factor * taps_per_phase + 1
    cutoff = 0.94 / (2 * factor)  # cycles per input sample
    k = np.arange(n) - (n - 1) / 2
    h = 2 * cutoff * np.sinc(2 * cutoff * k) * np.blackman(n)
    out: npt.NDArray[np.float64] = h / h.sum()
    return out


class Decimator:
    """Integer-factor downsampling with a low-pass filter, chunk by chunk.

    A plain average of each group would let a 48 kHz microphone's noise above
    8 kHz fold into the detector's band and dull the top of the speech band by
    3 dB; a 73-tap windowed sinc (for 48 -> 16 kHz) does neither, for about 20 µs
    per 20 ms. Its delay, (taps - 1) / 2 input samples (0.75 ms at 48 kHz), is
    not taken back: output sample ``i`` is centred on input sample ``i * factor``.
    """

    __slots__ = ("_buf", "_h", "_half", "factor")

    def __init__(self, factor: int) -> None:
        self.factor = factor
        self._h = _lowpass(factor) if factor > 1 else np.ones(1)
        self._half = (self._h.size - 1) // 2
        # Input not yet used up; the next output is centred on its sample ``_half``
        # (silence is assumed before the stream's first sample).
        self._buf = np.zeros(self._half, dtype=np.float64)

    def __call__(self, pcm: Pcm) -> Pcm:
        f = self.factor
        if f == 1:
            return pcm
        half = self._half
        x = np.concatenate((self._buf, pcm.astype(np.float64)))
        last_centre = x.size - 1 - half
        if last_centre < half:
            self._buf = x
            return np.zeros(0, dtype=np.int16)
        count = (last_centre - half) // f + 1
        full = np.convolve(x[: 2 * half + (count - 1) * f + 1], self._h, mode="valid")
        self._buf = x[count * f :]
        out: Pcm = np.clip(np.rint(full[::f]), -32768, 32767).astype(np.int16)
        return out


def measurement_rate(decoded_rate_hz: int) -> tuple[int, int]:
    """(VAD rate, decimation factor) for a decoded rate: 48 kHz goes to 16 kHz."""
    if decoded_rate_hz == 48000:
        return 16000, 3
    return decoded_rate_hz, 1


PAUSE_NS = 60 * NS_PER_MS  # no packet for this long: the sender paused
CARRY_MAX_NS = 60 * NS_PER_MS  # how long what a libopus encoder carries over a pause may last


def _level_db(pcm: Pcm) -> float:
    if not pcm.size:
        return -120.0
    x = pcm.astype(np.float64)
    return float(10 * np.log10(np.mean(x * x) / (32768.0 * 32768.0) + 1e-12))


class MeasuredStream:
    """One direction's received audio as the speech detector gets it.

    Decodes each payload once (:meth:`decode`, also what a transcoding relay
    re-encodes), and :meth:`for_vad` brings it to a detector rate (48 kHz ->
    16 kHz, :class:`Decimator`).

    After a pause in an Opus stream, what the sender's encoder carried over the
    pause is not heard. A libopus encoder that stops and later resumes sending
    (without being reset) puts its 6.5 ms look-ahead and the decay of the audio
    from *before* the pause into the first packets after it: measured here,
    after a barge-in cut an answer mid-word, -16 dBFS in the first packet,
    -47 dBFS in the second, -83 dBFS in the third. The detector would merge that
    burst of old speech into the next answer, 250 ms of leading silence later,
    and date its onset 250 ms early. So after a pause the first packet is
    blanked, and each following packet too while the level keeps falling, for
    at most 60 ms; the first packet that is louder than the one before is new
    audio and ends it. The cost: an answer whose first 60 ms are speech getting
    quieter is dated late by that much. Senders that send silence while idle
    (browsers, Pipecat) never pause.
    """

    def __init__(self) -> None:
        self.decoder: AudioDecoder | None = None
        self._decimator = Decimator(1)
        self.rate_hz = 0
        self._last_arrival: int | None = None
        self._carry_until: int | None = None
        self._carry_db = 0.0
        self.pauses = 0
        self.blanked = 0

    def decode(self, p: RtpIn) -> Pcm:
        dec = self.decoder
        if dec is None or not dec.codec.same_as(p.codec):
            dec = self.decoder = AudioDecoder(p.codec)
            self.rate_hz, factor = measurement_rate(dec.sample_rate_hz)
            self._decimator = Decimator(factor)
        return dec.decode(p.payload, p.timestamp)

    def for_vad(self, p: RtpIn, decoded: Pcm) -> Pcm:
        pcm = self._decimator(decoded)
        last = self._last_arrival
        self._last_arrival = p.t_ns
        if last is not None and p.t_ns - last > PAUSE_NS and p.codec.name == "opus":
            self.pauses += 1
            self._carry_until = p.t_ns + CARRY_MAX_NS
            self._carry_db = float("inf")
        if self._carry_until is not None:
            level = _level_db(decoded)
            if p.t_ns < self._carry_until and level < self._carry_db:
                self._carry_db = level
                self.blanked += 1
                return np.zeros(pcm.size, dtype=np.int16)
            self._carry_until = None
        return pcm

    def __call__(self, p: RtpIn) -> Pcm:
        """Decode and prepare for the detector in one step."""
        return self.for_vad(p, self.decode(p))


class AudioEncoder:
    """Encodes mono 16-bit PCM for one codec, inline; one payload per 20 ms.

    Opus is encoded by libopus (through PyAV) as a mono stream at 48 kHz
    (``application=voip``): aiortc's own Opus encoder upmixes to stereo, which
    a mono decoder hears 3 dB quieter. Other codecs use aiortc's encoders.
    Input at another rate is resampled by libswresample.
    """

    def __init__(self, codec: CodecInfo, bitrate: int = 48000) -> None:
        self.codec = codec
        self._pts: dict[int, int] = {}
        self._opus: Any = None
        self._enc: Any = None
        if codec.name == "opus":
            ctx = CodecContext.create("libopus", "w")
            ctx.bit_rate = bitrate
            ctx.format = "s16"
            ctx.layout = "mono"
            ctx.sample_rate = 48000
            ctx.time_base = fractions.Fraction(1, 48000)
            ctx.options = {"application": "voip"}
            self._opus = ctx
            self._resampler = AudioResampler(
                format="s16", layout="mono", rate=48000, frame_size=960
            )
        else:
            self._enc = get_encoder(codec.params)

    def encode(self, pcm: Pcm, sample_rate_hz: int) -> list[bytes]:
        if pcm.size == 0:
            return []
        frame = AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = sample_rate_hz
        pts = self._pts.get(sample_rate_hz, 0)
        frame.pts = pts
        frame.time_base = fractions.Fraction(1, sample_rate_hz)
        self._pts[sample_rate_hz] = pts + pcm.size
        if self._opus is None:
            payloads, _ = self._enc.encode(frame)
            return list(payloads)
        out: list[bytes] = []
        for f in self._resampler.resample(frame):
            out.extend(bytes(p) for p in self._opus.encode(f))
        return out


def encode_clip(codec_name: str, pcm: Pcm, sample_rate_hz: int) -> list[bytes]:
    """A whole recording as 20 ms payloads of ``codec_name`` (padded with silence)."""
    codec = default_codec(codec_name)
    enc = AudioEncoder(codec)
    per = sample_rate_hz // 50
    n = -(-pcm.size // per) * per
    padded = np.zeros(n, dtype=np.int16)
    padded[: pcm.size] = pcm
    out: list[bytes] = []
    for k in range(0, n, per):
        out.extend(enc.encode(padded[k : k + per], sample_rate_hz))
    tail = enc.encode(np.zeros(per * 4, dtype=np.int16), sample_rate_hz)
    need = n // per
    out.extend(tail[: max(0, need - len(out))])
    return out[:need]


def default_codec(name: str) -> CodecInfo:
    """aiortc's capability for ``name`` (opus, pcmu, pcma, g722), with its static payload type."""
    static = {"pcmu": 0, "pcma": 8, "g722": 9, "opus": 111}
    for cap in get_capabilities("audio").codecs:
        if cap.mimeType.lower() == f"audio/{name.lower()}":
            params = RTCRtpCodecParameters(
                mimeType=cap.mimeType,
                clockRate=cap.clockRate,
                channels=cap.channels,
                payloadType=static.get(name.lower(), 96),
            )
            return CodecInfo.of(params)
    raise ValueError(f"aiortc has no audio codec {name!r}")


# -- media plumbing -----------------------------------------------------------------------


LATENCY_BIN_NS = 50_000  # the relay's forwarding latency histogram: 50 µs bins ...
LATENCY_BINS = 2000  # ... up to 100 ms (the last bin holds everything above)


class OutboundTrack(MediaStreamTrack):
    """The audio a peer sends: pre-encoded packets, returned as they are pushed.

    aiortc's ``RTCRtpSender`` awaits :meth:`recv` in a loop and packs each
    ``av.Packet`` without re-encoding (its ``pts`` in ``time_base`` becomes the
    RTP timestamp). Nothing is paced here: whoever pushes does the pacing (the
    remote sender, for a relay). The queue is short and drops its oldest
    packet when full, so a stalled leg never builds up delay.

    A relay passes each packet's arrival time (``t_in_ns``); the time from
    there until aiortc's sender takes the packet (after which it only packs,
    encrypts and writes it) goes into :attr:`latency_hist`.
    """

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self._queue: asyncio.Queue[tuple[Packet[Any], int] | None] = asyncio.Queue(
            OUT_QUEUE_PACKETS
        )
        self.dropped = 0
        self.sent = 0
        self.latency_hist = [0] * LATENCY_BINS

    def push(
        self, payload: bytes, pts: int, time_base: fractions.Fraction, t_in_ns: int = 0
    ) -> None:
        packet = Packet(payload)
        packet.pts = pts
        packet.time_base = time_base
        q = self._queue
        if q.full():
            with contextlib.suppress(asyncio.QueueEmpty):
                q.get_nowait()
                self.dropped += 1
        q.put_nowait((packet, t_in_ns))

    async def recv(self) -> Packet[Any]:
        item = await self._queue.get()
        if item is None:
            raise asyncio.CancelledError
        packet, t_in_ns = item
        if t_in_ns:
            b = (time.monotonic_ns() - t_in_ns) // LATENCY_BIN_NS
            self.latency_hist[min(b, LATENCY_BINS - 1)] += 1
        self.sent += 1
        return packet

    def stop(self) -> None:
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(None)
        super().stop()


@dataclass(slots=True)
class RtpIn:
    """One received RTP packet: its payload as sent, stamped on arrival."""

    payload: bytes
    timestamp: int  # RTP timestamp, unwrapped, from the stream's first packet
    sequence: int
    marker: bool
    t_ns: int  # arrival, time.monotonic_ns()
    codec: CodecInfo


class _Unwrap:
    """RTP timestamps made monotonic (32-bit wraparound) and relative to the first."""

    __slots__ = ("_last", "_origin")

    def __init__(self) -> None:
        self._origin: int | None = None
        self._last = 0

    def __call__(self, ts: int) -> int:
        if self._origin is None:
            self._origin = ts
        elif ts < self._last and self._last - ts > 1 << 31:
            self._origin -= 1 << 32
        elif ts > self._last and ts - self._last > 1 << 31:
            self._origin += 1 << 32  # a late packet from before a wrap
        self._last = ts
        return ts - self._origin


def _tap(transceiver: RTCRtpTransceiver, sink: Callable[[RtpIn], None]) -> None:
    """Receive this transceiver's RTP packets directly, on arrival (see the module doc)."""
    receiver = transceiver.receiver
    codecs: dict[int, CodecInfo] = {}
    unwrap = _Unwrap()

    async def handle_rtp_packet(packet: RtpPacket, arrival_time_ms: int = 0) -> None:
        del arrival_time_ms  # aiortc's is in whole ms on the wall clock; ours is monotonic ns
        t_ns = time.monotonic_ns()
        codec = codecs.get(packet.payload_type)
        if codec is None:
            for c in transceiver._codecs:
                if c.payloadType == packet.payload_type:
                    codec = codecs[packet.payload_type] = CodecInfo.of(c)
            if codec is None or codec.name in ("rtx", "red", "telephone-event", "cn"):
                return
        sink(
            RtpIn(
                packet.payload,
                unwrap(packet.timestamp),
                packet.sequence_number,
                bool(packet.marker),
                t_ns,
                codec,
            )
        )

    receiver._handle_rtp_packet = handle_rtp_packet  # type: ignore[method-assign]


class Channel:
    """One data channel, with a backlog for messages sent before it opens."""

    def __init__(self, dc: RTCDataChannel) -> None:
        self.dc = dc
        self.label: str = dc.label
        self.on_message: Callable[[str | bytes, int], None] | None = None
        self.on_open: Callable[[], None] | None = None
        self.on_close: Callable[[], None] | None = None
        self._backlog: deque[str | bytes] = deque()
        self.dropped = 0
        dc.on("message", self._message)
        dc.on("open", self._open)
        dc.on("close", self._close)

    @property
    def is_open(self) -> bool:
        return bool(self.dc.readyState == "open")

    def send(self, message: str | bytes) -> None:
        if self.dc.readyState == "open":
            self.dc.send(message)
        elif self.dc.readyState == "connecting":
            if len(self._backlog) >= CHANNEL_BACKLOG:
                self._backlog.popleft()
                self.dropped += 1
            self._backlog.append(message)
        else:
            self.dropped += 1

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.dc.close()

    def _message(self, message: str | bytes) -> None:
        t_ns = time.monotonic_ns()
        if self.on_message is not None:
            self.on_message(message, t_ns)

    def _open(self) -> None:
        while self._backlog and self.dc.readyState == "open":
            self.dc.send(self._backlog.popleft())
        if self.on_open is not None:
            self.on_open()

    def _close(self) -> None:
        if self.on_close is not None:
            self.on_close()


class BadSdp(ValueError):
    """An SDP that cannot be used, with the reason to tell the peer."""


def check_offer(sdp: str) -> SessionDescription:
    """Parse an offer and insist on one audio m-line (raises :class:`BadSdp`)."""
    if not sdp.strip():
        raise BadSdp("empty SDP offer")
    try:
        parsed = SessionDescription.parse(sdp)
    except Exception as exc:
        raise BadSdp(f"malformed SDP offer: {exc or type(exc).__name__}") from None
    kinds = [m.kind for m in parsed.media]
    if not parsed.media:
        raise BadSdp("malformed SDP offer: no media section")
    if "audio" not in kinds:
        raise BadSdp(f"the offer has no audio m-line (media: {', '.join(kinds)})")
    for m in parsed.media:
        if m.kind == "audio" and m.port != 0:
            if m.ice is None or not m.ice.usernameFragment or not m.ice.password:
                raise BadSdp("malformed SDP offer: the audio m-line has no ICE credentials")
            if not m.dtls or not m.dtls.fingerprints:
                raise BadSdp("malformed SDP offer: the audio m-line has no DTLS fingerprint")
    return parsed


class AudioPeer:
    """One ``RTCPeerConnection`` with a single audio transceiver and any data channels.

    Incoming RTP goes to :attr:`on_rtp` on arrival (:func:`_tap`); outgoing
    audio is pushed as encoded payloads with :meth:`send_payload` (or as PCM with
    :meth:`send_pcm`, encoded here for the negotiated codec).
    """

    def __init__(
        self,
        *,
        ice_servers: Sequence[str] = (),
        codecs: Sequence[str] | None = None,
        name: str = "peer",
    ) -> None:
        self.name = name
        self.pc = RTCPeerConnection(rtc_configuration(ice_servers))
        _PEERS.add(self.pc)
        self.track = OutboundTrack()
        self.codec_prefs = tuple(c.lower() for c in codecs) if codecs else None
        self.transceiver: RTCRtpTransceiver | None = None
        self.on_rtp: Callable[[RtpIn], None] | None = None
        self.on_channel: Callable[[Channel], None] | None = None
        self.on_state: Callable[[str], None] | None = None
        self.channels: list[Channel] = []
        self.connected_ns: int | None = None
        self.state = "new"
        self.offered_data = False
        self._encoder: AudioEncoder | None = None
        self._send_pts = 0
        self._pts_origin_ns: int | None = None
        self._closing: asyncio.Task[None] | None = None
        self.pc.on("connectionstatechange", self._state_changed)
        self.pc.on("datachannel", self._remote_channel)

    # -- negotiation ----------------------------------------------------------------------

    def _prefer(self, transceiver: RTCRtpTransceiver) -> None:
        if not self.codec_prefs:
            return
        caps = get_capabilities("audio").codecs
        chosen = [
            c for name in self.codec_prefs for c in caps if c.mimeType.lower() == f"audio/{name}"
        ]
        if chosen:
            transceiver.setCodecPreferences(chosen)

    def _attach(self, transceiver: RTCRtpTransceiver) -> None:
        self.transceiver = transceiver
        _tap(transceiver, self._rtp)

    async def create_offer(
        self, *, direction: str = "sendrecv", data: bool = False, channels: Sequence[str] = ()
    ) -> str:
        """Our offer (complete: aiortc gathers all candidates first)."""
        transceiver = self._ensure_transceiver()
        transceiver.direction = direction
        for label in channels:
            self.open_channel(label)
        if data and not channels:
            # An m=application section without opening a channel yet: the labels are only
            # known once the other leg's channels open. aiortc creates the SCTP transport
            # lazily in createDataChannel; this is that step alone.
            self.pc._RTCPeerConnection__createSctpTransport()  # type: ignore[attr-defined]
        self.offered_data = data or bool(channels)
        await self.pc.setLocalDescription(await self.pc.createOffer())
        return str(self.pc.localDescription.sdp)

    def _ensure_transceiver(self) -> RTCRtpTransceiver:
        """Our audio transceiver, made before any data channel so that both share one
        bundled transport (aiortc bundles SCTP onto the first transceiver's)."""
        if self.transceiver is None:
            transceiver = self.pc.addTransceiver(self.track, direction="sendrecv")
            self._prefer(transceiver)
            self._attach(transceiver)
        assert self.transceiver is not None
        return self.transceiver

    async def accept_answer(self, sdp: str) -> None:
        try:
            await self.pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="answer"))
        except Exception as exc:
            raise BadSdp(f"unusable SDP answer: {exc or type(exc).__name__}") from None

    async def apply_offer(self, offer_sdp: str) -> None:
        """First half of answering: check and apply the offer (raises :class:`BadSdp`)."""
        parsed = check_offer(offer_sdp)
        self.offered_data = any(m.kind == "application" for m in parsed.media)
        # Our transceiver exists first, with its codec preferences: aiortc's
        # setRemoteDescription takes an unassociated transceiver of the same kind for the
        # offer's audio and filters the common codecs by its preferences there and then.
        transceiver = self._ensure_transceiver()
        try:
            await self.pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
        except Exception as exc:
            raise BadSdp(f"unusable SDP offer: {exc or type(exc).__name__}") from None
        if transceiver.mid is None or not transceiver._codecs:
            raise BadSdp("the offer has no audio codec in common with this peer")

    async def finish_answer(self) -> str:
        """Second half: create and apply our answer (raises :class:`BadSdp`)."""
        try:
            await self.pc.setLocalDescription(await self.pc.createAnswer())
        except Exception as exc:
            raise BadSdp(f"cannot answer this offer: {exc or type(exc).__name__}") from None
        return str(self.pc.localDescription.sdp)

    async def answer(self, offer_sdp: str) -> str:
        """Answer an offer (validated with :func:`check_offer`); raises :class:`BadSdp`."""
        await self.apply_offer(offer_sdp)
        return await self.finish_answer()

    @staticmethod
    def offer_direction(offer_sdp: str) -> str:
        """The direction of the first audio m-line of an offer, from the offerer's side."""
        parsed = SessionDescription.parse(offer_sdp)
        for m in parsed.media:
            if m.kind == "audio":
                return m.direction or "sendrecv"
        return "inactive"

    # -- media ----------------------------------------------------------------------------

    @property
    def send_codec(self) -> CodecInfo | None:
        """The codec this peer sends with (aiortc sends with the first one negotiated)."""
        t = self.transceiver
        if t is None or not t._codecs:
            return None
        return CodecInfo.of(t._codecs[0])

    def send_payload(self, payload: bytes, pts: int, codec: CodecInfo, t_in_ns: int = 0) -> None:
        self.track.push(payload, pts, codec.time_base, t_in_ns)

    def _next_pts(self, codec: CodecInfo) -> int:
        """The RTP timestamp of the next 20 ms we send: contiguous while we send without
        pause, and moved on by the pause when we paused (so the far end hears the gap)."""
        now = time.monotonic_ns()
        if self._pts_origin_ns is None:
            self._pts_origin_ns = now
        wall = (now - self._pts_origin_ns) * codec.clock_rate // NS_PER_S
        ticks = _frame_ticks(codec)
        if wall > self._send_pts + 2 * ticks:
            self._send_pts = wall - wall % ticks
        pts = self._send_pts
        self._send_pts += ticks
        return pts

    def send_encoded(self, payload: bytes) -> bool:
        """Send one 20 ms payload already encoded for :attr:`send_codec`."""
        codec = self.send_codec
        if codec is None:
            return False
        self.send_payload(payload, self._next_pts(codec), codec)
        return True

    def encoder(self) -> AudioEncoder | None:
        """An encoder for the negotiated send codec (None before negotiation)."""
        codec = self.send_codec
        if codec is None:
            return None
        if self._encoder is None or self._encoder.codec != codec:
            self._encoder = AudioEncoder(codec)
        return self._encoder

    def send_pcm(self, pcm: Pcm, sample_rate_hz: int) -> list[bytes]:
        """Encode and send; returns the payloads sent (none before negotiation).

        Send whole 20 ms frames: the encoder keeps a partial frame until the next
        call, and every later packet would then lag by it."""
        enc = self.encoder()
        if enc is None:
            return []
        payloads = enc.encode(pcm, sample_rate_hz)
        for p in payloads:
            self.send_payload(p, self._next_pts(enc.codec), enc.codec)
        return payloads

    def _rtp(self, packet: RtpIn) -> None:
        if self.on_rtp is not None:
            self.on_rtp(packet)

    # -- data channels --------------------------------------------------------------------

    def open_channel(
        self,
        label: str,
        *,
        ordered: bool = True,
        max_retransmits: int | None = None,
        max_packet_lifetime: int | None = None,
        protocol: str = "",
    ) -> Channel:
        if self.pc.remoteDescription is None and self.pc.localDescription is None:
            self._ensure_transceiver()  # an offerer: audio first, then the channels
        dc = self.pc.createDataChannel(
            label,
            ordered=ordered,
            maxRetransmits=max_retransmits,
            maxPacketLifeTime=max_packet_lifetime,
            protocol=protocol,
        )
        ch = Channel(dc)
        self.channels.append(ch)
        return ch

    def _remote_channel(self, dc: RTCDataChannel) -> None:
        ch = Channel(dc)
        self.channels.append(ch)
        if self.on_channel is not None:
            self.on_channel(ch)

    # -- life -----------------------------------------------------------------------------

    def _state_changed(self) -> None:
        state = str(self.pc.connectionState)
        self.state = state
        if state == "connected" and self.connected_ns is None:
            self.connected_ns = time.monotonic_ns()
        if self.on_state is not None:
            self.on_state(state)

    @property
    def closed(self) -> bool:
        return bool(self.pc.connectionState == "closed")

    async def close(self) -> None:
        self.on_rtp = None
        self.on_channel = None
        self.track.stop()
        with contextlib.suppress(Exception):
            await self.pc.close()


# -- signaling: the agent's side (we are its client) ---------------------------------------


class SignalingError(Exception):
    """Signaling failed; ``status`` is the HTTP status to answer the caller with."""

    def __init__(self, status: int, reason: str, cause: EndCause, upstream_status: int | None):
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.cause = cause
        self.upstream_status = upstream_status


@dataclass(slots=True)
class AgentAnswer:
    status: int
    sdp: str
    session_url: str | None  # WHIP: the Location to DELETE at hang-up
    pc_id: str | None  # pipecat


async def post_offer(
    http: aiohttp.ClientSession,
    url: str,
    signaling: Signaling,
    sdp: str,
    *,
    headers: dict[str, str] | None = None,
    timeout_s: float = 10.0,
    request_data: Any = None,
) -> AgentAnswer:
    """Send our offer to the agent; raises :class:`SignalingError` with the caller's status."""
    hdrs = dict(headers or {})
    if signaling == "whip":
        hdrs["Content-Type"] = "application/sdp"
        body: str = sdp
    else:
        hdrs["Content-Type"] = "application/json"
        payload: dict[str, Any] = {"sdp": sdp, "type": "offer"}
        if request_data is not None:
            payload["request_data"] = request_data
        body = json.dumps(payload)
    try:
        async with asyncio.timeout(timeout_s):
            async with http.post(url, data=body.encode(), headers=hdrs) as resp:
                status = resp.status
                text = await resp.text(errors="replace")
                location = resp.headers.get("Location")
    except TimeoutError:
        raise SignalingError(
            504, "the agent did not answer the offer in time", EndCause.UPSTREAM_TIMEOUT, None
        ) from None
    except aiohttp.ClientError as exc:
        reason = f"the agent is unreachable: {exc}"
        raise SignalingError(502, reason, EndCause.UPSTREAM_UNREACHABLE, None) from None
    if status >= 300:
        shown = " ".join(text.split())[:200] or "no reason given"
        code = status if 400 <= status <= 599 else 502
        raise SignalingError(
            code,
            f"the agent refused the call: HTTP {status}: {shown}",
            EndCause.UPSTREAM_REFUSED,
            status,
        )
    if signaling == "whip":
        answer_sdp, pc_id = text, None
        session_url = str(URL(url).join(URL(location))) if location else None
        if status != 201:
            log.info("WHIP agent answered %d rather than 201", status)
    else:
        session_url = None
        try:
            msg = json.loads(text)
            answer_sdp = str(msg["sdp"])
            pc_id = str(msg.get("pc_id")) if msg.get("pc_id") is not None else None
        except (ValueError, KeyError, TypeError):
            raise SignalingError(
                502,
                "the agent's answer is not the JSON {sdp, type, pc_id} of Pipecat's runner",
                EndCause.UPSTREAM_UNREACHABLE,
                status,
            ) from None
    return AgentAnswer(status, answer_sdp, session_url, pc_id)


async def hang_up(
    http: aiohttp.ClientSession, session_url: str, timeout_s: float = 2.0
) -> int | None:
    """WHIP teardown: DELETE the session URL. Returns the status, None if it failed."""
    try:
        async with asyncio.timeout(timeout_s):
            async with http.delete(session_url) as resp:
                return resp.status
    except Exception:  # unreachable, refused, or our client session already closed
        return None


# -- signaling: the callers' side (we answer them) -----------------------------------------


@dataclass(slots=True)
class Offer:
    """An offer as a caller posted it."""

    sdp: str
    signaling: Signaling
    headers: dict[str, str]  # lower-cased names
    request_data: Any = None


class Session(Protocol):
    """What a :class:`SignalingServer` keeps per answered offer."""

    id: str

    async def hang_up(self) -> None:
        """The caller ended the session (WHIP DELETE)."""
        ...

    async def add_candidates(self, candidates: list[dict[str, Any]]) -> None:
        """Remote candidates trickled by the caller (Pipecat PATCH)."""
        ...


OpenSession = Callable[[Offer], Awaitable[tuple[str, Session]]]


class HttpError(Exception):
    def __init__(self, status: int, reason: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = headers


def _error(status: int, reason: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, text=reason + "\n", content_type="text/plain", headers=headers
    )


class SignalingServer:
    """Answers WHIP and Pipecat offers on one HTTP port, for any :data:`OpenSession`.

    Routes: ``POST {whip_path}`` (WHIP, ``application/sdp``), ``DELETE``/``PATCH``
    ``{whip_path}/{id}``; ``POST``/``PATCH /api/offer`` (Pipecat). ``open_session``
    returns the answer SDP and the session, or raises :class:`HttpError`.
    """

    def __init__(
        self,
        open_session: OpenSession,
        *,
        whip_path: str = WHIP_PATH,
        cors_origins: Sequence[str] = ("*",),
        header_timeout_s: float = HEADER_TIMEOUT_S,
    ) -> None:
        self.open_session = open_session
        self.header_timeout_s = header_timeout_s
        self.whip_path = "/" + whip_path.strip("/")
        self.sessions: dict[str, Session] = {}
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self.host: str | None = None
        self.cors_origins = tuple(cors_origins)
        app = web.Application(client_max_size=MAX_OFFER_BYTES, middlewares=[self._cors])
        app.router.add_post(self.whip_path, self._whip_post)
        app.router.add_delete(self.whip_path + "/{id}", self._whip_delete)
        app.router.add_patch(self.whip_path + "/{id}", self._whip_patch)
        app.router.add_post(PIPECAT_PATH, self._pipecat_post)
        app.router.add_patch(PIPECAT_PATH, self._pipecat_patch)
        self.app = app

    @web.middleware
    async def _cors(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """CORS for pages that offer from another origin (a browser's WHIP client): the
        preflight of an ``application/sdp`` POST, and ``Location`` exposed to scripts."""
        origin = request.headers.get("Origin")
        allowed = origin is not None and ("*" in self.cors_origins or origin in self.cors_origins)
        if request.method == "OPTIONS" and allowed:
            response: web.StreamResponse = web.Response(status=204)
            response.headers["Access-Control-Allow-Methods"] = "POST, PATCH, DELETE, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = "Content-Type, Authorization"
            response.headers["Access-Control-Max-Age"] = "600"
        else:
            response = await handler(request)
        if allowed:
            assert origin is not None
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Expose-Headers"] = "Location"
            response.headers["Vary"] = "Origin"
        return response

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        runner = app_runner(self.app, header_timeout_s=self.header_timeout_s)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        self._runner = runner
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1]) if sockets else port
        self.host = host
        return self.port

    def url(self, signaling: Signaling = "whip") -> str:
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        path = self.whip_path if signaling == "whip" else PIPECAT_PATH
        return f"http://{host}:{self.port}{path}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def forget(self, session_id: str) -> None:
        self.sessions.pop(session_id, None)

    async def _open(self, offer: Offer) -> tuple[str, Session] | web.Response:
        try:
            answer, session = await self.open_session(offer)
        except HttpError as exc:
            return _error(exc.status, exc.reason, exc.headers)
        self.sessions[session.id] = session
        return answer, session

    async def _whip_post(self, request: web.Request) -> web.StreamResponse:
        ctype = request.content_type
        if ctype != "application/sdp":
            return _error(415, f"a WHIP offer is application/sdp, not {ctype or 'untyped'}")
        try:
            sdp = (await read_body(request)).decode(request.charset or "utf-8")
        except BodyTimeout:
            return body_timeout_response()
        except web.HTTPRequestEntityTooLarge:
            return _error(413, "the offer is too large")
        except (UnicodeDecodeError, LookupError):
            return _error(400, "malformed SDP offer: not UTF-8")
        headers = {k.lower(): v for k, v in request.headers.items()}
        opened = await self._open(Offer(sdp, "whip", headers))
        if isinstance(opened, web.Response):
            return opened
        answer, session = opened
        location = f"{self.whip_path}/{session.id}"
        return web.Response(
            status=201,
            text=answer,
            content_type="application/sdp",
            headers={"Location": location},
        )

    async def _whip_delete(self, request: web.Request) -> web.StreamResponse:
        session = self.sessions.pop(request.match_info["id"], None)
        if session is None:
            return _error(404, "no such session")
        await session.hang_up()
        return web.Response(status=200)

    async def _whip_patch(self, request: web.Request) -> web.StreamResponse:
        del request
        return web.Response(
            status=405,
            text="this WHIP session supports neither trickle ICE nor ICE restarts\n",
            headers={"Allow": "DELETE"},
        )

    async def _pipecat_post(self, request: web.Request) -> web.StreamResponse:
        try:
            msg = json.loads(await read_body(request))
        except BodyTimeout:
            return body_timeout_response()
        except (ValueError, UnicodeDecodeError):
            return _error(400, "a Pipecat offer is the JSON object {sdp, type, pc_id?}")
        except web.HTTPRequestEntityTooLarge:
            return _error(413, "the offer is too large")
        if not isinstance(msg, dict) or not isinstance(msg.get("sdp"), str):
            return _error(400, "a Pipecat offer is the JSON object {sdp, type, pc_id?}")
        if msg.get("type", "offer") != "offer":
            return _error(400, f"expected an offer, got type {msg.get('type')!r}")
        if msg.get("pc_id") is not None and str(msg["pc_id"]) in self.sessions:
            return _error(501, "renegotiation of a running session is not supported")
        headers = {k.lower(): v for k, v in request.headers.items()}
        data = msg.get("request_data", msg.get("requestData"))
        opened = await self._open(Offer(msg["sdp"], "pipecat", headers, data))
        if isinstance(opened, web.Response):
            return opened
        answer, session = opened
        return web.json_response({"sdp": answer, "type": "answer", "pc_id": session.id})

    async def _pipecat_patch(self, request: web.Request) -> web.StreamResponse:
        try:
            msg = json.loads(await read_body(request))
        except BodyTimeout:
            return body_timeout_response()
        except web.HTTPRequestEntityTooLarge:
            return _error(413, "the candidates are too large")
        except (ValueError, UnicodeDecodeError):
            return _error(400, "expected JSON {pc_id, candidates}")
        if not isinstance(msg, dict):
            return _error(400, "expected JSON {pc_id, candidates}")
        session = self.sessions.get(str(msg.get("pc_id")))
        if session is None:
            return _error(404, "no such session")
        candidates = msg.get("candidates")
        if not isinstance(candidates, list):
            return _error(400, "expected a list of candidates")
        await session.add_candidates([c for c in candidates if isinstance(c, dict)])
        return web.json_response({"status": "success"})


async def add_trickled(pc: RTCPeerConnection, candidates: list[dict[str, Any]]) -> int:
    """Add Pipecat-style trickled candidates ``{candidate, sdp_mid, sdp_mline_index}``."""
    added = 0
    for c in candidates:
        text = c.get("candidate")
        if not isinstance(text, str) or not text:
            continue
        try:
            cand = candidate_from_sdp(
                text.split(":", 1)[1] if text.startswith("candidate:") else text
            )
            cand.sdpMid = c.get("sdp_mid", c.get("sdpMid"))
            cand.sdpMLineIndex = c.get("sdp_mline_index", c.get("sdpMLineIndex"))
            await pc.addIceCandidate(cand)
            added += 1
        except Exception:
            continue
    return added


# -- the relay ----------------------------------------------------------------------------


class EndCause(enum.StrEnum):
    """How a relayed WebRTC call ended, as the transport saw it."""

    CALLER_CLOSED = "caller_closed"  # WHIP DELETE, or the caller closed its peer connection
    AGENT_CLOSED = "agent_closed"
    CALLER_VANISHED = "caller_vanished"  # ICE/DTLS to the caller failed after connecting
    AGENT_VANISHED = "agent_vanished"
    BAD_OFFER = "bad_offer"  # the caller's offer was malformed or had no audio
    ICE_FAILED = "ice_failed"  # the caller's media path never connected
    UPSTREAM_REFUSED = "upstream_refused"
    UPSTREAM_UNREACHABLE = "upstream_unreachable"  # no signaling, or no media path, to the agent
    UPSTREAM_TIMEOUT = "upstream_timeout"
    IDLE_TIMEOUT = "idle_timeout"
    PROXY_SHUTDOWN = "proxy_shutdown"
    PROXY_ERROR = "proxy_error"


@dataclass(slots=True)
class EndInfo:
    cause: EndCause
    upstream_status: int | None = None  # the agent's HTTP status to our offer
    initiator: str = "none"  # "caller", "agent", "proxy" or "none"
    http_status: int | None = None  # what the caller's offer was answered with
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class RelayStats:
    """What the forwarding plane did with one call's audio (both directions)."""

    packets: tuple[int, int]
    passthrough: tuple[int, int]
    transcoded: tuple[int, int]
    dropped: tuple[int, int]
    forward_ns: tuple[int, int]  # summed arrival -> handed to the other leg's sender


class RelayObserver(Protocol):
    """What the relay tells the measurement side. Implementations must be cheap."""

    def upstream_headers(self) -> dict[str, str]:
        """Extra headers for our offer to the agent (call id, trace context)."""
        ...

    def on_upstream_open(self, t_ns: int, status: int) -> None: ...

    def on_audio(
        self, direction: Direction, pcm: Pcm, sample_rate_hz: int, t_ns: int, wire_bytes: int
    ) -> None: ...

    def on_data(
        self, direction: Direction, label: str, message: str | bytes, t_ns: int
    ) -> None: ...

    def on_end(self, t_ns: int, info: EndInfo, stats: RelayStats) -> None: ...


RelayObserverFactory = Callable[[int, Offer], RelayObserver]


@dataclass(frozen=True, slots=True)
class WebRtcRelayConfig:
    upstream: str  # the agent's signaling URL (WHIP endpoint, or Pipecat's .../api/offer)
    signaling: Signaling = "whip"
    signaling_timeout_s: float = 10.0
    ice_timeout_s: float = 15.0  # both legs must connect within this time after the answer
    idle_timeout_s: float | None = None
    ice_servers: tuple[str, ...] = ()
    agent_codecs: tuple[str, ...] | None = None  # codec preference towards the agent
    caller_codecs: tuple[str, ...] | None = None  # codec preference towards the caller
    measure: bool = True
    whip_path: str = WHIP_PATH
    max_calls: int | None = None  # calls in progress at most; more are refused with 503
    header_timeout_s: float = HEADER_TIMEOUT_S  # for a signaling request's headers to arrive


class _Direction:
    """Forwarding state of one direction: source leg -> destination leg."""

    __slots__ = (
        "dropped",
        "dst",
        "encoder",
        "forward_ns",
        "measured",
        "packets",
        "passthrough",
        "transcoded",
        "tx_pts",
    )

    def __init__(self, dst: AudioPeer) -> None:
        self.dst = dst
        self.measured = MeasuredStream()
        self.encoder: AudioEncoder | None = None
        self.tx_pts: int | None = None
        self.packets = 0
        self.passthrough = 0
        self.transcoded = 0
        self.dropped = 0
        self.forward_ns = 0


class WebRtcRelay:
    """One relayed call: the caller's peer, the agent's peer, and what passes between them."""

    def __init__(self, server: WebRtcRelayServer, offer: Offer) -> None:
        self.server = server
        self.config = cfg = server.config
        self.offer = offer
        self.id = uuid.uuid4().hex
        self.t_start_ns = time.monotonic_ns()
        self._loop = asyncio.get_running_loop()
        self.observer: RelayObserver | None = None
        try:
            self.observer = server.observer_factory(self.t_start_ns, offer)
        except Exception:
            log.exception("observer factory failed; the call is relayed unmeasured")
        self.caller = AudioPeer(
            ice_servers=cfg.ice_servers, codecs=cfg.caller_codecs, name="caller"
        )
        self.agent = AudioPeer(ice_servers=cfg.ice_servers, codecs=cfg.agent_codecs, name="agent")
        self._dirs = (_Direction(self.agent), _Direction(self.caller))
        self.caller.on_rtp = lambda p: self._rtp(CALLER_TO_AGENT, p)
        self.agent.on_rtp = lambda p: self._rtp(AGENT_TO_CALLER, p)
        self.caller.on_channel = lambda ch: self._channel(CALLER_TO_AGENT, ch)
        self.agent.on_channel = lambda ch: self._channel(AGENT_TO_CALLER, ch)
        self.caller.on_state = lambda s: self._state(CALLER_TO_AGENT, s)
        self.agent.on_state = lambda s: self._state(AGENT_TO_CALLER, s)
        self.agent_answer: AgentAnswer | None = None
        self._end: EndInfo | None = None
        self._ending: asyncio.Task[None] | None = None
        self._timers: list[asyncio.TimerHandle] = []
        self._last_activity = time.monotonic()
        self.observer_errors = 0
        self.answered = False

    # -- setup ----------------------------------------------------------------------------

    async def open(self) -> str:
        """Negotiate both legs; returns the caller's answer or raises :class:`HttpError`."""
        cfg = self.config
        try:
            direction = AudioPeer.offer_direction(self.offer.sdp) if self.offer.sdp.strip() else ""
        except Exception:
            direction = ""
        try:
            # The caller's offer is checked and applied first; its answer is only created
            # (and returned) once the agent has answered ours, so that a refusal reaches the
            # caller as an HTTP error.
            await self.caller.apply_offer(self.offer.sdp)
        except BadSdp as exc:
            await self._fail(400, str(exc), EndInfo(EndCause.BAD_OFFER, initiator="caller"))
        headers = {}
        auth = self.offer.headers.get("authorization")
        if auth:
            headers["Authorization"] = auth
        if self.observer is not None:
            try:
                headers.update(self.observer.upstream_headers())
            except Exception:
                self._observer_failed()
        try:
            sdp = await self.agent.create_offer(
                direction=direction or "sendrecv", data=self.caller.offered_data
            )
            answer = await post_offer(
                self.server.http,
                cfg.upstream,
                cfg.signaling,
                sdp,
                headers=headers,
                timeout_s=cfg.signaling_timeout_s,
                request_data=self.offer.request_data,
            )
            self.agent_answer = answer
            await self.agent.accept_answer(answer.sdp)
        except SignalingError as exc:
            initiator = "agent" if exc.cause is EndCause.UPSTREAM_REFUSED else "proxy"
            await self._fail(
                exc.status,
                exc.reason,
                EndInfo(exc.cause, upstream_status=exc.upstream_status, initiator=initiator),
            )
        except BadSdp as exc:
            status = self.agent_answer.status if self.agent_answer else None
            await self._fail(
                502,
                f"the agent's answer is unusable: {exc}",
                EndInfo(EndCause.UPSTREAM_UNREACHABLE, upstream_status=status, initiator="agent"),
            )
        except Exception as exc:
            log.exception("could not open the agent leg")
            await self._fail(
                500, f"proxy error: {exc!r}", EndInfo(EndCause.PROXY_ERROR, initiator="proxy")
            )
        try:
            answer_sdp = await self.caller.finish_answer()
        except BadSdp as exc:
            await self._fail(400, str(exc), EndInfo(EndCause.BAD_OFFER, initiator="caller"))
        self.answered = True
        loop = asyncio.get_running_loop()
        self._timers.append(loop.call_later(cfg.ice_timeout_s, self._ice_deadline))
        if cfg.idle_timeout_s:
            self._timers.append(loop.call_later(cfg.idle_timeout_s, self._idle_check))
        return answer_sdp

    async def _fail(self, status: int, reason: str, info: EndInfo) -> NoReturn:
        info.http_status = status
        info.reason = reason
        await self.end(info)
        raise HttpError(status, reason) from None

    # -- forwarding -----------------------------------------------------------------------

    def _rtp(self, direction: Direction, p: RtpIn) -> None:
        d = self._dirs[direction]
        d.packets += 1
        self._last_activity = time.monotonic()
        dst = d.dst
        out_codec = dst.send_codec if dst.state == "connected" else None
        pcm: Pcm | None = None
        if out_codec is None:
            d.dropped += 1
        elif out_codec.same_as(p.codec):
            # The payload as it came, its RTP timestamp carried over.
            dst.send_payload(p.payload, p.timestamp, out_codec, p.t_ns)
            d.passthrough += 1
            d.forward_ns += time.monotonic_ns() - p.t_ns
        else:
            pcm = d.measured.decode(p)
            self._transcode(d, p, pcm, out_codec)
            d.forward_ns += time.monotonic_ns() - p.t_ns
        if self.observer is not None and self.config.measure:
            # After the sender's turn: aiortc's sender task was woken by the push above and
            # runs first (the loop's ready queue is FIFO), so measuring never delays the send.
            self._loop.call_soon(self._measure, d, direction, p, pcm)

    def _measure(self, d: _Direction, direction: Direction, p: RtpIn, pcm: Pcm | None) -> None:
        observer = self.observer
        if observer is None or self._end is not None:
            return
        try:
            if pcm is None:
                pcm = d.measured.decode(p)
            vad_pcm = d.measured.for_vad(p, pcm)
            observer.on_audio(direction, vad_pcm, d.measured.rate_hz, p.t_ns, len(p.payload))
        except Exception:
            self._observer_failed()

    def _transcode(self, d: _Direction, p: RtpIn, pcm: Pcm, out_codec: CodecInfo) -> None:
        dec = d.measured.decoder
        assert dec is not None
        if d.encoder is None or d.encoder.codec != out_codec:
            d.encoder = AudioEncoder(out_codec)
        payloads = d.encoder.encode(pcm, dec.sample_rate_hz)
        ticks = _frame_ticks(out_codec)
        # Keep the source's timing: a pause in its timestamps is a pause in ours.
        src_pts = p.timestamp * out_codec.clock_rate // p.codec.clock_rate
        pts = src_pts if d.tx_pts is None else max(d.tx_pts, src_pts - ticks * len(payloads))
        for payload in payloads:
            d.dst.send_payload(payload, pts, out_codec, p.t_ns)
            pts += ticks
            d.transcoded += 1
        d.tx_pts = pts

    # -- data channels --------------------------------------------------------------------

    def _channel(self, direction: Direction, ch: Channel) -> None:
        """A channel the ``direction``'s sender opened: open its twin on the other leg."""
        other_peer = self.agent if direction is CALLER_TO_AGENT else self.caller
        if other_peer.closed:
            return
        dc = ch.dc
        try:
            twin = other_peer.open_channel(
                ch.label,
                ordered=dc.ordered,
                max_retransmits=dc.maxRetransmits,
                max_packet_lifetime=dc.maxPacketLifeTime,
                protocol=dc.protocol,
            )
        except Exception:
            log.exception("could not open data channel %r on the other leg", ch.label)
            return
        back = AGENT_TO_CALLER if direction is CALLER_TO_AGENT else CALLER_TO_AGENT
        ch.on_message = lambda m, t: self._data(direction, ch.label, twin, m, t)
        twin.on_message = lambda m, t: self._data(back, ch.label, ch, m, t)
        ch.on_close = twin.close
        twin.on_close = ch.close

    def _data(
        self, direction: Direction, label: str, dst: Channel, message: str | bytes, t_ns: int
    ) -> None:
        self._last_activity = time.monotonic()
        dst.send(message)
        if self.observer is not None:
            try:
                self.observer.on_data(direction, label, message, t_ns)
            except Exception:
                self._observer_failed()

    # -- life -----------------------------------------------------------------------------

    def _state(self, direction: Direction, state: str) -> None:
        if self._end is not None:
            return
        caller = direction is CALLER_TO_AGENT
        if state == "connected" and not caller and self.observer is not None:
            status = self.agent_answer.status if self.agent_answer else 200
            try:
                t = self.agent.connected_ns or time.monotonic_ns()
                self.observer.on_upstream_open(t, status)
            except Exception:
                self._observer_failed()
        elif state == "failed":
            peer = self.caller if caller else self.agent
            if peer.connected_ns is None:
                if caller:
                    info = EndInfo(EndCause.ICE_FAILED, initiator="caller")
                else:
                    info = EndInfo(
                        EndCause.UPSTREAM_UNREACHABLE,
                        initiator="agent",
                        reason="the media path to the agent never connected",
                    )
            else:
                cause = EndCause.CALLER_VANISHED if caller else EndCause.AGENT_VANISHED
                info = EndInfo(cause, initiator="caller" if caller else "agent")
            self._spawn_end(info)
        elif state == "closed" and self.answered:
            cause = EndCause.CALLER_CLOSED if caller else EndCause.AGENT_CLOSED
            self._spawn_end(EndInfo(cause, initiator="caller" if caller else "agent"))

    def _ice_deadline(self) -> None:
        if self._end is not None:
            return
        if self.caller.connected_ns is None:
            self._spawn_end(
                EndInfo(
                    EndCause.ICE_FAILED,
                    initiator="caller",
                    reason="the caller's ICE did not connect in time",
                )
            )
        elif self.agent.connected_ns is None:
            self._spawn_end(
                EndInfo(
                    EndCause.UPSTREAM_UNREACHABLE,
                    initiator="agent",
                    reason="the media path to the agent did not connect in time",
                )
            )

    def _idle_check(self) -> None:
        timeout = self.config.idle_timeout_s
        if self._end is not None or not timeout:
            return
        idle = time.monotonic() - self._last_activity
        if idle >= timeout:
            self._spawn_end(EndInfo(EndCause.IDLE_TIMEOUT, initiator="proxy"))
        else:
            loop = asyncio.get_running_loop()
            self._timers.append(loop.call_later(timeout - idle, self._idle_check))

    def _spawn_end(self, info: EndInfo) -> None:
        if self._ending is None:
            self._ending = asyncio.get_running_loop().create_task(self.end(info))
            self.server.ending.add(self._ending)
            self._ending.add_done_callback(self.server.ending.discard)

    async def hang_up(self) -> None:
        """The caller's WHIP DELETE."""
        await self.end(EndInfo(EndCause.CALLER_CLOSED, initiator="caller"))

    async def add_candidates(self, candidates: list[dict[str, Any]]) -> None:
        await add_trickled(self.caller.pc, candidates)

    async def end(self, info: EndInfo) -> None:
        """Close both legs (once), hang up on the agent and report."""
        if self._end is not None:
            if self._ending is not None and self._ending is not asyncio.current_task():
                await asyncio.shield(self._ending)
            return
        self._end = info
        t_ns = time.monotonic_ns()
        for timer in self._timers:
            timer.cancel()
        self.server.relays.discard(self)
        self.server.admission.release()
        self.server.signaling.forget(self.id)
        await asyncio.gather(self.caller.close(), self.agent.close(), return_exceptions=True)
        answer = self.agent_answer
        if answer is not None and answer.session_url and info.cause is not EndCause.AGENT_CLOSED:
            await hang_up(self.server.http, answer.session_url)
        stats = RelayStats(
            packets=(self._dirs[0].packets, self._dirs[1].packets),
            passthrough=(self._dirs[0].passthrough, self._dirs[1].passthrough),
            transcoded=(self._dirs[0].transcoded, self._dirs[1].transcoded),
            dropped=(
                self._dirs[0].dropped + self.agent.track.dropped,
                self._dirs[1].dropped + self.caller.track.dropped,
            ),
            forward_ns=(self._dirs[0].forward_ns, self._dirs[1].forward_ns),
        )
        self.server.finished.append(stats)
        observer, self.observer = self.observer, None
        if observer is not None:
            try:
                observer.on_end(t_ns, info, stats)
            except Exception:
                self._observer_failed()
        # (Not held past the call: its measurement is freed at once, not when the cycles
        # between the relay and its peer connections are collected.)

    def _observer_failed(self) -> None:
        self.observer_errors += 1
        if self.observer_errors == 1:
            log.exception("measurement failed; the call goes on")


class WebRtcRelayServer:
    """Serves callers (WHIP and Pipecat signaling) and relays each call to the agent."""

    def __init__(self, config: WebRtcRelayConfig, observer_factory: RelayObserverFactory) -> None:
        self.config = config
        self.observer_factory = observer_factory
        self.relays: set[WebRtcRelay] = set()
        self.signaling = SignalingServer(
            self._open_session,
            whip_path=config.whip_path,
            header_timeout_s=config.header_timeout_s,
        )
        self.finished: deque[RelayStats] = deque(maxlen=4096)
        self.admission = Admission(config.max_calls)
        self.ending: set[asyncio.Task[None]] = set()  # calls ending on their own
        self._http: aiohttp.ClientSession | None = None

    @property
    def http(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = aiohttp.ClientSession()
        return self._http

    async def _open_session(self, offer: Offer) -> tuple[str, Session]:
        # Over the cap, the offer is refused before anything is spent on it: no peer
        # connection (so no UDP socket), no offer to the agent, no receipt.
        admission = self.admission
        if not admission.admit():
            n = admission.refused
            if n & (n - 1) == 0:  # the 1st, 2nd, 4th, 8th ... refusal
                log.warning(
                    "at capacity (%d calls in progress): offer refused with 503 "
                    "(%d refused so far)",
                    admission.active,
                    n,
                )
            raise HttpError(
                503,
                f"voxproxy: at capacity ({admission.limit} calls in progress); try again later",
                {"Retry-After": "1"},
            )
        try:
            relay = WebRtcRelay(self, offer)
        except BaseException:
            admission.release()
            raise
        self.relays.add(relay)
        answer = await relay.open()
        return answer, relay

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        return await self.signaling.start(host, port)

    async def stop(self, drain_s: float = 0.0) -> None:
        """Stop accepting; let calls finish for ``drain_s``; then end the rest."""
        await self.signaling.stop()
        deadline = time.monotonic() + drain_s
        while self.relays and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.gather(
            *(
                r.end(EndInfo(EndCause.PROXY_SHUTDOWN, initiator="proxy"))
                for r in list(self.relays)
            ),
            *list(self.ending),
            return_exceptions=True,
        )
        if self._http is not None:
            await self._http.close()
            self._http = None
