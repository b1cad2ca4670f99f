"""Rate conversion, only as far as voice activity detection needs it.

webrtcvad accepts 8, 16, 32 and 48 kHz. Audio at those rates is used as it is;
an integer multiple of 8 kHz (24 kHz from OpenAI Realtime, for example) is
decimated by averaging each group of samples (a boxcar low-pass: enough for a
speech detector, and it keeps every output sample inside its input group, so
timing is exact); any other rate is converted to 16 kHz by linear
interpolation. Converters keep state between chunks so a stream can be fed in
pieces of any size.
"""

from __future__ import annotations

import numpy as np

from voxproxy.core.events import Pcm

VAD_RATES = (8000, 16000, 32000, 48000)


def vad_rate_for(sample_rate_hz: int) -> int:
    """The rate the detector runs at for a stream at ``sample_rate_hz``."""
    if sample_rate_hz in VAD_RATES:
        return sample_rate_hz
    if sample_rate_hz % 8000 == 0 and sample_rate_hz > 8000:
        return 8000
    return 16000


class Converter:
    """Converts one stream to its VAD rate, chunk by chunk."""

    __slots__ = ("_carry", "_factor", "_phase", "in_rate_hz", "out_rate_hz")

    def __init__(self, in_rate_hz: int) -> None:
        if in_rate_hz <= 0:
            raise ValueError(f"sample rate must be positive, got {in_rate_hz}")
        self.in_rate_hz = in_rate_hz
        self.out_rate_hz = vad_rate_for(in_rate_hz)
        self._factor = in_rate_hz // 8000 if self.out_rate_hz == 8000 else 1
        self._carry = np.zeros(0, dtype=np.int16)
        self._phase = 0.0  # linear interpolation: input position of the next output sample

    @property
    def passthrough(self) -> bool:
        return self.in_rate_hz == self.out_rate_hz

    def convert(self, pcm: Pcm) -> Pcm:
        if self.in_rate_hz == self.out_rate_hz:
            return pcm
        if self.out_rate_hz == 8000 and self.in_rate_hz % 8000 == 0:
            return self._decimate(pcm)
        return self._interpolate(pcm)

    def _decimate(self, pcm: Pcm) -> Pcm:
        f = self._factor
        x = np.concatenate((self._carry, pcm)) if self._carry.size else pcm
        n = (x.size // f) * f
        self._carry = x[n:].copy()
        if n == 0:
            return np.zeros(0, dtype=np.int16)
        out: Pcm = x[:n].reshape(-1, f).astype(np.int32).mean(axis=1).astype(np.int16)
        return out

    def _interpolate(self, pcm: Pcm) -> Pcm:
        x = np.concatenate((self._carry, pcm)) if self._carry.size else pcm
        if x.size < 2:
            self._carry = x.copy()
            return np.zeros(0, dtype=np.int16)
        step = self.in_rate_hz / self.out_rate_hz
        positions = np.arange(self._phase, x.size - 1, step)
        out = np.interp(positions, np.arange(x.size), x.astype(np.float64))
        next_pos = self._phase + positions.size * step
        # With a step above 2 the next position can lie beyond this chunk's last
        # sample: keep the whole remainder of the phase instead of dropping it.
        keep_from = min(int(next_pos), x.size)
        self._carry = x[keep_from:].copy()
        self._phase = next_pos - keep_from
        result: Pcm = out.astype(np.int16)
        return result


def resample_linear(pcm: Pcm, in_rate_hz: int, out_rate_hz: int) -> Pcm:
    """A whole clip at another rate, by linear interpolation (timing kept: output sample
    ``k`` is the input at ``k * in_rate_hz / out_rate_hz``). For test and load-generator
    audio (a 16 kHz fixture sent as OpenAI Realtime's 24 kHz pcm16, say), not for the core.
    """
    if in_rate_hz == out_rate_hz or pcm.size == 0:
        return pcm
    n = pcm.size * out_rate_hz // in_rate_hz
    positions = np.arange(n) * (in_rate_hz / out_rate_hz)
    out: Pcm = np.rint(np.interp(positions, np.arange(pcm.size), pcm.astype(np.float64))).astype(
        np.int16
    )
    return out


def resample_clip(pcm: Pcm, in_rate_hz: int, out_rate_hz: int) -> Pcm:
    """A whole recording at another rate with a polyphase low-pass filter (scipy's
    ``resample_poly``: no aliasing from a 44.1 kHz file brought to 16 kHz). For caller
    recordings loaded once, not for the core."""
    from math import gcd

    from scipy.signal import resample_poly

    if in_rate_hz == out_rate_hz or pcm.size == 0:
        return pcm
    g = gcd(in_rate_hz, out_rate_hz)
    y = resample_poly(pcm.astype(np.float64), out_rate_hz // g, in_rate_hz // g)
    out: Pcm = np.clip(np.rint(y), -32768, 32767).astype(np.int16)
    return out
