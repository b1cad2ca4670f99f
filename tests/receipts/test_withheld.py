"""voxproxy/receipts/withheld.py: the span a withheld figure still bounds."""

from __future__ import annotations

from typing import Any

import pytest

from voxproxy.core.receipt import BargeInRecord, TurnRecord
from voxproxy.receipts.withheld import SPANNED_REASONS, withheld_span, withheld_stop_span


def _turn(**fields: Any) -> TurnRecord:
    base: dict[str, Any] = {
        "index": 0,
        "kind": "response",
        "caller_offset_ms": 1000.0,
        "agent_onset_ms": 1600.0,
        "ttfs_ms": None,
        "ttfs_uncertainty_ms": 130.0,
        "reason": "caller_noise",
    }
    return TurnRecord(**(base | fields))


def _barge(**fields: Any) -> BargeInRecord:
    base: dict[str, Any] = {
        "onset_ms": 3000.0,
        "stop_ms": 3200.0,
        "stop_latency_ms": None,
        "stop_uncertainty_ms": 60.0,
        "outcome": "unknown",
        "reason": "caller_noise",
        "stop_bounded": True,
        "evidence": "flush",
        "ambiguous": False,
        "in_pause": False,
    }
    return BargeInRecord(**(base | fields))


def test_a_bounded_ttfs_spans_its_edges_gap_less_and_plus_its_uncertainty() -> None:
    assert withheld_span(_turn(ttfs_bounded=True)) == (470.0, 730.0)
    assert withheld_span(_turn(ttfs_bounded=False)) is None
    assert withheld_span(_turn(ttfs_bounded=True, agent_onset_ms=None)) is None
    assert withheld_span(_turn(ttfs_bounded=True, ttfs_uncertainty_ms=None)) is None


@pytest.mark.parametrize("reason", sorted(SPANNED_REASONS))
def test_a_receipt_without_the_field_is_read_by_its_reason(reason: str) -> None:
    # Receipts written before ttfs_bounded: an uncertain edge, clock lag or jitter bound
    # the truth; noise did not (a swelling bed's band is no bound).
    assert withheld_span(_turn(reason=reason)) == (470.0, 730.0)
    assert withheld_span(_turn()) is None


def test_a_bounded_stop_spans_onset_to_stop_less_and_plus_its_uncertainty() -> None:
    assert withheld_stop_span(_barge()) == (140.0, 260.0)
    assert withheld_stop_span(_barge(stop_bounded=False)) is None
    assert withheld_stop_span(_barge(stop_bounded=None, stop_latency_ms=200.0)) is None
    assert withheld_stop_span(_barge(stop_ms=None)) is None
