"""Transcript scores inside a load run: what the agent heard, per replayed turn.

The scripted caller records every transcript the agent reports on the wire (raw
``transcript`` messages, OpenAI Realtime ``conversation.item.input_audio_transcription
.completed``) with its arrival time, and knows the reference text of each clip it said.
A turn's hypothesis is the first *final* transcript with role ``user`` that arrives
after the turn's true speech offset and before the next turn's speech offset (the
next turn's own transcript cannot come before that turn has ended, and an agent may
still be finishing this turn's transcript while the caller starts the next one).
An agent that cut the caller's utterance in two reports its first part while the
caller is still speaking: final user transcripts that arrive during the turn's own
speech (after its onset, up to its offset) and that no earlier turn took are put in
front, and the entry says how many ``pieces`` the hypothesis was made of. Each
transcript serves one turn at most.

* a turn whose clip has no reference text is ``no_reference`` (not scored);
* in a call where the agent reported no user transcript at all, every turn is
  ``not_reported`` (not scored: the agent does not report what it heard, which is
  not the same as hearing nothing);
* otherwise a turn without a matching transcript is ``no_hypothesis`` and scored as
  every word deleted.

Scores go into ``results.json`` and ``summary.json``: never into receipts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from voxproxy.core.timebase import NS_PER_MS
from voxproxy.transcripts.score import Scoring, Tally
from voxproxy.transcripts.scorecard import HumanScores, scorecard

SCORED = ("scored", "no_hypothesis")
LOAD_ATTRIBUTION_MISSING = (
    "a load run has one reference speaker (the caller), and the agent's reports are "
    "matched to caller turns by role and time: there is no speaker assignment to score"
)

_DEFAULT: list[Scoring] = []


def default_scoring() -> Scoring:
    if not _DEFAULT:
        _DEFAULT.append(Scoring.load())
    return _DEFAULT[0]


def match_transcripts(
    turns_ns: Sequence[tuple[int, int]], transcripts: Sequence[tuple[int, str, str, bool]]
) -> tuple[list[list[int]], int]:
    """For each turn (its true speech onset and offset), the indices of the transcripts
    that make its hypothesis, in order (empty: none); and how many final user
    transcripts matched no turn."""
    candidates = [
        i for i, (_t, role, _text, final) in enumerate(transcripts) if final and role == "user"
    ]
    used: set[int] = set()
    out: list[list[int]] = []
    for k, (onset, offset) in enumerate(turns_ns):
        end = turns_ns[k + 1][1] if k + 1 < len(turns_ns) else None
        pieces = [i for i in candidates if i not in used and onset < transcripts[i][0] <= offset]
        after = next(
            (
                i
                for i in candidates
                if i not in used
                and transcripts[i][0] > offset
                and (end is None or transcripts[i][0] < end)
            ),
            None,
        )
        found = pieces + ([after] if after is not None else [])
        used.update(found)
        out.append(found)
    return out, len(candidates) - len(used)


def score_call(
    speech: Sequence[tuple[int, int, str]],
    transcripts: Sequence[tuple[int, str, str, bool]],
    t0_ns: int,
    scoring: Scoring | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Per turn (``speech``: its true onset, offset and reference text), its transcript
    entry; and the number of user transcripts that matched no turn."""
    sc = scoring or default_scoring()
    reported = any(final and role == "user" for _t, role, _x, final in transcripts)
    matched, unmatched = match_transcripts([(a, b) for a, b, _ in speech], transcripts)
    out: list[dict[str, Any]] = []
    for (_onset, offset, reference), found in zip(speech, matched, strict=True):
        entry: dict[str, Any] = {
            "reference": reference,
            "hypothesis": None,
            "pieces": len(found),
            "arrived_ms": None,  # the last piece's arrival, ms from the caller's first frame
            "after_offset_ms": None,
        }
        if found:
            t = transcripts[found[-1]][0]
            entry["hypothesis"] = " ".join(transcripts[i][2] for i in found)
            entry["arrived_ms"] = round((t - t0_ns) / NS_PER_MS, 1)
            entry["after_offset_ms"] = round((t - offset) / NS_PER_MS, 1)
        if not reference.strip():
            entry["status"] = "no_reference"
        elif not reported:
            entry["status"] = "not_reported"
        else:
            entry["status"] = "scored" if found else "no_hypothesis"
            entry.update(sc.score(reference, entry["hypothesis"] or "").to_dict())
            entry.update(sc.labels)
        out.append(entry)
    return out, unmatched


def summarize_calls(
    results: Sequence[dict[str, Any]],
    human: HumanScores | None = None,
    limit: int = 30,
) -> dict[str, Any]:
    """The transcript figures over ``results`` (entries of results.json ``calls``)."""
    turns = [t.get("transcript") for r in results for t in r.get("turns", [])]
    entries = [e for e in turns if isinstance(e, dict)]
    scored = [e for e in entries if e.get("status") in SCORED]
    tally = Tally.of(scored)
    figures = tally.to_dict(limit)
    figures["turns"] = {
        status: sum(1 for e in entries if e.get("status") == status)
        for status in ("scored", "no_hypothesis", "not_reported", "no_reference")
    }
    figures["unmatched_transcripts"] = sum(r.get("transcripts_unmatched", 0) for r in results)
    figures["policy"] = sorted({str(e["policy"]) for e in scored if "policy" in e})
    figures["term_list"] = sorted({str(e["term_list"]) for e in scored if "term_list" in e})
    figures["scorecard"] = (
        scorecard(tally, None, LOAD_ATTRIBUTION_MISSING, human) if scored else None
    )
    return figures
