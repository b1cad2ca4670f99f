"""G.711 μ-law and A-law, by lookup table.

The tables follow ITU-T Recommendation G.711 (1988): μ-law with bias 0x84 (132),
A-law with the even-bit inversion mask 0x55; they agree bit for bit with the
classic Sun reference coder (tested against CPython's ``audioop``). Decoding is one
256-entry table; encoding is one 65536-entry table indexed by the sample's
unsigned 16-bit pattern, both built once with numpy at import. Where the standard
library's ``audioop`` (Python 3.12 and before) or its continuation ``audioop-lts``
(3.13 on) is present, and agrees with the tables on every code and sample, coding runs
through it instead: the same samples, for less than half the work (docs/performance.md,
"Choices in the code, measured"), and a wire's frame is coded once per message.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from typing import Final

import numpy as np
import numpy.typing as npt

from voxproxy.core.events import Pcm

_MULAW_BIAS = 0x84


def _build_ulaw_decode() -> Pcm:
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    sign = u & 0x80
    exponent = (u >> 4) & 0x07
    mantissa = u & 0x0F
    magnitude = (((mantissa << 3) + _MULAW_BIAS) << exponent) - _MULAW_BIAS
    return np.where(sign != 0, -magnitude, magnitude).astype(np.int16)


def _build_alaw_decode() -> Pcm:
    a = np.arange(256, dtype=np.int32) ^ 0x55
    sign = a & 0x80
    exponent = (a >> 4) & 0x07
    mantissa = a & 0x0F
    magnitude = np.where(
        exponent == 0,
        (mantissa << 4) + 8,
        ((mantissa << 4) + 0x108) << np.maximum(exponent - 1, 0),
    )
    # In A-law a set sign bit means a positive sample.
    return np.where(sign != 0, magnitude, -magnitude).astype(np.int16)


def _segment(magnitude: npt.NDArray[np.int32], first_boundary: int) -> npt.NDArray[np.int32]:
    """Index of the highest set bit above ``first_boundary``, clamped to 0..7."""
    seg = np.zeros_like(magnitude)
    bound = first_boundary
    for s in range(1, 8):
        seg = np.where(magnitude >= bound, s, seg)
        bound <<= 1
    return seg


def _build_ulaw_encode() -> npt.NDArray[np.uint8]:
    # The Sun Microsystems reference coder (g711.c, public domain), as CPython's audioop
    # used it: 14-bit magnitude, bias 0x21, segment s ends at (0x40 << s) - 1.
    x = np.arange(65536, dtype=np.int32)
    x = np.where(x >= 32768, x - 65536, x) >> 2
    mask = np.where(x < 0, 0x7F, 0xFF)
    magnitude = np.minimum(np.where(x < 0, -x, x), 8159) + 0x21
    seg = np.zeros_like(magnitude)
    for s in range(1, 8):
        seg = np.where(magnitude >= (0x40 << (s - 1)), s, seg)
    uval = (seg << 4) | ((magnitude >> (seg + 1)) & 0x0F)
    uval = np.where(magnitude > 0x1FFF, 0x7F, uval)  # beyond the last segment: clip
    table: npt.NDArray[np.uint8] = ((uval ^ mask) & 0xFF).astype(np.uint8)
    return table


def _build_alaw_encode() -> npt.NDArray[np.uint8]:
    x = np.arange(65536, dtype=np.int32)
    x = np.where(x >= 32768, x - 65536, x)
    sign = np.where(x >= 0, 0x80, 0)
    magnitude = np.where(x >= 0, x, -x - 1) >> 3  # 13-bit magnitude
    magnitude = np.minimum(magnitude, 0x0FFF)
    exponent = _segment(magnitude, 0x20)
    mantissa = np.where(exponent == 0, magnitude >> 1, magnitude >> exponent) & 0x0F
    table: npt.NDArray[np.uint8] = (((sign | (exponent << 4) | mantissa) ^ 0x55) & 0xFF).astype(
        np.uint8
    )
    return table


ULAW_DECODE = _build_ulaw_decode()
ALAW_DECODE = _build_alaw_decode()
_ULAW_ENCODE = _build_ulaw_encode()
_ALAW_ENCODE = _build_alaw_encode()


# Decoding runs once per message: take gives the same samples as indexing, a third
# cheaper on a 20 ms frame, and frombuffer with a dtype object (given by position) half
# the cost of one named by its type (170 against 330 ns).
# (Final: the compiled build, voxproxy/native.py, holds them as constants, no look-up.)
_U8: Final = np.dtype(np.uint8)
_I16: Final = np.dtype(np.int16)
_frombuffer: Final = np.frombuffer
_ulaw_take: Final = ULAW_DECODE.take
_alaw_take: Final = ALAW_DECODE.take

Codec = Callable[[bytes, int], bytes]


def _audioop_codecs() -> tuple[Codec, Codec, Codec, Codec] | None:
    """``audioop``'s μ-law and A-law decoders to 16-bit samples and encoders from them,
    when they agree with the tables on every code and every sample (else, or without the
    module: None, and the tables decode and encode)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # (3.11-3.12: deprecated)
            import audioop
    except ImportError:
        return None
    codes = bytes(range(256))
    for decode, table in ((audioop.ulaw2lin, ULAW_DECODE), (audioop.alaw2lin, ALAW_DECODE)):
        if not np.array_equal(_frombuffer(decode(codes, 2), _I16), table):
            return None
    samples = np.arange(-32768, 32768, dtype=np.int16)
    for encode, enc_table in ((audioop.lin2ulaw, _ULAW_ENCODE), (audioop.lin2alaw, _ALAW_ENCODE)):
        if encode(samples.tobytes(), 2) != enc_table[samples.view(np.uint16)].tobytes():
            return None
    return audioop.ulaw2lin, audioop.alaw2lin, audioop.lin2ulaw, audioop.lin2alaw


_codecs = _audioop_codecs()
AUDIOOP: Final = _codecs is not None  # coding runs through audioop
_ulaw2lin: Final = _codecs[0] if _codecs is not None else None
_alaw2lin: Final = _codecs[1] if _codecs is not None else None
_lin2ulaw: Final = _codecs[2] if _codecs is not None else None
_lin2alaw: Final = _codecs[3] if _codecs is not None else None


def _ulaw_tables(data: bytes) -> Pcm:
    return _ulaw_take(_frombuffer(data, _U8))


def _alaw_tables(data: bytes) -> Pcm:
    return _alaw_take(_frombuffer(data, _U8))


def ulaw_to_pcm(data: bytes) -> Pcm:
    """μ-law bytes to 16-bit samples (through audioop: read-only, on its buffer)."""
    if _ulaw2lin is not None:
        return _frombuffer(_ulaw2lin(data, 2), _I16)
    return _ulaw_tables(data)


def alaw_to_pcm(data: bytes) -> Pcm:
    """A-law bytes to 16-bit samples (through audioop: read-only, on its buffer)."""
    if _alaw2lin is not None:
        return _frombuffer(_alaw2lin(data, 2), _I16)
    return _alaw_tables(data)


def _ulaw_encode_tables(pcm: Pcm) -> bytes:
    return _ULAW_ENCODE[pcm.view(np.uint16)].tobytes()


def _alaw_encode_tables(pcm: Pcm) -> bytes:
    return _ALAW_ENCODE[pcm.view(np.uint16)].tobytes()


def pcm_to_ulaw(pcm: Pcm) -> bytes:
    """16-bit samples to μ-law bytes (through audioop where it agrees with the table)."""
    if _lin2ulaw is not None:
        return _lin2ulaw(pcm.tobytes(), 2)
    return _ulaw_encode_tables(pcm)


def pcm_to_alaw(pcm: Pcm) -> bytes:
    """16-bit samples to A-law bytes (through audioop where it agrees with the table)."""
    if _lin2alaw is not None:
        return _lin2alaw(pcm.tobytes(), 2)
    return _alaw_encode_tables(pcm)


# -- what the codec does to a level ------------------------------------------------------

G711_ENCODINGS = ("ulaw", "alaw")
# Past this many dB below the true level the band stops: the window's power may then be
# lost in the codec altogether, and a walk further down would only follow the floor.
MAX_BAND_DB = 6.0


@functools.cache
def _error_rms(encoding: str) -> npt.NDArray[np.float64]:
    """``[m]``: the RMS of the codec's error (decoded minus original sample) over every
    16-bit sample of magnitude up to ``m``, from the codec's own tables."""
    samples = np.arange(-32768, 32768, dtype=np.int16)
    if encoding == "ulaw":
        decoded = ulaw_to_pcm(pcm_to_ulaw(samples))
    else:
        decoded = alaw_to_pcm(pcm_to_alaw(samples))
    error = decoded.astype(np.float64) - samples
    magnitude = np.abs(samples.astype(np.int64))
    total = np.bincount(magnitude, weights=error * error, minlength=32769)
    count = np.bincount(magnitude, minlength=32769)
    rms: npt.NDArray[np.float64] = np.sqrt(np.cumsum(total) / np.cumsum(count))
    return rms


def quantization_band_db(encoding: str | None, level_dbfs: float) -> tuple[float, float]:
    """How far (dB down, dB up) the wire may put the power of a window whose true power
    is ``level_dbfs``, once encoded in ``encoding`` and decoded; (0, 0) for a linear one.

    The decoded window is the true one plus the codec's error, so its RMS lies within the
    error's RMS of the true RMS (Minkowski's inequality). For the error's RMS this takes
    the codec's over every sample up to twice the window's RMS (where nearly all of a
    window's samples lie), from the codec's tables: at the -75 dBFS where a -40 dBFS
    talker's edges are judged, a mu-law window may read 4.3 dB high or (at most
    ``MAX_BAND_DB``) low; at -55 dBFS, half a dB either way. A stand-in for each window's
    own error, so a typical band rather than a bound: of the corpus's speech at -80..-40
    dBFS, 96% of 3 ms windows (mu-law) and 99.7% (A-law) decode within it
    (``tests/core/audio/test_g711.py``)."""
    if encoding not in G711_ENCODINGS:
        return 0.0, 0.0
    amplitude = 32768.0 * 10.0 ** (level_dbfs / 20.0)
    table = _error_rms(encoding)
    error = float(table[min(table.size - 1, math.ceil(2.0 * amplitude))])
    ratio = error / amplitude
    up = 20.0 * math.log10(1.0 + ratio)
    down = -20.0 * math.log10(max(1.0 - ratio, 10.0 ** (-MAX_BAND_DB / 20.0)))
    return down, up
