"""benchmarks/capacity.py: what its bisection's brackets allow of the 2-worker ratio."""

from __future__ import annotations

from support.benchmarks import load_benchmark


def test_the_ratio_range_follows_both_brackets() -> None:
    ratio_range = load_benchmark("capacity")._ratio_range
    # 2026-12-04's run: 2 workers passed 137 and failed 140, 1 worker passed 53, failed 56.
    assert ratio_range(137, 140, 53, 56) == [round(137 / 55, 3), round(139 / 53, 3)]
    # The default search of the same day: 75 / 100 against 50 / 75: anything from 1 to 2.
    assert ratio_range(75, 100, 50, 75) == [round(75 / 74, 3), round(99 / 50, 3)]
    # A count that never failed has no upper bound, so the ratio has no lower (or upper).
    assert ratio_range(137, None, 53, 56) == [round(137 / 55, 3), None]
    assert ratio_range(137, 140, 53, None) == [None, round(139 / 53, 3)]


def test_a_count_holds_when_most_runs_pass_and_runs_stop_once_decided() -> None:
    majority = load_benchmark("capacity")._majority

    def runs(outcomes: list[bool], n: int, stop_after_fail: bool = False) -> tuple[bool, int]:
        left = list(outcomes)
        verdict = majority(lambda: left.pop(0), n, lambda: stop_after_fail)
        return verdict, len(outcomes) - len(left)

    assert runs([True, True, False], 3) == (True, 2)  # decided after two
    assert runs([False, False, True], 3) == (False, 2)
    assert runs([True, False, True], 3) == (True, 3)
    assert runs([False, True, False], 3) == (False, 3)
    assert runs([False], 1) == (False, 1) and runs([True], 1) == (True, 1)
    assert runs([False, True, True], 3, stop_after_fail=True) == (False, 1)  # load-bound
