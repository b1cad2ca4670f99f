"""libopus through ctypes, straight to 16 kHz (``voxproxy/transports/webrtc/opus.py``):
the library is found once, a payload decodes to 20 ms at 16 kHz that keeps the tone it
carried, and a payload libopus refuses is an error, not noise."""

from __future__ import annotations

import numpy as np
import pytest

from voxproxy.transports.webrtc import codecs
from voxproxy.transports.webrtc.opus import OpusDecoder16k, libopus

RATE_IN = 48000


@pytest.fixture(scope="module")
def lib() -> object:
    found = libopus()
    assert found is not None, "libopus: neither PyAV's copy nor the system's loads"
    return found


def _tone(hz: float, seconds: float) -> np.ndarray:
    n = int(RATE_IN * seconds)
    return (np.sin(2 * np.pi * hz * np.arange(n) / RATE_IN) * 8000).astype(np.int16)


def test_the_library_is_loaded_once(lib: object) -> None:
    assert libopus() is lib


def test_a_payload_decodes_to_20_ms_at_16_khz_with_its_tone(lib: object) -> None:
    payloads = codecs.encode_clip("opus", _tone(440.0, 0.5), RATE_IN)
    dec = OpusDecoder16k(lib)
    pcm = np.concatenate([dec.decode(p) for p in payloads])
    assert pcm.dtype == np.int16
    assert pcm.size == len(payloads) * 320  # 20 ms each, at 16 kHz
    steady = pcm[4000:7200].astype(np.float64)  # past the codec's start-up
    spectrum = np.abs(np.fft.rfft(steady * np.hanning(steady.size)))
    peak_hz = np.argmax(spectrum) * OpusDecoder16k.RATE / steady.size
    assert abs(peak_hz - 440.0) < 10.0
    rms = np.sqrt(np.mean(steady**2))
    assert 8000 / np.sqrt(2) / 2 < rms < 8000  # the level kept, within a factor of 2


def test_each_decoder_keeps_its_own_state_and_buffer(lib: object) -> None:
    payloads = codecs.encode_clip("opus", _tone(300.0, 0.1), RATE_IN)
    a, b = OpusDecoder16k(lib), OpusDecoder16k(lib)
    first = a.decode(payloads[0])
    again = b.decode(payloads[0])
    np.testing.assert_array_equal(first, again)
    a.decode(payloads[1])
    np.testing.assert_array_equal(first, again)  # a copy, not a view of the buffer


def test_a_payload_libopus_refuses_is_an_error(lib: object) -> None:
    dec = OpusDecoder16k(lib)
    with pytest.raises(ValueError, match="opus_decode: error"):
        dec.decode(b"\xff" * 3)  # code 3 with no frame count: invalid (RFC 6716 3.2.5)
