"""voxproxy.core.session.stages: which of the wire's stage marks belong to one turn, and
the breakdown of its answer's delay into them; on marks and turns built here (ms on the
proxy clock, the receipt's ``rel`` as plain ms)."""

from __future__ import annotations

from voxproxy.core.events import StageMark
from voxproxy.core.session.stages import STAGE_LOOKBACK_NS, turn_stages
from voxproxy.core.turns import Turn

MS = 1_000_000


def rel(ns: int | None) -> float | None:
    return None if ns is None else ns / MS


def turn(onset_ms: int = 1000, offset_ms: int | None = 2000, agent_ms: int | None = 2600) -> Turn:
    return Turn(
        0,
        "response",  # type: ignore[arg-type]
        caller_onset_ns=onset_ms * MS,
        caller_offset_ns=None if offset_ms is None else offset_ms * MS,
        agent_onset_ns=None if agent_ms is None else agent_ms * MS,
    )


def mark(name: str, at_ms: int, detail: str | None = None) -> StageMark:
    return StageMark(name, at_ms * MS, detail=detail)


def test_no_marks_or_no_caller_offset_give_nothing() -> None:
    assert turn_stages([], turn(), rel) is None
    assert turn_stages([mark("response_created", 2100)], turn(offset_ms=None), rel) is None
    far = [mark("response_created", 9000)]
    assert turn_stages(far, turn(), rel) is None  # outside the turn's window


def test_the_chain_breaks_the_delay_down_from_the_callers_last_word_to_audible() -> None:
    marks = [
        mark("server_speech_started", 1050),
        mark("server_speech_stopped", 2150),
        mark("response_created", 2200),
        mark("first_audio_delta", 2450),
        mark("response_done", 3500, detail="completed"),
    ]
    stages = turn_stages(marks, turn(), rel)
    assert stages is not None
    assert stages.marks == {
        "server_speech_started": 1050.0,
        "server_speech_stopped": 2150.0,
        "response_created": 2200.0,
        "first_audio_delta": 2450.0,
        "response_done": 3500.0,
    }
    assert stages.breakdown_ms == {
        "server_speech_stopped": 150.0,
        "response_created": 50.0,
        "first_audio_delta": 250.0,
        "audible": 150.0,
    }
    assert sum(stages.breakdown_ms.values()) == 600.0  # caller offset 2000 -> audible 2600
    assert stages.server_vad_offset_diff_ms == 150.0
    assert stages.details == {"response_done": "completed"}


def test_a_previous_responses_late_marks_are_not_this_turns() -> None:
    def marks(done_ms: int) -> list[StageMark]:
        return [
            mark("response_done", 1900),  # the previous answer's, cut by this caller
            mark("response_created", 2100),
            mark("first_audio_delta", 2300),
            mark("response_done", done_ms),
            mark("response_created", 2350),  # the next response
        ]

    stages = turn_stages(marks(2340), turn(), rel)
    assert stages is not None
    assert stages.marks["response_created"] == 2100.0
    assert stages.marks["response_done"] == 2340.0  # done before the next is created...
    later = turn_stages(marks(2360), turn(), rel)
    assert later is not None and "response_done" not in later.marks  # ...else the next's


def test_a_short_utterance_does_not_take_the_previous_ones_end() -> None:
    marks = [mark("server_speech_stopped", 900), mark("server_speech_stopped", 2050)]
    stages = turn_stages(marks, turn(onset_ms=1000), rel)
    assert stages is not None
    assert stages.marks["server_speech_stopped"] == 2050.0  # 900 is before this onset
    assert stages.server_vad_offset_diff_ms == 50.0


def test_other_stage_names_take_their_first_mark_in_the_window() -> None:
    lookback_ms = STAGE_LOOKBACK_NS // MS
    marks = [
        mark("tool_started", 2000 - lookback_ms - 1),  # just outside
        mark("tool_started", 2100, detail="lookup"),
        mark("tool_started", 2200),
    ]
    stages = turn_stages(marks, turn(agent_ms=None), rel)
    assert stages is not None
    assert stages.marks == {"tool_started": 2100.0}
    assert stages.details == {"tool_started": "lookup"}
    assert stages.breakdown_ms == {}  # no chain stage and no answer: nothing to break down
