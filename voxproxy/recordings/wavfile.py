"""RIFF/WAVE read and write, for the encodings call recorders use.

Python's :mod:`wave` reads integer PCM only; telephony recorders write 8-bit G.711
(``WAVE_FORMAT_MULAW`` 7, ``WAVE_FORMAT_ALAW`` 6, often with a ``fact`` chunk and an
18-byte ``fmt``), so the header is parsed here: the ``fmt `` chunk (plain or
``WAVE_FORMAT_EXTENSIBLE``, whose sub-format GUID carries the format tag in its first
two bytes) and the ``data`` chunk, every other chunk skipped (with its pad byte). The
samples come back as 16-bit PCM per channel, decoded with the core's G.711 tables.

Read: integer PCM of 8 (unsigned), 16, 24 and 32 bits, 32-bit IEEE float, μ-law and
A-law. A file whose ``data`` chunk claims more bytes than it holds is truncated and
refused (:class:`WavError`), as is a header this module cannot read; a recorder that
never finished its header (``data`` size 0 or 0xFFFFFFFF, the sign of a crashed
recorder) likewise.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from voxproxy.core.audio.g711 import ALAW_DECODE, ULAW_DECODE, pcm_to_alaw, pcm_to_ulaw
from voxproxy.core.errors import FixtureError
from voxproxy.core.events import Pcm

PCM, FLOAT, ALAW, MULAW, EXTENSIBLE = 1, 3, 6, 7, 0xFFFE
ENCODINGS = {PCM: "pcm", FLOAT: "float", ALAW: "alaw", MULAW: "ulaw"}


class WavError(FixtureError):
    """A file that is not a WAV this module can read (one line: what is wrong)."""


@dataclass(frozen=True, slots=True)
class WavAudio:
    """Decoded samples, one int16 array per channel, and what the file held."""

    channels: list[Pcm]
    sample_rate_hz: int
    encoding: str  # voxproxy's names: pcm_s16le, pcm_u8, pcm_s24le, pcm_s32le, float, ulaw, alaw
    bits: int


@dataclass(frozen=True, slots=True)
class _Format:
    tag: int
    channels: int
    rate: int
    block_align: int
    bits: int


def _parse_fmt(body: bytes) -> _Format:
    if len(body) < 16:
        raise WavError(f"its fmt chunk is {len(body)} bytes, fewer than the 16 a WAV needs")
    tag, channels, rate, _byte_rate, block_align, bits = struct.unpack_from("<HHIIHH", body)
    if tag == EXTENSIBLE:
        if len(body) < 40:
            raise WavError("its WAVE_FORMAT_EXTENSIBLE fmt chunk is cut short")
        tag = struct.unpack_from("<H", body, 24)[0]  # the sub-format GUID's first two bytes
    return _Format(tag, channels, rate, block_align, bits)


def _chunks(data: bytes) -> dict[bytes, tuple[int, int]]:
    """Each chunk id -> (offset of its body, its declared size): the first of each."""
    found: dict[bytes, tuple[int, int]] = {}
    pos = 12
    while pos + 8 <= len(data):
        cid = data[pos : pos + 4]
        size = struct.unpack_from("<I", data, pos + 4)[0]
        found.setdefault(cid, (pos + 8, size))
        if cid == b"data":
            break  # the samples run to the end (what follows them is not needed)
        pos += 8 + size + (size & 1)
    return found


def read_wav_bytes(data: bytes) -> WavAudio:
    """Decode a whole WAV file's bytes. :class:`WavError` with the reason otherwise."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise WavError("not a RIFF/WAVE file")
    chunks = _chunks(data)
    if b"fmt " not in chunks:
        raise WavError("no fmt chunk before its data")
    at, size = chunks[b"fmt "]
    if at + size > len(data):
        raise WavError("truncated inside its fmt chunk")
    fmt = _parse_fmt(data[at : at + size])
    if b"data" not in chunks:
        raise WavError("truncated: no data chunk")
    at, size = chunks[b"data"]
    held = len(data) - at
    if size in (0, 0xFFFFFFFF) and held > 0:
        raise WavError(
            f"its header was never finished (data size {size:#x}): the recorder stopped early"
        )
    if size > held:
        raise WavError(f"truncated: its data chunk declares {size} bytes, the file holds {held}")
    if fmt.channels <= 0 or fmt.rate <= 0:
        raise WavError(f"{fmt.channels} channel(s) at {fmt.rate} Hz")
    return _decode(data[at : at + size], fmt)


def _decode(body: bytes, fmt: _Format) -> WavAudio:
    tag, n, bits = fmt.tag, fmt.channels, fmt.bits
    width = {8: 1, 16: 2, 24: 3, 32: 4}.get(bits)
    if tag not in ENCODINGS or width is None or (tag in (ALAW, MULAW) and bits != 8):
        raise WavError(f"unsupported encoding (format tag {tag}, {bits} bits)")
    if tag == FLOAT and bits != 32:
        raise WavError(f"unsupported float of {bits} bits")
    frame = width * n
    usable = len(body) - len(body) % frame
    raw = np.frombuffer(body, dtype=np.uint8, count=usable)
    samples: npt.NDArray[np.int16]
    if tag == MULAW:
        samples, encoding = ULAW_DECODE[raw], "ulaw"
    elif tag == ALAW:
        samples, encoding = ALAW_DECODE[raw], "alaw"
    elif tag == FLOAT:
        f = np.frombuffer(body, dtype="<f4", count=usable // 4).astype(np.float64)
        samples = np.clip(np.round(f * 32768.0), -32768, 32767).astype(np.int16)
        encoding = "float"
    elif bits == 8:
        samples = ((raw.astype(np.int16) - 128) << 8).astype(np.int16)
        encoding = "pcm_u8"
    elif bits == 16:
        samples = np.frombuffer(body, dtype="<i2", count=usable // 2).astype(np.int16)
        encoding = "pcm_s16le"
    elif bits == 24:
        # The top two bytes of each little-endian 24-bit sample are its 16-bit value.
        samples = raw.reshape(-1, 3)[:, 1:].copy().view("<i2").reshape(-1).astype(np.int16)
        encoding = "pcm_s24le"
    else:
        samples = (np.frombuffer(body, dtype="<i4", count=usable // 4) >> 16).astype(np.int16)
        encoding = "pcm_s32le"
    per = samples.reshape(-1, n)
    channels = [np.ascontiguousarray(per[:, c]) for c in range(n)]
    return WavAudio(channels, fmt.rate, encoding, bits)


def wav_bytes(channels: list[Pcm], sample_rate_hz: int, encoding: str = "pcm_s16le") -> bytes:
    """A WAV file of ``channels`` (equal lengths) as ``pcm_s16le``, ``ulaw`` or ``alaw``
    (the G.711 ones with an 18-byte fmt and a fact chunk, as telephony recorders write)."""
    n = len(channels)
    inter = np.stack(channels, axis=1).reshape(-1).astype(np.int16)
    if encoding == "pcm_s16le":
        body, tag, bits = inter.astype("<i2").tobytes(), PCM, 16
        fmt = struct.pack("<HHIIHH", tag, n, sample_rate_hz, sample_rate_hz * 2 * n, 2 * n, bits)
        extra = b""
    elif encoding in ("ulaw", "alaw"):
        body = pcm_to_ulaw(inter) if encoding == "ulaw" else pcm_to_alaw(inter)
        tag, bits = (MULAW if encoding == "ulaw" else ALAW), 8
        fmt = struct.pack("<HHIIHHH", tag, n, sample_rate_hz, sample_rate_hz * n, n, bits, 0)
        extra = b"fact" + struct.pack("<II", 4, len(body) // n)
    else:
        raise ValueError(f"cannot write {encoding!r}")
    pad = b"\0" if len(body) & 1 else b""
    chunks = (
        b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + extra
        + b"data"
        + struct.pack("<I", len(body))
        + body
        + pad
    )
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks
