"""voxproxy.core.audio.event: the Audio event, compared field by field and sample by
sample, unhashable (it holds an array), and printed without its samples."""

from __future__ import annotations

import numpy as np
import pytest

from voxproxy.core.audio.event import Audio
from voxproxy.core.direction import AGENT_TO_CALLER, CALLER_TO_AGENT

PCM = np.array([1, 2, 3], dtype=np.int16)


def _audio(**changes: object) -> Audio:
    fields: dict[str, object] = {
        "direction": CALLER_TO_AGENT,
        "pcm": PCM.copy(),
        "sample_rate_hz": 8000,
        "t_ns": 5,
        "item_id": None,
    }
    fields.update(changes)
    return Audio(**fields)  # type: ignore[arg-type]


def test_two_are_equal_when_every_field_is_the_samples_by_value() -> None:
    assert _audio() == _audio()
    assert _audio() != _audio(pcm=np.array([1, 2, 4], dtype=np.int16))
    assert _audio() != _audio(pcm=PCM[:2].copy())
    assert _audio() != _audio(direction=AGENT_TO_CALLER)
    assert _audio() != _audio(sample_rate_hz=16000)
    assert _audio() != _audio(t_ns=6)
    assert _audio() != _audio(item_id="item_1")
    assert _audio() != "Audio"


def test_it_is_unhashable_and_its_repr_counts_samples_instead_of_printing_them() -> None:
    with pytest.raises(TypeError):
        hash(_audio())
    text = repr(_audio(pcm=np.arange(1000, dtype=np.int16), item_id="i"))
    assert "<1000 samples>" in text and "item_id='i'" in text and "999" not in text
