"""What a withheld figure still says: the span its true value lies in.

A figure withheld only because its stated uncertainty passed the bound that publishes it
(an edge that moves with the talker's level, clock lag, the listener's jitter buffer, or
noise read over a steady bed) keeps its edges in the receipt, and the receipt says that
they still bound the truth (``TurnRecord.ttfs_bounded``, ``BargeInRecord.stop_bounded``;
MEASUREMENT.md 6). The gates judge that span (``verdict.py``): wholly within a limit, a
pass; wholly over it, a failure; holding it, no evidence.
"""

from __future__ import annotations

from voxproxy.core.receipt import BargeInRecord, TurnRecord

SPANNED_REASONS = frozenset(
    {"caller_edge_ambiguous", "agent_edge_ambiguous", "clock_lag", "downstream_jitter"}
)
"""Why a ttfs may be withheld while its edges stand, within an uncertainty the detector
computed but over the bound that publishes it: where the truth's level puts the edges,
how late the clock or the listener's jitter buffer may have run; for receipts written
before ``ttfs_bounded``, which says it per turn (and adds noise over a steady bed). Not
other noise (a swelling bed's band is no bound: an edge read hundreds of ms off), nor a
never-quiet direction, a shed or an unheard stretch (the edges themselves are in doubt)."""


def withheld_span(turn: TurnRecord) -> tuple[float, float] | None:
    """The span (ms) a withheld ttfs lies in, where the receipt says it bounds the truth
    (``ttfs_bounded``; in a receipt without it, for a :data:`SPANNED_REASONS` reason):
    the edges' gap less and plus its stated uncertainty; None for any other turn."""
    spanned = turn.reason in SPANNED_REASONS if turn.ttfs_bounded is None else turn.ttfs_bounded
    if not spanned or turn.ttfs_uncertainty_ms is None:
        return None
    if turn.caller_offset_ms is None or turn.agent_onset_ms is None:
        return None
    seen = turn.agent_onset_ms - turn.caller_offset_ms
    unc = turn.ttfs_uncertainty_ms
    return round(seen - unc, 1), round(seen + unc, 1)


def withheld_stop_span(b: BargeInRecord) -> tuple[float, float] | None:
    """The span (ms) a withheld stop latency lies in, where the receipt says it bounds the
    truth (``stop_bounded``): the gap from the onset to the stop the proxy read, less and
    plus its stated uncertainty; None for a published or an unbounded stop."""
    if not b.stop_bounded or b.stop_ms is None or b.stop_uncertainty_ms is None:
        return None
    seen = b.stop_ms - b.onset_ms
    unc = b.stop_uncertainty_ms
    return round(seen - unc, 1), round(seen + unc, 1)
