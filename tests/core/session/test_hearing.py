"""What the caller hears of the agent reaches the agent's detector
(voxproxy/core/session/hearing.py): short gaps as silence samples, long ones as silence
counted without frames, unkept audio as unheard spans."""

from __future__ import annotations

import numpy as np
import pytest

from voxproxy.core.analysis.playout import Playout
from voxproxy.core.analysis.vad import SpeechDetector
from voxproxy.core.analysis.vadconfig import VadConfig
from voxproxy.core.events import AGENT_TO_CALLER
from voxproxy.core.session.evidence import Evidence
from voxproxy.core.session.hearing import FILL_GAP_NS, AgentHearing
from voxproxy.core.timebase import NS_PER_MS

RATE = 8000
MS = NS_PER_MS


def _tone(ms: int) -> np.ndarray:
    t = np.arange(RATE * ms // 1000) / RATE
    return (8000 * np.sin(2 * np.pi * 220 * t)).astype(np.int16)


def _ear() -> tuple[AgentHearing, SpeechDetector, Evidence]:
    evidence = Evidence(VadConfig(), 200.0)
    return AgentHearing(evidence, 0), SpeechDetector(RATE), evidence


@pytest.mark.parametrize(("gap_ms", "filled"), [(90, True), (300, False)])
def test_a_pause_in_paced_audio_is_heard_as_samples_only_when_short(
    gap_ms: int, filled: bool
) -> None:
    assert (gap_ms * MS <= FILL_GAP_NS) is filled
    ear, det, _ = _ear()
    ear.on_arrival(det, _tone(200), RATE, 0)
    ear.on_arrival(det, _tone(200), RATE, (200 + gap_ms) * MS)
    assert ear.arrival_end_ns == (400 + gap_ms) * MS
    det.advance(2000 * MS)
    heard_ms = det.frames * det.config.frame_ms  # audio analysed frame by frame
    if filled:  # the 90 ms gap was pushed as zeros: 490 ms of frames
        assert heard_ms >= 490 - det.config.frame_ms
    else:  # the 300 ms gap was silence counted without a frame of work
        assert heard_ms <= 400 + det.config.frame_ms


def test_audio_played_without_its_samples_is_unheard_and_counted() -> None:
    ear, det, evidence = _ear()
    playout = Playout(RATE, max_ahead_ns=500 * MS)
    for _ in range(40):  # 40 chunks of 100 ms at once: those from 600 ms on too far ahead
        playout.add(_tone(100), 0)
    assert playout.unkept_ns == 3400 * MS
    ear.release(playout, det, 5000 * MS)
    assert ear.unanalysed_ns == playout.unkept_ns
    assert evidence.unheard_near(AGENT_TO_CALLER, 2000 * MS)
    assert not evidence.unheard_near(AGENT_TO_CALLER, 100 * MS)  # (heard: its samples kept)
