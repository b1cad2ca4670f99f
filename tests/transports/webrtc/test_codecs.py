"""voxproxy.transports.webrtc.codecs: negotiated codecs, decoding a copy for measurement,
the 48 -> 16 kHz decimator, what Opus carries over a pause, and encoding.

Everything here runs on handed-in payloads and arrival times: no peer connection, no clock.
"""

from __future__ import annotations

import numpy as np
import pytest
from aiortc import RTCRtpCodecParameters

from voxproxy.core.audio.g711 import pcm_to_alaw, pcm_to_ulaw, ulaw_to_pcm
from voxproxy.core.timebase import NS_PER_MS
from voxproxy.mockagent.config import MockAgentConfig, prepare_clips
from voxproxy.mockagent.webrtc import _clips48
from voxproxy.simcall.webrtc import CLIP_RATE_HZ
from voxproxy.transports.webrtc import codecs


def _tone(hz: float, rate: int, n: int, amplitude: float = 10000.0) -> np.ndarray:
    return (np.sin(2 * np.pi * hz * np.arange(n) / rate) * amplitude).astype(np.int16)


def _params(mime: str, rate: int, channels: int | None, pt: int | None) -> RTCRtpCodecParameters:
    return RTCRtpCodecParameters(mimeType=mime, clockRate=rate, channels=channels, payloadType=pt)


# -- what was negotiated ---------------------------------------------------------------------


def test_codec_info_names_the_codec_in_lower_case_from_the_mime_type() -> None:
    info = codecs.CodecInfo.of(_params("audio/OPUS", 48000, 2, 111))
    assert (info.name, info.clock_rate, info.channels, info.payload_type) == ("opus", 48000, 2, 111)
    assert codecs.CodecInfo.of(_params("audio/PCMU", 8000, None, None)).payload_type == -1
    assert info.time_base.denominator == 48000 and info.time_base.numerator == 1


def test_same_as_ignores_the_payload_type_and_reads_no_channel_count_as_mono() -> None:
    a = codecs.CodecInfo.of(_params("audio/PCMU", 8000, None, 0))
    assert a.same_as(codecs.CodecInfo.of(_params("audio/pcmu", 8000, 1, 96)))
    assert not a.same_as(codecs.CodecInfo.of(_params("audio/PCMA", 8000, None, 8)))
    assert not a.same_as(codecs.CodecInfo.of(_params("audio/PCMU", 16000, None, 0)))
    assert not a.same_as(codecs.CodecInfo.of(_params("audio/PCMU", 8000, 2, 0)))


@pytest.mark.parametrize(("name", "pt", "rate"), [("pcmu", 0, 8000), ("pcma", 8, 8000)])
def test_default_codec_takes_the_static_payload_type(name: str, pt: int, rate: int) -> None:
    info = codecs.default_codec(name.upper())
    assert (info.name, info.payload_type, info.clock_rate) == (name, pt, rate)
    assert codecs.frame_ticks(info) == rate // 50  # 20 ms


def test_default_codec_opus_and_an_unknown_name() -> None:
    opus = codecs.default_codec("opus")
    assert (opus.payload_type, opus.clock_rate, codecs.frame_ticks(opus)) == (111, 48000, 960)
    with pytest.raises(ValueError, match="speex"):
        codecs.default_codec("speex")


def test_measurement_rate_takes_48_khz_to_16_and_leaves_others_alone() -> None:
    assert codecs.measurement_rate(48000) == (16000, 3)
    assert codecs.measurement_rate(16000) == (16000, 1)
    assert codecs.measurement_rate(8000) == (8000, 1)


# -- decoding ---------------------------------------------------------------------------------


def test_g711_payloads_decode_with_voxproxys_own_tables() -> None:
    pcm = _tone(440, 8000, 160)
    mu = codecs.AudioDecoder(codecs.default_codec("pcmu"))
    assert mu.sample_rate_hz == 8000
    assert np.array_equal(mu.decode(pcm_to_ulaw(pcm), 0), ulaw_to_pcm(pcm_to_ulaw(pcm)))
    a = codecs.AudioDecoder(codecs.default_codec("pcma"))
    out = a.decode(pcm_to_alaw(pcm), 0)
    assert out.dtype == np.int16 and out.size == 160
    assert np.max(np.abs(out.astype(int) - pcm)) < 400  # A-law's step at this level


@pytest.mark.parametrize("direct", [True, False])
def test_opus_decodes_a_20_ms_payload_to_mono(direct: bool) -> None:
    payload = codecs.encode_clip("opus", _tone(440, 48000, 960), 48000)[0]
    dec = codecs.AudioDecoder(codecs.default_codec("opus"), direct=direct)
    out = dec.decode(payload, 0)
    assert out.dtype == np.int16 and out.ndim == 1
    assert out.size == dec.sample_rate_hz // 50  # 20 ms at the decoder's own rate
    assert dec.errors == 0


def test_a_payload_that_does_not_decode_is_counted_and_yields_no_samples() -> None:
    dec = codecs.AudioDecoder(codecs.default_codec("opus"))
    out = dec.decode(b"\xff" * 3, 0)  # no Opus packet
    assert out.size == 0 and out.dtype == np.int16
    assert dec.errors == 1


# -- the decimator ----------------------------------------------------------------------------


def _chunked(d: codecs.Decimator, x: np.ndarray, size: int) -> np.ndarray:
    return np.concatenate([d(x[k : k + size]) for k in range(0, x.size, size)])


def test_decimator_keeps_time_and_stops_aliases() -> None:
    tone = _tone(1000, 48000, 48000)
    out = _chunked(codecs.Decimator(3), tone, 960)
    expected = np.sin(2 * np.pi * 1000 * np.arange(out.size) * 3 / 48000) * 10000
    assert np.max(np.abs(out[100:-100] - expected[100:-100])) < 30  # aligned, not delayed
    folded = _chunked(codecs.Decimator(3), _tone(12000, 48000, 48000), 960)
    assert np.abs(folded[100:]).max() < 10  # 12 kHz does not fold into the 16 kHz band


def test_decimator_output_does_not_depend_on_how_the_input_is_cut() -> None:
    x = np.random.default_rng(7).integers(-20000, 20000, 4801).astype(np.int16)
    whole = codecs.Decimator(3)(x)
    for size in (1, 7, 960):
        assert np.array_equal(_chunked(codecs.Decimator(3), x, size), whole), size


def test_decimator_by_one_passes_samples_through_and_a_short_chunk_waits() -> None:
    x = _tone(300, 16000, 320)
    assert codecs.Decimator(1)(x) is x
    d = codecs.Decimator(3)
    assert d(x[:5]).size == 0  # not yet enough input for one output sample's filter
    assert d(np.zeros(3000, dtype=np.int16)).size > 0


# -- what Opus carries over a pause -----------------------------------------------------------


def _rtp(payload: bytes, t_ns: int, codec: codecs.CodecInfo) -> codecs.RtpIn:
    return codecs.RtpIn(payload, 0, 0, False, t_ns, codec)


def test_what_opus_carries_over_a_pause_is_not_heard() -> None:
    clips = _clips48(prepare_clips(MockAgentConfig(responses=("agent_order_status",))))
    speech = clips["agent_order_status"].pcm
    codec = codecs.default_codec("opus")
    enc, heard = codecs.AudioEncoder(codec), codecs.MeasuredStream()
    t = 1_000_000_000
    for k in range(0, 960 * 79, 960):  # cut mid-word, as a barge-in does
        for p in enc.encode(speech[k : k + 960], CLIP_RATE_HZ):
            heard(_rtp(p, t, codec))
        t += 20_000_000
    t += 2_000_000_000  # the sender sends nothing for 2 s, then silence
    levels = []
    for _ in range(6):
        for p in enc.encode(np.zeros(960, dtype=np.int16), CLIP_RATE_HZ):
            levels.append(int(np.abs(heard(_rtp(p, t, codec))).max()))
        t += 20_000_000
    assert heard.pauses == 1 and heard.blanked >= 2
    assert max(levels) < 100, levels  # the burst of old speech never reached the detector


def test_after_a_pause_new_louder_audio_ends_the_blanking_at_once() -> None:
    codec = codecs.default_codec("opus")
    heard = codecs.MeasuredStream()
    quiet, loud = np.full(320, 10, np.int16), np.full(320, 8000, np.int16)
    t = 0
    assert np.array_equal(heard.for_vad(_rtp(b"", t, codec), loud), loud)  # first packet
    t += codecs.PAUSE_NS + 1
    assert not heard.for_vad(_rtp(b"", t, codec), loud).any()  # first after the pause: blanked
    t += 20 * NS_PER_MS
    assert not heard.for_vad(_rtp(b"", t, codec), quiet).any()  # still falling: blanked
    t += 20 * NS_PER_MS
    assert np.array_equal(heard.for_vad(_rtp(b"", t, codec), loud), loud)  # louder: new audio
    assert (heard.pauses, heard.blanked) == (1, 2)


def test_a_gap_in_g711_or_a_short_one_in_opus_is_no_pause() -> None:
    loud = np.full(160, 8000, np.int16)
    for codec, gap in (
        (codecs.default_codec("pcmu"), 10 * codecs.PAUSE_NS),
        (codecs.default_codec("opus"), codecs.PAUSE_NS),
    ):
        heard = codecs.MeasuredStream()
        heard.for_vad(_rtp(b"", 0, codec), loud)
        assert np.array_equal(heard.for_vad(_rtp(b"", gap, codec), loud), loud)
        assert (heard.pauses, heard.blanked) == (0, 0)


def test_measured_stream_brings_48_khz_opus_to_16_khz_and_follows_a_codec_change() -> None:
    heard = codecs.MeasuredStream()
    opus = codecs.default_codec("opus")
    for k, p in enumerate(codecs.encode_clip("opus", _tone(440, 48000, 960 * 5), 48000)):
        heard(_rtp(p, k * 20 * NS_PER_MS, opus))
    assert heard.rate_hz == 16000
    mu = codecs.default_codec("pcmu")
    out = heard(_rtp(pcm_to_ulaw(_tone(440, 8000, 160)), 200 * NS_PER_MS, mu))
    assert heard.rate_hz == 8000 and out.size == 160
    assert heard.decoder is not None and heard.decoder.codec == mu


# -- encoding ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["opus", "pcmu", "pcma"])
def test_encode_clip_gives_one_payload_per_started_20_ms(name: str) -> None:
    rate = 48000 if name == "opus" else 8000
    per = rate // 50
    payloads = codecs.encode_clip(name, _tone(440, rate, per * 3 + 1), rate)
    assert len(payloads) == 4  # three whole frames and the padded start of a fourth
    assert all(isinstance(p, bytes) and p for p in payloads)


def test_a_g711_encoding_decodes_back_close_to_the_input() -> None:
    pcm = _tone(440, 8000, 800, amplitude=6000)
    codec = codecs.default_codec("pcmu")
    payloads = codecs.encode_clip("pcmu", pcm, 8000)
    dec = codecs.AudioDecoder(codec)
    back = np.concatenate([dec.decode(p, 0) for p in payloads])
    assert back.size == pcm.size
    assert np.max(np.abs(back.astype(int) - pcm)) < 250


def test_the_encoder_takes_empty_input_without_a_payload() -> None:
    assert (
        codecs.AudioEncoder(codecs.default_codec("opus")).encode(np.zeros(0, np.int16), 48000) == []
    )
