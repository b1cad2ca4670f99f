"""Shed measurement (``CallSession.on_message(..., shed=True)``): the figures near the
shed audio are withheld with the reason ``measurement_shed``; every other figure is the
one the call gives with nothing shed; traffic and the shed messages are counted."""

from __future__ import annotations

import random

import pytest
from support.groundtruth import measure, random_plan
from support.scripted import ScriptedCall, render

from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.receipt import CloseInfo, Receipt
from voxproxy.core.session import CallSession
from voxproxy.core.timebase import NS_PER_MS

GRID_MS = 1.0  # the detector's energy windows


def measure_shedding(call: ScriptedCall, dialect: str, lo_ns: int, hi_ns: int) -> Receipt:
    session = CallSession(
        make_decoder(dialect, DialectOptions(secret=b"test")), 0, secret=b"test", link_id="sim"
    )
    for t, d, p in call.messages:
        session.on_message(d, p, t, shed=lo_ns <= t < hi_ns)
    return session.close(call.end_ns, "completed", CloseInfo(initiator="caller"))


def figures(r: Receipt) -> tuple[dict[float, float], dict[float, float]]:
    """Published ttfs by caller offset, and stop latencies by barge-in onset."""
    ttfs = {
        t.caller_offset_ms: t.ttfs_ms
        for t in r.turns
        if t.ttfs_ms is not None and t.caller_offset_ms is not None
    }
    stops = {
        t.barge_in.onset_ms: t.barge_in.stop_latency_ms
        for t in r.turns
        if t.barge_in is not None and t.barge_in.stop_latency_ms is not None
    }
    return ttfs, stops  # type: ignore[return-value]


@pytest.mark.slow
def test_shed_audio_withholds_the_figures_near_it_and_changes_no_other() -> None:
    rng = random.Random(1717)
    withheld = published = 0
    for dialect in ("twilio", "raw"):
        for mode in ("paced", "burst"):
            for _ in range(2):
                plan = random_plan(rng, dialect, mode, n_turns=5)
                call = render(plan)
                full = measure(call, dialect)
                # Shed from the caller's second offset to just after the agent's answer.
                truth = call.truth[1]
                lo = truth.caller_offset_ns - 150 * NS_PER_MS
                hi = truth.agent_onset_ns + 150 * NS_PER_MS
                shed = measure_shedding(call, dialect, lo, hi)
                in_window = [p for t, _d, p in call.messages if lo <= t < hi]
                assert 0 < shed.anomalies["measurement_shed"] <= len(in_window)
                assert shed.traffic.caller_to_agent_messages == (
                    full.traffic.caller_to_agent_messages
                )
                assert shed.traffic.agent_to_caller_bytes == full.traffic.agent_to_caller_bytes
                reasons = [t.reason for t in shed.turns] + [
                    t.barge_in.reason for t in shed.turns if t.barge_in is not None
                ]
                assert "measurement_shed" in reasons, (dialect, mode, shed.turns)
                withheld += reasons.count("measurement_shed")
                # Every figure still published is the one the unshed call gives, to within
                # the detector's 1 ms windows: after shed audio a detector starts afresh on
                # its frame grid, so the grid of its 1 ms windows may sit up to a window off
                # the unshed call's (seen: 0.6 ms over 32 calls).
                full_ttfs, full_stops = figures(full)
                ttfs, stops = figures(shed)
                for offset, value in ttfs.items():
                    assert offset in full_ttfs, (dialect, mode, offset, value)
                    assert abs(full_ttfs[offset] - value) <= GRID_MS, (dialect, mode, offset)
                for onset, value in stops.items():
                    assert onset in full_stops, (dialect, mode, onset, value)
                    assert abs(full_stops[onset] - value) <= GRID_MS, (dialect, mode, onset)
                published += len(ttfs)
    assert withheld >= 8
    assert published >= 8  # the turns away from the shed audio keep their figures


def test_shedding_nothing_changes_nothing() -> None:
    call = render(random_plan(random.Random(5), "twilio", "paced"))
    assert measure_shedding(call, "twilio", 0, 0) == measure(call, "twilio")
