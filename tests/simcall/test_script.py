"""Task scripts (``voxproxy/simcall/script.py``): what the simulated backend does with
each attempt, what a script's action writes, which script a request path names, and the
scripts that cannot run refused when they are made."""

from __future__ import annotations

from typing import Any

import pytest

from voxproxy.core.errors import ConfigError
from voxproxy.simcall.script import (
    ATTEMPT_KINDS,
    LATE_ANSWER_MS,
    TASK_FAULTS,
    Attempt,
    TaskScript,
    Turn,
    script_for,
)


def order(*attempts: Attempt) -> TaskScript:
    return TaskScript(
        tool="update_order",
        args=("order_number", "city"),
        turns=(Turn((("order_number", "4821"),), act=True),),
        backend={"order_number": "0000", "city": "Lyon", "note": "kept"},
        attempts=attempts or (Attempt(),),
    )


def send() -> TaskScript:
    return TaskScript(
        tool="send_confirmation",
        args=("order_number",),
        turns=(Turn((("order_number", "4281"),), act=True),),
        effect="append",
        record="sent",
        backend={"sent": [{"order_number": "1"}]},
    )


def test_scripts_by_path_and_validation() -> None:
    scripts = {"c01_x": order()}
    assert script_for("/c01_x/CA123", scripts) == ("c01_x", scripts["c01_x"])
    assert script_for("/CA123?x=c01_x", scripts) is None
    assert script_for("/c01_x/CA1", None) is None
    with pytest.raises(ConfigError, match="append effect"):
        TaskScript(tool="t", args=("a",), turns=(), effect="append", record="r", backend={})
    with pytest.raises(ConfigError, match="attempt kind"):
        Attempt("nope")  # type: ignore[arg-type]
    assert order(Attempt("ok"), Attempt("error")).attempt(5).kind == "error"
    assert {k: Attempt(k).commits for k in ATTEMPT_KINDS} == {
        "ok": True,
        "timeout": True,
        "late": True,
        "error": True,
        "empty": False,
        "wrong_record": False,
        "malformed": False,
        "async": True,
    }
    assert Attempt("timeout").answer_after_ms is None
    assert Attempt("late", latency_ms=100).answer_after_ms == 4100
    faults = (
        "stale_args no_cancel unchecked_result noise_is_speech unsafe_retry confirm_before_result"
    )
    assert set(TASK_FAULTS) == set(faults.split())


def test_the_first_segment_that_names_a_script_chooses_it() -> None:
    scripts = {"a": order(), "b": send()}
    assert script_for("/x/b/a/CA1", scripts) == ("b", scripts["b"])
    assert script_for("/b", {}) is None
    assert script_for("/ab/CA1", scripts) is None  # whole segments only


def test_attempts_go_by_request_number_and_the_last_repeats() -> None:
    script = order(Attempt("timeout"), Attempt("error"), Attempt("ok", latency_ms=5))
    assert [script.attempt(n).kind for n in (1, 2, 3, 4, 9)] == [
        "timeout",
        "error",
        "ok",
        "ok",
        "ok",
    ]


def test_a_commit_given_overrides_the_kind_s_default() -> None:
    assert Attempt("empty", commit=True).commits is True
    assert Attempt("ok", commit=False).commits is False


def test_an_answer_comes_no_earlier_than_the_write() -> None:
    assert Attempt(latency_ms=300).answer_after_ms == 300
    assert Attempt(latency_ms=300, answer_ms=900).answer_after_ms == 900
    assert Attempt(latency_ms=300, answer_ms=100).answer_after_ms == 300
    assert Attempt("late", latency_ms=300).answer_after_ms == 300 + LATE_ANSWER_MS
    assert Attempt("late", latency_ms=300, answer_ms=500).answer_after_ms == 500
    assert Attempt("timeout", answer_ms=500).answer_after_ms is None


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"latency_ms": -1}, "negative"),
        ({"ack_ms": -1}, "negative"),
        ({"answer_ms": -0.5}, "negative"),
    ],
)
def test_negative_times_are_refused(kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        Attempt(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"tool": ""}, "a tool and at least one argument"),
        ({"args": ()}, "a tool and at least one argument"),
        ({"effect": "delete"}, "set or append"),
        ({"attempts": ()}, "at least one attempt"),
        ({"prep_ms": -1.0}, "prep_ms"),
        ({"effect": "append", "record": "note"}, "append effect"),
        ({"effect": "append", "record": None}, "append effect"),
    ],
)
def test_scripts_that_cannot_run_are_refused(kwargs: dict[str, Any], says: str) -> None:
    base: dict[str, Any] = {
        "tool": "t",
        "args": ("a",),
        "turns": (),
        "backend": {"note": "not a list"},
    }
    with pytest.raises(ConfigError, match=says):
        TaskScript(**(base | kwargs))


def test_a_set_action_writes_its_arguments_and_no_action_leaves_the_record() -> None:
    script = order()
    assert script.written == ("order_number", "city")
    assert script.projection(None) == {"order_number": "0000", "city": "Lyon"}
    assert script.projection({"order_number": "4821"}) == {"order_number": "4821", "city": None}


def test_an_append_action_adds_its_arguments_to_the_record_s_list_without_touching_it() -> None:
    script = send()
    assert script.written == ("sent",)
    after = script.projection({"order_number": "4281"})
    assert after == {"sent": [{"order_number": "1"}, {"order_number": "4281"}]}
    after["sent"][0]["order_number"] = "changed"
    assert script.backend["sent"] == [{"order_number": "1"}]  # a copy, not the script's own
    before = script.projection(None)
    before["sent"].append("x")
    assert script.backend["sent"] == [{"order_number": "1"}]
