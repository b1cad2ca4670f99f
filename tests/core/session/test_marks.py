"""Agent marks against their echoes, and truncates against the playout model:
session/marks.py on times passed in."""

from __future__ import annotations

from collections import Counter

from voxproxy.core.events import Flush
from voxproxy.core.session.marks import MAX_MARK_NAME_CHARS, MAX_PENDING_MARKS, Items, Marks

MS = 1_000_000


def test_an_echo_is_checked_against_its_predicted_time() -> None:
    anomalies: Counter[str] = Counter()
    marks = Marks(anomalies)
    marks.sent("m1", predicted_ns=1_000 * MS, flushes=0)
    marks.echoed("m1", t_ns=1_030 * MS, flushes=0)
    marks.echoed("unknown", t_ns=1_040 * MS, flushes=0)  # never sent: nothing to check
    assert marks.errors == [30 * MS]
    assert (marks.cleared, anomalies) == (0, Counter())


def test_an_echo_after_a_flush_counts_as_cleared_not_as_an_error() -> None:
    marks = Marks(Counter())
    marks.sent("m1", predicted_ns=1_000 * MS, flushes=0)
    marks.echoed("m1", t_ns=500 * MS, flushes=1)  # Twilio echoes pending marks on clear
    assert (marks.errors, marks.cleared) == ([], 1)


def test_pending_marks_are_bounded_and_long_names_counted() -> None:
    anomalies: Counter[str] = Counter()
    marks = Marks(anomalies)
    for i in range(MAX_PENDING_MARKS + 1):
        marks.sent(f"m{i}", predicted_ns=i, flushes=0)
    assert anomalies["marks_over_limit"] == 1
    marks.echoed("m0", t_ns=0, flushes=0)  # the oldest was dropped
    marks.echoed(f"m{MAX_PENDING_MARKS}", t_ns=MAX_PENDING_MARKS, flushes=0)
    assert marks.errors == [0]
    long = "x" * (MAX_MARK_NAME_CHARS + 1)
    marks.sent(long, predicted_ns=0, flushes=0)
    marks.echoed(long, t_ns=5, flushes=0)  # still matched
    assert anomalies["mark_name_too_long"] == 1 and marks.errors == [0, 5]


def _truncate(t_ms: int, claimed_ms: float, item: str | None = "i1") -> Flush:
    return Flush(t_ms * MS, "conversation.item.truncate", claimed_ms, item)


def test_a_truncate_is_set_beside_the_audio_the_model_played() -> None:
    items = Items()
    items.note("i1", start_ns=1_000 * MS, dur_ns=500 * MS)
    items.note("i1", start_ns=1_500 * MS, dur_ns=500 * MS)  # back to back
    items.truncate(_truncate(1_800, 790.0))
    items.truncate(_truncate(1_800, 790.0, item="other"))  # an item never seen
    assert items.truncations == [(1_800 * MS, 790.0, 800 * MS), (1_800 * MS, 790.0, None)]


def test_pauses_inside_an_item_are_not_counted_as_played() -> None:
    items = Items()
    items.note("i1", start_ns=0, dur_ns=200 * MS)
    items.note("i1", start_ns=300 * MS, dur_ns=200 * MS)  # 100 ms pause: audio came slowly
    items.truncate(_truncate(400, 300.0))
    items.truncate(_truncate(250, 200.0))  # inside the pause: 200 ms had played
    assert [modelled for _, _, modelled in items.truncations] == [300 * MS, 200 * MS]
