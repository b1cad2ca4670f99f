"""voxproxy/core/analysis/closing.py: when a spurt closes, and the offset it closes at."""

from __future__ import annotations

import numpy as np

from voxproxy.clips import load_clips
from voxproxy.core.analysis.audible import OFFSET_REFERENCE, REFERENCE_GAP_MS
from voxproxy.core.analysis.vad import SpeechDetector, Spurt
from voxproxy.core.analysis.vadconfig import CLOSE_LOOKBACK_NS

MS = 1_000_000
RATE = 16000


def _hello_then_silence() -> tuple[SpeechDetector, list[tuple[int, Spurt]]]:
    """ "hello" (speech to 827 ms) paced in 20 ms chunks, then 2 s of silence: each spurt
    with the time (ms) it was handed out."""
    pcm = load_clips()["caller_hello"].pcm
    frame = RATE // 50
    chunks = [pcm[i : i + frame] for i in range(0, pcm.size - frame + 1, frame)]
    chunks += [np.zeros(frame, np.int16)] * 100
    det = SpeechDetector(RATE)
    out: list[tuple[int, Spurt]] = []
    for k, chunk in enumerate(chunks):
        now = (k + 1) * 20
        det.push(chunk, (now - 20) * MS)
        det.advance(now * MS)
        out += [(now, s) for s in det.spurts]
        det.spurts.clear()
    return det, out


def test_a_spurt_closes_once_the_pause_after_its_offset_passes_merge_and_look_back() -> None:
    det, spurts = _hello_then_silence()
    assert len(spurts) == 1, spurts
    handed_ms, spurt = spurts[0]
    offset_ms = spurt.offset_ns / MS
    assert abs(offset_ms - 827) <= 10
    merge = det.config.merge_gap_ms
    lookback = min(det.config.onset_lookback_ms, CLOSE_LOOKBACK_NS / MS)
    # Not before the wait (a later onset walked back into the merge gap still merges),
    # and at most a chunk after it.
    assert offset_ms + merge + lookback <= handed_ms <= offset_ms + merge + lookback + 20


def test_the_next_onset_caps_the_noise_read_after_an_offset_and_drops_a_stale_end() -> None:
    det = SpeechDetector(RATE)
    det._end_cache = (1000, 1040)
    # The next spurt's first loud window came well after the reference: the end stands.
    det._cap_reference(1000 + OFFSET_REFERENCE[1] + REFERENCE_GAP_MS)
    assert det._end_cache == (1000, 1040)
    # ... within it: the end was walked over noise that held the next word; walk again.
    det._cap_reference(1000 + OFFSET_REFERENCE[1] + REFERENCE_GAP_MS - 1)
    assert det._end_cache is None
    assert det._next_onset_win == 1000 + OFFSET_REFERENCE[1] + REFERENCE_GAP_MS - 1
