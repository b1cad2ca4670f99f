"""voxproxy.core.dialects._common: the helpers every JSON wire's decoder and builder shares
(strict base64, a JSON object or the anomaly a message is, lenient integers, and the
decoder of one direction's audio bytes that carries a split 16-bit sample)."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from voxproxy.core.audio.g711 import pcm_to_alaw, pcm_to_ulaw
from voxproxy.core.dialects._common import (
    ENCODINGS,
    PcmDecoder,
    b64_audio,
    b64decode,
    b64encode,
    dumps,
    int_field,
    loads_object,
    text_object,
)
from voxproxy.core.events import CALLER_TO_AGENT, Anomaly, AnomalyKind

T = 7_000


def test_base64_is_strict_and_round_trips() -> None:
    data = bytes(range(256))
    assert b64decode(b64encode(data)) == data
    assert b64encode(b"\xff\xfe") == base64.b64encode(b"\xff\xfe").decode()
    for bad in ["YQ", "YQ==YQ==", "Y Q==", "YQ==\n", "é", 5, None, b"YQ=="]:
        assert b64decode(bad) is None, bad  # no padding, data after it, spaces, not text
    assert b64decode("") == b""  # empty is valid base64: no bytes


def test_an_audio_field_is_its_bytes_or_the_anomaly_it_is() -> None:
    assert b64_audio("AAE=", CALLER_TO_AGENT, T) == b"\x00\x01"
    bad = b64_audio("not base64!", CALLER_TO_AGENT, T)
    assert bad == Anomaly(AnomalyKind.INVALID_BASE64, CALLER_TO_AGENT, T)
    missing = b64_audio(None, CALLER_TO_AGENT, T)
    assert isinstance(missing, Anomaly) and missing.kind is AnomalyKind.MALFORMED


@pytest.mark.parametrize("payload", ['{"a": 1}', b'{"a": 1}'])
def test_loads_object_takes_text_or_bytes(payload: str | bytes) -> None:
    assert loads_object(payload) == {"a": 1}


@pytest.mark.parametrize("payload", ["[1]", "3", '"x"', "{", "", "null"])
def test_loads_object_refuses_anything_but_an_object(payload: str) -> None:
    assert loads_object(payload) is None


def test_a_text_wire_message_is_an_object_or_an_anomaly() -> None:
    assert text_object(CALLER_TO_AGENT, '{"event": "x"}', T) == {"event": "x"}
    binary = text_object(CALLER_TO_AGENT, b'{"event": "x"}', T)
    assert binary == Anomaly(AnomalyKind.UNEXPECTED_BINARY, CALLER_TO_AGENT, T)
    junk = text_object(CALLER_TO_AGENT, "[]", T)
    assert junk == Anomaly(AnomalyKind.MALFORMED, CALLER_TO_AGENT, T)


def test_dumps_is_compact() -> None:
    assert dumps({"a": [1, "é"]}) == '{"a":[1,"é"]}'


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, 3),
        ("42", 42),
        (" 7", 7),
        (2.0, 2),
        (2.5, None),
        ("x", None),
        (True, None),
        (None, None),
        ([1], None),
    ],
)
def test_int_field_takes_numbers_and_numeric_text_never_booleans(
    value: object, expected: int | None
) -> None:
    assert int_field(value) == expected


def test_16_bit_pcm_split_across_messages_is_carried_whole() -> None:
    pcm = np.array([1, -2, 300, -32768, 32767], dtype=np.int16)
    for encoding, raw in (
        ("pcm_s16le", pcm.astype("<i2").tobytes()),
        ("pcm_s16be", pcm.astype(">i2").tobytes()),
    ):
        dec = PcmDecoder(encoding)
        parts = [dec.decode(raw[:3]), dec.decode(raw[3:4]), dec.decode(raw[4:])]
        assert [p.size for p in parts] == [1, 1, 3]
        assert np.array_equal(np.concatenate(parts), pcm), encoding
        assert all(p.dtype == np.int16 for p in parts)


def test_g711_bytes_decode_one_sample_each_and_a_new_encoding_drops_the_carry() -> None:
    pcm = np.array([0, 1000, -1000, 8000], dtype=np.int16)
    dec = PcmDecoder("pcm_s16le")
    assert dec.decode(b"\x01\x00\x02").size == 1  # one byte carried
    dec.set_encoding("ulaw")
    assert dec.decode(pcm_to_ulaw(pcm)).size == 4
    dec.set_encoding("alaw")
    assert dec.decode(pcm_to_alaw(pcm)).size == 4
    dec.set_encoding("pcm_s16le")
    assert dec.decode(b"\x05\x00").tolist() == [5]  # the old odd byte is not glued on


def test_only_the_known_encodings_are_taken() -> None:
    assert set(ENCODINGS) == {"pcm_s16le", "pcm_s16be", "ulaw", "alaw"}
    with pytest.raises(ValueError, match="opus"):
        PcmDecoder("opus")
    with pytest.raises(ValueError, match="flac"):
        PcmDecoder("ulaw").set_encoding("flac")
