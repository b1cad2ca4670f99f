"""``voxproxy demo`` sized for the machine, and its table's words explained
(``voxproxy.harness.demo``)."""

from __future__ import annotations

from typing import Any

from voxproxy.harness.demo import (
    AGENTS,
    CALLS_AT_ONCE,
    INSUFFICIENT_NOTE,
    WITHHELD_NOTE,
    _figure,
    _withheld,
    demo_concurrency,
)


def test_the_calls_run_a_few_at_a_time_never_fewer_than_one_per_agent() -> None:
    # 28 real-time calls at once, with their agents and proxies on one event loop, made the
    # callers send hundreds of ms late on a shared two-core machine (issue 36).
    assert demo_concurrency(28, cpus=2) == CALLS_AT_ONCE < 28
    assert demo_concurrency(28, cpus=16) == CALLS_AT_ONCE  # one loop: more CPUs do not help
    assert demo_concurrency(28, cpus=1) == max(len(AGENTS), CALLS_AT_ONCE // 2)
    assert demo_concurrency(3, cpus=2) == len(AGENTS)
    assert demo_concurrency(28) >= len(AGENTS)


def _turn(truth: float | None, proxy: dict[str, Any] | None) -> dict[str, Any]:
    return {"truth": {"ttfs_ms": truth, "stop_latency_ms": None}, "proxy": proxy}


def test_a_withheld_figure_shows_its_reason_and_is_explained() -> None:
    withheld = {"ttfs_ms": None, "reason": "caller_noise"}
    assert _figure(640.4, withheld, "ttfs_ms") == "640/— (caller_noise)"
    assert _figure(640.4, {"ttfs_ms": 641.2, "reason": None}, "ttfs_ms") == "640/641"
    assert _figure(None, None, "ttfs_ms") == "—/—"
    assert _withheld(_turn(640.4, withheld))
    assert not _withheld(_turn(640.4, {"ttfs_ms": 641.2}))
    assert not _withheld(_turn(None, {"ttfs_ms": None}))  # no truth: nothing withheld
    assert _withheld(_turn(640.4, None))  # no proxy turn at all
    for note, word in ((WITHHELD_NOTE, "—"), (INSUFFICIENT_NOTE, "insufficient_evidence")):
        assert note.startswith(word) and len(note.split()) > 15
