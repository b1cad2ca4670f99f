"""A clip at a caller's rate: converted once per clip and rate, shared read-only."""

from __future__ import annotations

import numpy as np
import pytest

from voxproxy.audio.resample import resample_linear
from voxproxy.clips import clip
from voxproxy.loadgen.steps import clip_at_rate


def test_a_clip_is_converted_once_per_rate_and_shared_read_only() -> None:
    c = clip("caller_iban")
    assert c.sample_rate_hz == 16000
    at8 = clip_at_rate(c, 8000)
    # Two samples averaged per 8 kHz sample: what each caller computed before.
    n = (c.pcm.size // 2) * 2
    expected = c.pcm[:n].reshape(-1, 2).astype(np.int32).mean(axis=1).astype(np.int16)
    assert np.array_equal(at8, expected)
    assert clip_at_rate(c, 8000) is at8  # the second caller gets the same array
    at24 = clip_at_rate(c, 24000)
    assert np.array_equal(at24, resample_linear(c.pcm, 16000, 24000))
    assert clip_at_rate(c, 16000) is c.pcm  # its own rate: the clip itself
    with pytest.raises(ValueError):
        at8[0] = 1  # shared by every caller: nobody writes into it
