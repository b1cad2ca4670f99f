"""session.ordering: spurts of both directions and flushes reach the turn machine in time
order, none past the watermark, and unvoiced caller spurts are counted as noise."""

from __future__ import annotations

from collections import deque

from voxproxy.core.analysis.vad import SpeechDetector
from voxproxy.core.analysis.vadconfig import Spurt, VadConfig
from voxproxy.core.session.evidence import Evidence
from voxproxy.core.session.ordering import feed_turns, watermark
from voxproxy.core.timebase import NS_PER_MS
from voxproxy.core.turns import FlushMark, TurnMachine

MS = NS_PER_MS


class Recorder(TurnMachine):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, int]] = []

    def caller_spurt(self, s: Spurt) -> None:
        self.seen.append(("caller", s.onset_ns))

    def agent_spurt(self, a: Spurt) -> None:
        self.seen.append(("agent", a.onset_ns))

    def flush(self, f: FlushMark) -> None:
        self.seen.append(("flush", f.t_ns))


def test_time_order_across_directions_and_the_watermark_holds_back_the_rest() -> None:
    caller, agent = SpeechDetector(8000), SpeechDetector(8000)
    caller.spurts.extend(
        [
            Spurt(100 * MS, 900 * MS),
            Spurt(1500 * MS, 1600 * MS, voiced_ms=0.0),
            Spurt(3000 * MS, 3500 * MS),
        ]
    )
    agent.spurts.extend([Spurt(1000 * MS, 2000 * MS), Spurt(2600 * MS, 2900 * MS)])
    flushes = deque([FlushMark(1700 * MS, True)])
    turns = Recorder()
    evidence = Evidence(VadConfig(), 50.0)
    noise = feed_turns(caller, agent, flushes, 2600 * MS, evidence, turns)
    # The unvoiced caller spurt (a cough) is noise, not an input; 3000 ms waits.
    assert turns.seen == [
        ("caller", 100 * MS),
        ("agent", 1000 * MS),
        ("flush", 1700 * MS),
        ("agent", 2600 * MS),
    ]
    assert noise == 1
    assert [s.onset_ns for s in caller.spurts] == [3000 * MS]
    assert not agent.spurts and not flushes
    assert feed_turns(caller, None, flushes, 1 << 62, evidence, turns) == 0
    assert turns.seen[-1] == ("caller", 3000 * MS)


def test_watermark_is_now_less_the_slack_when_nobody_speaks() -> None:
    vad = VadConfig()
    slack = (2 * vad.onset_lookback_ms + vad.frame_ms) * MS
    idle = SpeechDetector(8000)
    assert watermark(10_000 * MS, 20 * MS, vad, [idle, None]) == 10_000 * MS - 20 * MS - slack
