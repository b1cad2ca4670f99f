"""The mock agent's ear: it names the caller clip of a turn from the audio alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voxproxy.clips import Clip
from voxproxy.core.analysis.vad import Spurt
from voxproxy.core.errors import ConfigError
from voxproxy.core.timebase import NS_PER_S
from voxproxy.mockagent.config import halve_rate
from voxproxy.mockagent.hearing import DEFAULT_HYPOTHESES, Hearing, load_hypotheses

CALLER = [
    "caller_where_is_order",
    "caller_interrupt",
    "caller_topic_change",
    "caller_order_number",
    "caller_iban",
    "caller_yes",
    "caller_no_dont",
    "caller_thanks",
    "caller_es_pedido",
    "caller_hello",
]


def _turn(
    clips: dict[str, Clip], name: str, rate: int, snr_db: float | None, edge_ms: float
) -> tuple[Hearing, Spurt]:
    """Feed a clip (with babble at ``snr_db``) as 20 ms chunks; the turn's edges are off by
    ``edge_ms`` the way a VAD's are."""
    c = clips[name]
    pcm = c.pcm.astype(np.float64)
    if snr_db is not None:
        a, b = round(c.onset_ms * 16), round(c.offset_ms * 16)
        speech_rms = np.sqrt(np.mean(pcm[a:b] ** 2))
        bed = np.resize(clips["noise_babble"].pcm.astype(np.float64), pcm.size)
        pcm += bed / np.sqrt(np.mean(bed**2)) * speech_rms * 10 ** (-snr_db / 20)
    x = np.clip(pcm, -32768, 32767).astype(np.int16)
    if rate == 8000:
        x = halve_rate(x)
    h = Hearing(DEFAULT_HYPOTHESES)
    t0 = 10 * NS_PER_S
    step = rate // 50
    for k in range(0, x.size, step):
        h.push(x[k : k + step], t0 + k * NS_PER_S // rate, rate)
    onset = t0 + round((c.onset_ms - edge_ms) * 1e6)
    offset = t0 + round((c.offset_ms + edge_ms) * 1e6)
    return h, Spurt(onset, offset)


@pytest.mark.parametrize("name", CALLER)
@pytest.mark.parametrize(("rate", "snr_db", "edge_ms"), [(16000, None, 0), (8000, 10, 50)])
def test_each_caller_clip_is_recognized(
    clips: dict[str, Clip], name: str, rate: int, snr_db: float | None, edge_ms: float
) -> None:
    h, spurt = _turn(clips, name, rate, snr_db, edge_ms)
    heard = h.hear(spurt)
    assert heard.clip == name, heard
    assert heard.text == DEFAULT_HYPOTHESES.get(name, clips[name].text)


def test_a_sound_that_is_no_clip_is_not_recognized(clips: dict[str, Clip]) -> None:
    h = Hearing({})
    rng = np.random.default_rng(1)
    noise = (rng.standard_normal(16000 * 3) * 3000).astype(np.int16)
    h.push(noise, 0, 16000)
    heard = h.hear(Spurt(0, 3 * NS_PER_S))
    assert heard.clip is None and heard.text is None


def test_the_default_set_is_imperfect_where_it_matters() -> None:
    assert "don't" not in DEFAULT_HYPOTHESES["caller_no_dont"]
    assert "5072" in DEFAULT_HYPOTHESES["caller_order_number"]
    assert "IBAN" not in DEFAULT_HYPOTHESES["caller_iban"]


def test_hypotheses_files(tmp_path: Path) -> None:
    good = tmp_path / "h.yaml"
    good.write_text("caller_yes: Yes, pleats.\n")
    assert load_hypotheses(good) == {"caller_yes": "Yes, pleats."}
    bad = tmp_path / "b.yaml"
    bad.write_text("caller_nope: hi\n")
    with pytest.raises(ConfigError, match="no fixture clip named 'caller_nope'"):
        load_hypotheses(bad)


def test_a_clip_cut_at_its_pause_is_heard_sentence_by_sentence(clips: dict[str, Clip]) -> None:
    c = clips["caller_topic_change"]
    assert len(c.segments_ms) == 2  # "Actually, never mind that." / "What are your ..."
    texts = []
    for a, b in [*c.segments_ms, (c.onset_ms, c.offset_ms)]:
        h = Hearing({})
        h.push(c.pcm, 0, c.sample_rate_hz)
        texts.append(h.hear(Spurt(round(a * 1e6), round(b * 1e6))).text)
    assert texts == ["Actually, never mind that.", "What are your opening hours?", c.text]
