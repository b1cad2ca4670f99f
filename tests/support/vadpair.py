"""Two directions' speech detectors driven side by side, for the tests that compare
advancing them together (:mod:`voxproxy.core.analysis.together`) with each alone."""

from __future__ import annotations

from collections.abc import Sequence

from voxproxy.core.analysis.together import advance_together
from voxproxy.core.analysis.vad import SpeechDetector, Spurt


def advance_pair(
    dets: Sequence[SpeechDetector], now_ns: int, later_ns: int, together: bool
) -> None:
    """The first detector advanced to ``now_ns`` and the second to ``later_ns``: in one
    pass (``advance_together``) or each alone, the two ways the tests compare."""
    if together:
        advance_together(dets[0], now_ns, dets[1], later_ns)
    else:
        dets[0].advance(now_ns)
        dets[1].advance(later_ns)


def finished_spurts(dets: Sequence[SpeechDetector], end_ns: int) -> list[list[Spurt]]:
    """Each detector's spurts once it is finished at ``end_ns``."""
    for det in dets:
        det.finish(end_ns)
    return [list(det.spurts) for det in dets]
