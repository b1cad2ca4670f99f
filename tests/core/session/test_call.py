"""Ground truth: the session's figures against scripted calls whose speech edges are known."""

from __future__ import annotations

import pytest
from support.groundtruth import run_many


@pytest.mark.slow
def test_ttfs_and_stop_latency_match_ground_truth() -> None:
    # 4 combinations (raw/twilio x paced/burst) x 14 calls x 4 turns = 224 turns,
    # response delays 150-3000 ms, barge-ins inside agent speech, with and without flush.
    errors = run_many(seed=2026, calls_per_combo=14)
    assert not errors.problems, errors.problems
    # Withheld because an edge moves with the level read 0.5 dB off (a slow release
    # near the truth's threshold): said, not missed, and rare. 10 of 224 (4.5%): 2 on raw
    # 16 kHz, and 8 on Twilio, caller_topic_change's release, 0.26-0.45 dB under the
    # truth's threshold for 47 ms once band-limited (BAND_LOSS_DB), published 47-55 ms off
    # against 12-25 ms stated before the offset's band on such wires reached past it.
    assert len(errors.ambiguous) <= 0.05 * len(errors.ttfs), errors.ambiguous
    assert len(errors.ttfs) >= 200
    assert len(errors.stop) >= 50
    errors.within("fake clock")  # issue 13's bounds
