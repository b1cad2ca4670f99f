"""benchmarks/accuracy.py --keep-outliers: a call with a figure outside its stated
uncertainty is kept (its caller record, receipt and agent log) to be studied later."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

from support.benchmarks import load_benchmark

from voxproxy.core.analysis.vadconfig import Spurt
from voxproxy.harness.bench import BenchCall
from voxproxy.loadgen.record import CallRecord
from voxproxy.loadgen.results import CallOutcome
from voxproxy.loadgen.scenario import find_scenario
from voxproxy.simcall.log import CallLog


def test_a_call_with_a_figure_outside_its_uncertainty_is_kept(tmp_path: Path) -> None:
    accuracy = load_benchmark("accuracy")
    compare = sys.modules["accuracy_compare"]
    inside = compare.Figure("stop", "published", err_ms=9.0, uncertainty_ms=10.0)
    far = compare.Figure("stop", "published", err_ms=39.0, uncertainty_ms=16.9)
    withheld = compare.Figure("ttfs", "unknown", uncertainty_ms=80.0, reason="caller_noise")
    ok = compare.CallResult("clean", "twilio/paced", "", figures=[inside, withheld])
    bad = compare.CallResult("clean", "twilio/paced", "", figures=[inside, far])
    assert not accuracy.outside(ok) and accuracy.outside(bad)

    scenario, _ = find_scenario("interruption")
    record = CallRecord(t0_ns=5, flushes=[123])
    spurts = [Spurt(1_000, 2_000, 120.0, 0.0, 0.0, 3.0, 0.0)]
    log = CallLog(16, "/", {}, None, caller_spurts=spurts)
    outcome = CallOutcome(scenario, 16, "call-16", "twilio", record, agent_log=log)
    call = BenchCall("twilio/paced", outcome)
    path = accuracy.keep_call(tmp_path / "kept", "contended", 7, call, bad)
    assert path.name == "contended-007.pickle"
    with path.open("rb") as fh:
        kept = pickle.load(fh)
    assert kept["class"] == "contended" and kept["agent"] == "twilio/paced"
    assert kept["outcome"].record.flushes == [123] and kept["figures"][1].err_ms == 39.0
    # The agent's log holds Spurts: on the compiled build a frozen compiled dataclass, which
    # a pickle must rebuild through its constructor.
    assert kept["outcome"].agent_log.caller_spurts == log.caller_spurts
