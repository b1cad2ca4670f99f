"""Matching the agent's transcripts to the replayed turns, by time (no sockets)."""

from __future__ import annotations

from voxproxy.transcripts.loadrun import match_transcripts, score_call, summarize_calls

MS = 1_000_000


def test_first_final_user_transcript_after_the_offset_and_before_the_next_turn() -> None:
    turns = [(0, 1000 * MS), (4000 * MS, 5000 * MS), (8000 * MS, 9000 * MS)]
    transcripts = [
        (-100 * MS, "user", "too early", True),  # before the first turn began
        (1200 * MS, "user", "where is my or", False),  # not final
        (1300 * MS, "assistant", "sure", True),  # the agent's own words
        (1400 * MS, "user", "where is my order", True),  # turn 0
        (1500 * MS, "user", "a second one", True),  # unmatched
        (5100 * MS, "user", "late for turn 1?", True),  # turn 1
        (9500 * MS, "user", "turn 2", True),  # turn 2
    ]
    matched, unmatched = match_transcripts(turns, transcripts)
    assert matched == [[3], [5], [6]]
    assert unmatched == 2  # "too early" and "a second one"


def test_a_transcript_that_comes_after_the_next_turn_started_still_counts() -> None:
    # Turn 1 starts at 1500 ms and ends at 3000 ms; turn 0's transcript arrives at 2000 ms.
    turns = [(0, 1000 * MS), (1500 * MS, 3000 * MS)]
    matched, _ = match_transcripts(turns, [(2000 * MS, "user", "x", True)])
    assert matched == [[0], []]


def test_a_turn_the_agent_cut_in_two_is_put_back_together() -> None:
    # The agent reported the first half while the caller was still speaking.
    turns = [(0, 3000 * MS), (5000 * MS, 6000 * MS)]
    transcripts = [
        (2000 * MS, "user", "Actually, never mind that.", True),
        (3400 * MS, "user", "What are your opening hours?", True),
        (6300 * MS, "user", "Yes, please.", True),
    ]
    matched, unmatched = match_transcripts(turns, transcripts)
    assert (matched, unmatched) == ([[0, 1], [2]], 0)
    entries, _ = score_call(
        [(0, 3000 * MS, "Actually, never mind that. What are your opening hours?")],
        transcripts[:2],
        0,
    )
    assert entries[0]["pieces"] == 2 and entries[0]["errors"] == 0


def test_statuses() -> None:
    speech = [
        (0, 1000 * MS, "No, wait, don't send it."),
        (3000 * MS, 4000 * MS, ""),
        (7000 * MS, 8000 * MS, "Yes, please."),
    ]
    heard = [(1500 * MS, "user", "No wait, do send it.", True)]
    entries, unmatched = score_call(speech, heard, 0)
    assert unmatched == 0
    assert [e["status"] for e in entries] == ["scored", "no_reference", "no_hypothesis"]
    assert entries[0]["after_offset_ms"] == 500.0 and entries[0]["arrived_ms"] == 1500.0
    assert entries[0]["terms"]["missed"] == ["not"]
    assert entries[0]["policy"].startswith("voxproxy-default@sha256:")
    assert entries[2]["deletions"] == 2 and entries[2]["hypothesis"] is None
    # An agent that reports nothing is not scored as deaf.
    silent, _ = score_call(speech, [], 0)
    assert [e["status"] for e in silent] == ["not_reported", "no_reference", "not_reported"]
    summary = summarize_calls([{"turns": [{"transcript": e} for e in silent]}])
    assert summary["scorecard"] is None and summary["turns"]["not_reported"] == 2
    summary = summarize_calls([{"turns": [{"transcript": e} for e in entries]}])
    assert summary["words"] == 8 and summary["numbers"]["text"] == "0 of 0"
    assert summary["scorecard"]["dimensions"]["terms"]["score"] == 50.0  # "no" right, "not" lost
