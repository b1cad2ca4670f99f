"""What the mock agent logs of a call (``voxproxy/simcall/log.py``): the samples a call
sent add up over its responses, and each log keeps its own lists."""

from __future__ import annotations

from voxproxy.simcall.log import CallLog, ResponseLog, TaskLog


def _response(index: int, sent: int, total: int) -> ResponseLog:
    return ResponseLog(
        index=index,
        clip="agent_hours",
        greeting=index == 1,
        stream_pos=0,
        caller_offset_ns=None,
        planned_delay_ms=0.0,
        actual_delay_ms=None,
        skipped_samples=0,
        t0_ns=0,
        speech_ns=0,
        samples_sent=sent,
        total_samples=total,
    )


def test_a_call_s_samples_sent_are_its_responses_including_cut_ones() -> None:
    call = CallLog(index=0, path="/", headers={}, subprotocol=None)
    assert call.samples_sent == 0
    call.responses += [_response(1, 8000, 8000), _response(2, 1234, 16000)]
    assert call.samples_sent == 9234  # what went out, not what the responses would have sent


def test_every_log_has_lists_of_its_own() -> None:
    a = CallLog(index=0, path="/a", headers={}, subprotocol=None)
    b = CallLog(index=1, path="/b", headers={}, subprotocol=None)
    a.responses.append(_response(1, 1, 1))
    a.errors.append("boom")
    assert b.responses == [] and b.errors == [] and b.status == 101
    t, u = TaskLog("s"), TaskLog("s")
    t.events.append({"kind": "tool.started"})
    t.backend["x"] = 1
    assert u.events == [] and u.backend == {}
