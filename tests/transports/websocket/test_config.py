"""The relay's admission: what it would decide now (readiness) is what it decides."""

from __future__ import annotations

from voxproxy.transports.websocket import Admission


def test_asking_why_a_caller_would_be_refused_counts_nothing() -> None:
    admission = Admission(limit=1)
    assert admission.refusal() is None
    assert admission.admit()
    assert admission.refusal() == "at capacity (1 calls in progress)"
    assert (admission.active, admission.refused) == (1, 0)  # asking took no slot, no refusal
    assert not admission.admit()
    assert admission.reason == admission.refusal()
    admission.release()
    lag: list[str | None] = ["event loop lag 80 ms"]
    admission.overloaded = lambda: lag[0]
    assert admission.refusal() == "overloaded (event loop lag 80 ms)"
    assert not admission.admit()
    assert (admission.refused, admission.refused_overloaded) == (2, 1)
    lag[0] = None
    assert admission.refusal() is None and admission.admit()
    assert Admission(limit=None).refusal() is None
