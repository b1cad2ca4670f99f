"""voxproxy.health: the health paths and their one answer, ready or refusing, on one line."""

from __future__ import annotations

from voxproxy.health import (
    HEALTH_PATH,
    HEALTH_PATHS,
    LIVE_PATH,
    READY_PATH,
    REFUSING,
    health_answer,
)


def test_ready_is_200_ok_with_a_note_when_there_is_one() -> None:
    assert health_answer(None) == (200, "ok\n")
    assert health_answer(None, "worker 1: starting") == (200, "ok: worker 1: starting\n")
    assert health_answer(None, "") == (200, "ok\n")


def test_refusing_is_503_and_why_on_one_line_the_note_dropped() -> None:
    status, text = health_answer("at capacity (2 calls in progress)", "ignored")
    assert status == 503
    assert text == f"{REFUSING}at capacity (2 calls in progress)\n"
    assert text.count("\n") == 1 and text.startswith("refusing callers: ")


def test_the_paths_are_the_three_every_listener_answers() -> None:
    assert sorted(HEALTH_PATHS) == sorted({HEALTH_PATH, READY_PATH, LIVE_PATH})
    assert {"/healthz", "/readyz", "/livez"} == HEALTH_PATHS
