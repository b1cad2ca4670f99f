"""voxproxy.core.analysis.vadconfig: the detector's settings (checked as made), a spurt's
derived readings, and the two step tables (masking, level spread) read at and between
their rows. Whether the tables' figures hold is the accuracy tests' (test_vad.py,
tests/core/session/test_evidence_withheld.py); here, that they are read as steps."""

from __future__ import annotations

from itertools import pairwise

import pytest

from voxproxy.core.analysis.vadconfig import (
    LEVEL_SPREAD_TABLE,
    MASKING_TABLE,
    MIN_VOICED_MS,
    NEVER_QUIET_NS,
    Spurt,
    VadConfig,
    level_spread_db,
    masked_ms,
)
from voxproxy.core.timebase import NS_PER_MS


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"frame_ms": 25}, "frame_ms must be 10, 20 or 30"),
        ({"mode": 4}, "VAD mode must be 0-3"),
        ({"mode": -1}, "VAD mode must be 0-3"),
        ({"merge_gap_ms": -1.0}, "must not be negative"),
        ({"min_speech_ms": -0.5}, "must not be negative"),
    ],
)
def test_a_setting_webrtcvad_cannot_take_is_refused(fields: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        VadConfig(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("frame_ms", [10, 20, 30])
def test_each_webrtcvad_frame_length_is_taken(frame_ms: int) -> None:
    assert VadConfig(frame_ms=frame_ms, mode=0, merge_gap_ms=0.0).frame_ms == frame_ms


def test_a_spurts_duration_voicing_and_never_quiet() -> None:
    s = Spurt(1_000 * NS_PER_MS, 1_250 * NS_PER_MS)
    assert s.duration_ms == 250.0
    assert s.voiced  # voicing unmeasured: taken as enough
    assert not Spurt(0, NS_PER_MS, voiced_ms=MIN_VOICED_MS - 1).voiced
    assert Spurt(0, NS_PER_MS, voiced_ms=MIN_VOICED_MS).voiced
    assert not Spurt(0, NEVER_QUIET_NS).never_quiet
    assert Spurt(0, NEVER_QUIET_NS + 1).never_quiet


def test_the_tables_rise_in_their_key_and_end_at_no_effect() -> None:
    assert all(a[0] < b[0] for a, b in pairwise(MASKING_TABLE))
    assert all(a[0] < b[0] for a, b in pairwise(LEVEL_SPREAD_TABLE))
    assert MASKING_TABLE[-1][1:] == (0.0, 0.0)  # seen to the truth's depth: nothing hidden
    # The deeper a detector sees, the less it can miss; the longer heard, the closer.
    assert all(a[1] >= b[1] and a[2] >= b[2] for a, b in pairwise(MASKING_TABLE))
    assert all(a[1] >= b[1] for a, b in pairwise(LEVEL_SPREAD_TABLE))


def test_masked_ms_reads_the_row_at_or_just_below_what_was_seen() -> None:
    first, row30, row31 = MASKING_TABLE[0], MASKING_TABLE[7], MASKING_TABLE[8]
    assert row30[0] == 30.0 and row31[0] == 31.0
    assert masked_ms(-5.0) == first[1:]  # shallower than any row: the first
    assert masked_ms(30.0) == row30[1:]
    assert masked_ms(30.99) == row30[1:]
    assert masked_ms(31.0) == row31[1:]
    assert masked_ms(99.0) == (0.0, 0.0)


def test_level_spread_reads_the_row_at_or_just_below_what_was_heard() -> None:
    assert level_spread_db(0.0) == LEVEL_SPREAD_TABLE[0][1]
    assert level_spread_db(199.0) == LEVEL_SPREAD_TABLE[0][1]
    assert level_spread_db(200.0) == LEVEL_SPREAD_TABLE[1][1]
    assert level_spread_db(2999.0) == dict(LEVEL_SPREAD_TABLE)[2000.0]
    assert level_spread_db(60_000.0) == LEVEL_SPREAD_TABLE[-1][1]
