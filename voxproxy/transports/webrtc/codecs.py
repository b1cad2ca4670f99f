"""Audio codecs on RTP payloads: what was negotiated, decoding a copy for
measurement (:class:`MeasuredStream`), re-encoding where the two legs' codecs differ.
"""

from __future__ import annotations

import fractions
import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from aiortc import (
    RTCRtpCodecParameters,
)
from aiortc.codecs import get_capabilities, get_decoder, get_encoder
from aiortc.jitterbuffer import JitterFrame
from av import AudioFrame, AudioResampler, CodecContext
from av.packet import Packet

from voxproxy.core.audio.g711 import alaw_to_pcm, ulaw_to_pcm
from voxproxy.core.events import Pcm
from voxproxy.core.timebase import NS_PER_MS
from voxproxy.transports.webrtc.opus import OpusDecoder16k, libopus


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


@dataclass(slots=True)
class RtpIn:
    """One received RTP packet: its payload as sent, stamped on arrival."""

    payload: bytes
    timestamp: int  # RTP timestamp, unwrapped, from the stream's first packet
    sequence: int
    marker: bool
    t_ns: int  # arrival, time.monotonic_ns(): when its datagram reached the host
    codec: CodecInfo
    kernel: bool = False  # t_ns is the kernel's receive time (else: when the loop read it)


@functools.lru_cache(maxsize=16)
def _time_base(clock_rate: int) -> fractions.Fraction:
    return fractions.Fraction(1, clock_rate)


def frame_ticks(codec: CodecInfo) -> int:
    """RTP clock ticks in one 20 ms payload."""
    return codec.clock_rate // 50


class AudioDecoder:
    """Decodes one stream's RTP payloads to mono 16-bit PCM (for measurement and transcoding).

    Opus is decoded by libopus straight to mono at 16 kHz (:class:`OpusDecoder16k`)
    or, where libopus cannot be loaded directly, through PyAV at 48 kHz (which
    still costs less than aiortc's stereo decoder); G.711 is decoded by
    voxproxy's own tables; anything else by aiortc's decoder, downmixed.
    """

    def __init__(self, codec: CodecInfo, *, direct: bool = True) -> None:
        self.codec = codec
        self._opus: Any = None
        self._opus16: OpusDecoder16k | None = None
        self._other: Any = None
        lib = libopus() if codec.name == "opus" and direct else None
        if lib is not None:
            self._opus16 = OpusDecoder16k(lib)
            self.sample_rate_hz = OpusDecoder16k.RATE
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
    3 dB; a 73-tap windowed sinc (for 48 -> 16 kHz) does neither (its cost:
    docs/performance.md, "Choices in the code, measured"). Its delay, (taps - 1) / 2
    input samples (0.75 ms at 48 kHz), is not taken back: output sample ``i`` is
    centred on input sample ``i * factor``.
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
