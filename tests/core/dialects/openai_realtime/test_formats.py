"""Dialect ``openai-realtime``: audio formats, GA and beta names, all three encodings, both
directions (docs/protocols.md section 5, "Audio formats")."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from support.dialectkit import AGENT, CALLER, msg
from support.realtimekit import PCM, T, beta_update, decoder, delta, ga_update

from voxproxy.core.audio.g711 import alaw_to_pcm, pcm_to_alaw, pcm_to_ulaw, ulaw_to_pcm
from voxproxy.core.audio.pcm import pcm_to_bytes
from voxproxy.core.dialects.openai_realtime import (
    PCM16,
    PCMA,
    PCMU,
    OpenAIRealtimeCallerWire,
    parse_format,
)
from voxproxy.core.events import Audio

# -- formats: GA and beta names, all three encodings, both directions --------------------

FORMAT_UPDATES = [
    ("GA pcm", ga_update("audio/pcm", "audio/pcm"), PCM16, PCM16),
    ("GA pcmu/pcma", ga_update("audio/pcmu", "audio/pcma"), PCMU, PCMA),
    ("GA pcma/pcmu", ga_update("audio/pcma", "audio/pcmu"), PCMA, PCMU),
    ("beta pcm16", beta_update("pcm16", "pcm16"), PCM16, PCM16),
    ("beta ulaw/alaw", beta_update("g711_ulaw", "g711_alaw"), PCMU, PCMA),
    ("beta alaw/ulaw", beta_update("g711_alaw", "g711_ulaw"), PCMA, PCMU),
]


def _encoded(fmt: object, pcm: np.ndarray) -> tuple[str, np.ndarray]:
    if fmt is PCMU:
        data = pcm_to_ulaw(pcm)
        return base64.b64encode(data).decode(), ulaw_to_pcm(data)
    if fmt is PCMA:
        data = pcm_to_alaw(pcm)
        return base64.b64encode(data).decode(), alaw_to_pcm(data)
    return base64.b64encode(pcm_to_bytes(pcm)).decode(), pcm


@pytest.mark.parametrize(
    ("name", "update", "fmt_in", "fmt_out"), FORMAT_UPDATES, ids=[f[0] for f in FORMAT_UPDATES]
)
@pytest.mark.parametrize("announced_by", ["client", "server"])
def test_formats_follow_the_session(
    name: str, update: str, fmt_in: object, fmt_out: object, announced_by: str
) -> None:
    del name
    dec = decoder()
    if announced_by == "client":
        assert dec.decode(CALLER, update, T) == []
    else:
        server = json.loads(update)
        server["type"] = "session.updated"
        assert dec.decode(AGENT, json.dumps(server), T) == []
    b64_in, pcm_in = _encoded(fmt_in, PCM)
    b64_out, pcm_out = _encoded(fmt_out, PCM)
    (a,) = dec.decode(CALLER, msg(type="input_audio_buffer.append", audio=b64_in), T)
    assert isinstance(a, Audio)
    assert a.sample_rate_hz == fmt_in.sample_rate_hz  # type: ignore[attr-defined]
    np.testing.assert_array_equal(a.pcm, pcm_in)
    _, b = dec.decode(AGENT, delta(delta=b64_out), T)
    assert isinstance(b, Audio)
    assert b.sample_rate_hz == fmt_out.sample_rate_hz  # type: ignore[attr-defined]
    np.testing.assert_array_equal(b.pcm, pcm_out)


def test_a_partial_session_update_keeps_the_formats() -> None:
    dec = decoder()
    dec.decode(CALLER, beta_update("g711_ulaw", "g711_ulaw"), T)
    assert (
        dec.decode(CALLER, msg(type="session.update", session={"instructions": "be brief"}), T)
        == []
    )
    (a,) = dec.decode(CALLER, msg(type="input_audio_buffer.append", audio="//8="), T)
    assert isinstance(a, Audio) and a.sample_rate_hz == 8000 and a.pcm.size == 2


def test_parse_format() -> None:
    assert parse_format({"type": "audio/pcm", "rate": 24000}) is PCM16
    assert parse_format({"type": "audio/pcm"}) is PCM16
    assert parse_format({"type": "audio/pcmu"}) is PCMU
    assert parse_format("g711_alaw") is PCMA
    odd = parse_format({"type": "audio/pcm", "rate": 16000})
    assert odd is not None and odd.sample_rate_hz == 16000
    for bad in ({"type": "audio/pcm", "rate": True}, {}, None, 3, "opus", {"type": None}):
        assert parse_format(bad) is None


def test_pcm16_odd_bytes_carry_over() -> None:
    dec = decoder()
    data = pcm_to_bytes(PCM)
    first, second = data[:5], data[5:]
    (a,) = dec.decode(CALLER, OpenAIRealtimeCallerWire.append(first), T)
    (b,) = dec.decode(CALLER, OpenAIRealtimeCallerWire.append(second), T)
    assert isinstance(a, Audio) and isinstance(b, Audio)
    np.testing.assert_array_equal(np.concatenate([a.pcm, b.pcm]), PCM)
