"""Transcript scores inside a load run: what the agent heard, per replayed turn.

The scripted caller records every transcript the agent reports on the wire (raw
``transcript`` messages, OpenAI Realtime ``conversation.item.input_audio_transcription
.completed``) with its arrival time, and knows the reference text of each clip it said.
A turn's hypothesis is the first *final* transcript with role ``user`` that arrives
after the turn's true speech offset and before the next turn's speech offset (the
next turn's own transcript cannot come before that turn has ended, and an agent may
still be finishing this turn's transcript while the caller starts the next one);
each transcript serves one turn at most.

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
from typing import Any, Protocol

from voxproxy.transcripts.score import Scoring, Tally
from voxproxy.transcripts.scorecard import HumanScores, scorecard

NS_PER_MS = 1_000_000
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


class _Speech(Protocol):
    @property
    def offset_ns(self) -> int: ...


def match_transcripts(
    offsets_ns: Sequence[int], transcripts: Sequence[tuple[int, str, str, bool]]
) -> tuple[list[int | None], int]:
    """For each turn (by its speech offset), the index of its transcript or None; and
    how many final user transcripts matched no turn."""
    candidates = [
        i for i, (_t, role, _text, final) in enumerate(transcripts) if final and role == "user"
    ]
    used: set[int] = set()
    out: list[int | None] = []
    for k, offset in enumerate(offsets_ns):
        end = offsets_ns[k + 1] if k + 1 < len(offsets_ns) else None
        found = None
        for i in candidates:
            t = transcripts[i][0]
            if i not in used and t > offset and (end is None or t < end):
                found = i
                break
        if found is not None:
            used.add(found)
        out.append(found)
    return out, len(candidates) - len(used)


def score_call(
    speech: Sequence[tuple[int, str]],
    transcripts: Sequence[tuple[int, str, str, bool]],
    t0_ns: int,
    scoring: Scoring | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Per turn (``speech``: (true offset, reference text)), its transcript entry; and the
    number of user transcripts that matched no turn."""
    sc = scoring or default_scoring()
    reported = any(final and role == "user" for _t, role, _x, final in transcripts)
    matched, unmatched = match_transcripts([o for o, _ in speech], transcripts)
    out: list[dict[str, Any]] = []
    for (offset, reference), idx in zip(speech, matched, strict=True):
        entry: dict[str, Any] = {
            "reference": reference,
            "hypothesis": None,
            "arrived_ms": None,
            "after_offset_ms": None,
        }
        if idx is not None:
            t, _role, text, _final = transcripts[idx]
            entry["hypothesis"] = text
            entry["arrived_ms"] = round((t - t0_ns) / NS_PER_MS, 1)
            entry["after_offset_ms"] = round((t - offset) / NS_PER_MS, 1)
        if not reference.strip():
            entry["status"] = "no_reference"
        elif not reported:
            entry["status"] = "not_reported"
        else:
            entry["status"] = "scored" if idx is not None else "no_hypothesis"
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
