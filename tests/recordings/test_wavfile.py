"""RIFF/WAVE as call recorders write it: PCM, μ-law and A-law, plain and extensible."""

from __future__ import annotations

import io
import struct
import wave

import numpy as np
import pytest

from voxproxy.core.audio.g711 import alaw_to_pcm, pcm_to_alaw, pcm_to_ulaw, ulaw_to_pcm
from voxproxy.recordings.wavfile import WavError, read_wav_bytes, wav_bytes


def _tone(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) * 6000).clip(-32768, 32767).astype(np.int16)


def test_pcm16_reads_as_the_standard_library_writes_it() -> None:
    left, right = _tone(800, 1), _tone(800, 2)
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(np.stack([left, right], axis=1).tobytes())
    audio = read_wav_bytes(buf.getvalue())
    assert (audio.sample_rate_hz, audio.encoding, audio.bits) == (16000, "pcm_s16le", 16)
    assert np.array_equal(audio.channels[0], left)
    assert np.array_equal(audio.channels[1], right)


@pytest.mark.parametrize(
    ("encoding", "encode", "decode"),
    [("ulaw", pcm_to_ulaw, ulaw_to_pcm), ("alaw", pcm_to_alaw, alaw_to_pcm)],
)
def test_g711_wav_decodes_as_the_core_decodes_the_wire(encoding, encode, decode) -> None:  # type: ignore[no-untyped-def]
    left, right = _tone(801, 3), _tone(801, 4)
    data = wav_bytes([left, right], 8000, encoding)
    tag = struct.unpack_from("<H", data, 20)[0]
    assert tag == (7 if encoding == "ulaw" else 6)  # WAVE_FORMAT_MULAW / _ALAW
    assert b"fact" in data[:60]  # as telephony recorders write it
    audio = read_wav_bytes(data)
    assert (audio.sample_rate_hz, audio.encoding, audio.bits) == (8000, encoding, 8)
    assert np.array_equal(audio.channels[0], decode(encode(left)))
    assert np.array_equal(audio.channels[1], decode(encode(right)))


def _riff(fmt: bytes, body: bytes, before_fmt: bytes = b"") -> bytes:
    chunks = before_fmt + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    chunks += b"data" + struct.pack("<I", len(body)) + body
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks


def test_extensible_format_and_other_chunks_before_fmt() -> None:
    pcm = _tone(100, 5)
    ulaw = pcm_to_ulaw(pcm)
    guid_tail = bytes.fromhex("000000001000800000aa00389b71")
    fmt = struct.pack("<HHIIHHHHI", 0xFFFE, 1, 8000, 8000, 1, 8, 22, 8, 0)
    fmt += struct.pack("<H", 7) + guid_tail  # sub-format: μ-law
    odd = b"LIST" + struct.pack("<I", 3) + b"abc" + b"\0"  # an odd chunk and its pad byte
    audio = read_wav_bytes(_riff(fmt, ulaw, before_fmt=odd))
    assert audio.encoding == "ulaw"
    assert np.array_equal(audio.channels[0], ulaw_to_pcm(ulaw))


def test_24_bit_and_float_and_8_bit() -> None:
    pcm = _tone(50, 6)
    b24 = b"".join(struct.pack("<i", int(v) << 8)[:3] for v in pcm)
    a24 = read_wav_bytes(_riff(struct.pack("<HHIIHH", 1, 1, 8000, 24000, 3, 24), b24))
    assert np.array_equal(a24.channels[0], pcm)
    f32 = (pcm.astype(np.float32) / 32768.0).astype("<f4").tobytes()
    af = read_wav_bytes(_riff(struct.pack("<HHIIHH", 3, 1, 8000, 32000, 4, 32), f32))
    assert np.array_equal(af.channels[0], pcm)
    u8 = bytes([0, 128, 255])
    a8 = read_wav_bytes(_riff(struct.pack("<HHIIHH", 1, 1, 8000, 8000, 1, 8), u8))
    assert a8.channels[0].tolist() == [-32768, 0, 32512]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not a RIFF/WAVE file"),
        (b"hello, this is a text file\n", "not a RIFF/WAVE file"),
        (wav_bytes([_tone(1000, 7), _tone(1000, 8)], 8000, "ulaw")[:900], "truncated"),
        (wav_bytes([_tone(10, 7)], 8000)[:30], "truncated"),
        (_riff(struct.pack("<HHIIHH", 2, 1, 8000, 8000, 1, 4), b"\0\0"), "unsupported"),
        (_riff(struct.pack("<HHIIHH", 1, 0, 8000, 8000, 1, 16), b"\0\0"), "0 channel"),
    ],
    ids=["empty", "text", "truncated-data", "truncated-fmt", "adpcm", "no-channels"],
)
def test_damaged_files_are_one_line_errors(data: bytes, message: str) -> None:
    with pytest.raises(WavError, match=message) as info:
        read_wav_bytes(data)
    assert "\n" not in str(info.value)


def test_a_header_the_recorder_never_finished_is_refused() -> None:
    data = bytearray(wav_bytes([_tone(100, 9)], 8000))
    at = data.index(b"data") + 4
    data[at : at + 4] = struct.pack("<I", 0xFFFFFFFF)
    with pytest.raises(WavError, match="never finished"):
        read_wav_bytes(bytes(data))
