"""G.711 μ-law and A-law against CPython's reference coder (``audioop``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from voxproxy.audio.g711 import (
    ALAW_DECODE,
    ULAW_DECODE,
    alaw_to_pcm,
    pcm_to_alaw,
    pcm_to_ulaw,
    ulaw_to_pcm,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop

ALL_SAMPLES = np.arange(-32768, 32768, dtype=np.int16)
ALL_CODES = bytes(range(256))

CODECS = {
    "ulaw": (pcm_to_ulaw, ulaw_to_pcm, audioop.lin2ulaw, audioop.ulaw2lin),
    "alaw": (pcm_to_alaw, alaw_to_pcm, audioop.lin2alaw, audioop.alaw2lin),
}


@pytest.mark.parametrize("law", sorted(CODECS))
def test_encode_matches_audioop_for_every_sample(law: str) -> None:
    encode, _, ref_encode, _ = CODECS[law]
    ours = encode(ALL_SAMPLES)
    ref = ref_encode(ALL_SAMPLES.astype("<i2").tobytes(), 2)
    assert len(ours) == 65536
    mismatches = [int(s) for s, a, b in zip(ALL_SAMPLES, ours, ref, strict=True) if a != b]
    assert not mismatches, f"{len(mismatches)} samples differ, first {mismatches[:5]}"


@pytest.mark.parametrize("law", sorted(CODECS))
def test_decode_matches_audioop_for_every_code(law: str) -> None:
    _, decode, _, ref_decode = CODECS[law]
    ours = decode(ALL_CODES)
    ref = np.frombuffer(ref_decode(ALL_CODES, 2), dtype="<i2")
    assert ours.dtype == np.int16
    np.testing.assert_array_equal(ours, ref)


def test_decode_tables_are_the_public_tables() -> None:
    np.testing.assert_array_equal(ulaw_to_pcm(ALL_CODES), ULAW_DECODE)
    np.testing.assert_array_equal(alaw_to_pcm(ALL_CODES), ALAW_DECODE)


def test_ulaw_codes_survive_a_round_trip_except_negative_zero() -> None:
    # μ-law has two zeros: 0xFF (+0) and 0x7F (-0); 0 encodes as 0xFF.
    again = pcm_to_ulaw(ulaw_to_pcm(ALL_CODES))
    changed = [c for c in range(256) if again[c] != c]
    assert changed == [0x7F]
    assert again[0x7F] == 0xFF
    assert ulaw_to_pcm(bytes([0x7F, 0xFF])).tolist() == [0, 0]


def test_alaw_codes_survive_a_round_trip() -> None:
    again = pcm_to_alaw(alaw_to_pcm(ALL_CODES))
    assert again == ALL_CODES


@pytest.mark.parametrize("law", sorted(CODECS))
def test_quantisation_is_monotonic_sign_preserving_and_bounded(law: str) -> None:
    encode, decode, _, _ = CODECS[law]
    back = decode(encode(ALL_SAMPLES)).astype(np.int32)
    x = ALL_SAMPLES.astype(np.int32)
    # Monotonic: a louder input never decodes quieter.
    assert np.all(np.diff(back) >= 0)
    # Signs agree away from zero (both laws keep the sign bit).
    big = np.abs(x) > 16
    assert np.all(np.sign(back[big]) == np.sign(x[big]))
    # Logarithmic quantisation with a 4-bit mantissa: the error stays within about 1/16
    # of the magnitude, plus a small absolute step near zero.
    err = np.abs(back - x)
    limit = np.abs(x) / 16 + 16
    # Both laws clip slightly below full scale (μ-law at 32124, A-law at 32256).
    inside = np.abs(x) < 32000
    assert np.all(err[inside] <= limit[inside]), int(np.max(err[inside] - limit[inside]))


@pytest.mark.parametrize("law", sorted(CODECS))
def test_decoded_values_are_fixed_points(law: str) -> None:
    # Every decoded level encodes back to a code that decodes to the same level.
    encode, decode, _, _ = CODECS[law]
    levels = decode(ALL_CODES)
    np.testing.assert_array_equal(decode(encode(levels)), levels)


def test_empty_input() -> None:
    empty = np.zeros(0, dtype=np.int16)
    assert pcm_to_ulaw(empty) == b""
    assert pcm_to_alaw(empty) == b""
    assert ulaw_to_pcm(b"").size == 0
    assert alaw_to_pcm(b"").size == 0
