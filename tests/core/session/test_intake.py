"""The caller's audio kept to real time on its way to the detector
(voxproxy/core/session/intake.py): audio within the tolerance analysed whole, a burst far
ahead analysed only in its most recent part, shed audio's span kept without samples."""

from __future__ import annotations

from collections import Counter

import numpy as np

from voxproxy.core.analysis.vad import SpeechDetector
from voxproxy.core.analysis.vadconfig import VadConfig
from voxproxy.core.audio.resample import Converter
from voxproxy.core.events import CALLER_TO_AGENT, AnomalyKind
from voxproxy.core.session.evidence import Evidence
from voxproxy.core.session.intake import AHEAD_NS, CallerIntake
from voxproxy.core.timebase import NS_PER_MS

MS = NS_PER_MS
START = 1_000 * MS


def _frame(rate: int, ms: int = 20) -> np.ndarray:
    t = np.arange(rate * ms // 1000) / rate
    return (6000 * np.sin(2 * np.pi * 300 * t)).astype(np.int16)


def _intake(
    rate: int = 8000,
) -> tuple[CallerIntake, SpeechDetector, Converter, Counter[str], Evidence]:
    anomalies: Counter[str] = Counter()
    evidence = Evidence(VadConfig(), 200.0)
    conv = Converter(rate)
    det = SpeechDetector(conv.out_rate_hz)
    return CallerIntake(START, anomalies, evidence), det, conv, anomalies, evidence


def test_audio_that_keeps_to_real_time_is_analysed_whole() -> None:
    for rate in (8000, 16000, 24000):
        intake, det, conv, anomalies, _ = _intake(rate)
        for i in range(1, 51):  # 50 frames of 20 ms, each arriving as it ends
            intake.take(det, _frame(rate), rate, START + i * 20 * MS, conv, 20 * MS)
        assert intake.analysed_ns == 1000 * MS
        assert intake.unanalysed_ns == 0
        assert not anomalies
        assert det.samples_in == conv.out_rate_hz  # one second at the detector's rate
        assert list(intake.chunk_ns)[-1] == 20 * MS and len(intake.chunk_ns) == 50


def test_a_burst_far_ahead_of_real_time_is_analysed_only_in_its_latest_part() -> None:
    intake, det, conv, anomalies, evidence = _intake()
    t = START + 100 * MS  # 100 ms into the call, 6 s of audio arrives at once
    burst = np.concatenate([_frame(8000)] * 300)
    intake.take(det, burst, 8000, t, conv, 6000 * MS)

    kept_ns = 100 * MS + AHEAD_NS  # what real time and the tolerance allow
    assert kept_ns < 6000 * MS
    assert intake.analysed_ns == kept_ns
    assert intake.unanalysed_ns == 6000 * MS - kept_ns
    assert det.samples_in == kept_ns * 8000 // 1_000_000_000
    assert anomalies[AnomalyKind.CALLER_AUDIO_AHEAD.value] == 1
    assert intake.max_chunk_ns == kept_ns
    # The kept part ends at the arrival: the splice before it is unheard.
    assert evidence.unheard_near(CALLER_TO_AGENT, t - kept_ns)
    assert not evidence.unheard_near(CALLER_TO_AGENT, t)


def _last_break(det: SpeechDetector) -> int | None:
    return det._timeline.last_break_at_or_before(det._pos)


def test_shed_audio_spends_its_time_and_the_next_push_starts_afresh() -> None:
    intake, det, conv, anomalies, evidence = _intake()
    intake.take(det, _frame(8000), 8000, START + 20 * MS, conv, 20 * MS)
    intake.take(det, _frame(8000), 8000, START + 40 * MS, conv, 20 * MS)
    assert _last_break(det) is None  # audio that follows on is continuous
    intake.shed(START + 60 * MS, 20 * MS)
    assert anomalies[AnomalyKind.MEASUREMENT_SHED.value] == 1
    assert intake.analysed_ns == 60 * MS and intake.unanalysed_ns == 20 * MS
    assert evidence.shed_between(START + 50 * MS)
    assert not evidence.shed_between(START + 10_000 * MS)
    assert det.samples_in == 320  # the shed frame's samples never reached the detector
    pos = det._pos
    intake.take(det, _frame(8000), 8000, START + 80 * MS, conv, 20 * MS)
    assert det.samples_in == 480
    found = _last_break(det)
    assert found is not None and found >= pos  # the detector did not walk across the gap
    intake.take(det, _frame(8000), 8000, START + 100 * MS, conv, 20 * MS)
    assert _last_break(det) == found  # and then follows on again
