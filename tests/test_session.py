"""Ground truth: the session's figures against scripted calls whose speech edges are known."""

from __future__ import annotations

from support.groundtruth import Errors, run_many


def test_ttfs_and_stop_latency_match_ground_truth() -> None:
    # 4 combinations (raw/twilio x paced/burst) x 14 calls x 4 turns = 224 turns,
    # response delays 150-3000 ms, barge-ins inside agent speech, with and without flush.
    errors = run_many(seed=2026, calls_per_combo=14)
    assert not errors.problems, errors.problems
    assert len(errors.ttfs) >= 200
    assert len(errors.stop) >= 50
    ttfs_p95, ttfs_max = Errors.stats(errors.ttfs)
    stop_p95, stop_max = Errors.stats(errors.stop)
    print(f"ttfs |err| p95 {ttfs_p95:.1f} max {ttfs_max:.1f} ms over {len(errors.ttfs)} turns")
    print(f"stop |err| p95 {stop_p95:.1f} max {stop_max:.1f} ms over {len(errors.stop)} barge-ins")
    assert ttfs_p95 <= 10.0 and ttfs_max <= 30.0  # issue 13: p95 <= 10 ms, max <= 30 ms
    assert stop_p95 <= 20.0 and stop_max <= 40.0
