"""Writing captures: every input the session was handed, in order and at its time, in a
file of the owner's alone named by the call id; the disk and memory bounds; failures
counted, never raised into the call."""

from __future__ import annotations

import os
import shutil
import stat
import struct
import time
from pathlib import Path

import orjson
import pytest
from support.capturekit import START_NS, capture_call, read_all, scripted_twilio, writer_in

from voxproxy.captures.format import AGENT, TEXT, Kind, event_of
from voxproxy.captures.writer import CaptureSettings, CaptureWriter, prepare_directory
from voxproxy.core.errors import ConfigError
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT, StageMark, ToolEvent


def test_a_capture_holds_every_input_in_order_at_its_time(tmp_path: Path) -> None:
    writer = writer_in(tmp_path / "caps", chunk_bytes=4096)  # many chunks through the thread
    lags = [(START_NS + k * 100_000_000, 2_000_000) for k in range(100)]
    done = capture_call(writer, scripted_twilio(), lags=lags)
    writer.close()
    assert writer.written == 1 and writer.failed == 0
    path = tmp_path / "caps" / f"{done.receipt.call}.vxcap"
    head, records = read_all(path)
    assert head.link_id == "link-1" and head.dialect == "twilio"
    kinds = [r.kind for r in records]
    assert kinds[0] == Kind.UPSTREAM and records[0].t_ns == START_NS + 40_000_000
    # The session's questions come as its receipt is built: their answers follow the close.
    close_at = kinds.index(Kind.CLOSE)
    assert kinds[close_at - 2 : close_at] == [Kind.ANOMALY, Kind.UNMEASURED]
    assert orjson.loads(records[close_at - 2].payload) == {"kind": "undelivered", "count": 2}
    unmeasured = records[close_at - 1]
    assert unmeasured.flags == AGENT and unmeasured.payload == struct.pack("<QQ", 3, 120)
    answers = [orjson.loads(r.payload) for r in records[close_at + 1 : -1]]
    assert answers and {a["q"] for a in answers} == {"clock_lag"}
    assert {a["value"] for a in answers} == {2_000_000}  # (every edge near a reading)
    assert kinds[-1] == Kind.END
    messages = [r for r in records if r.kind == Kind.MESSAGE]
    assert [
        (
            r.t_ns - START_NS,
            AGENT_TO_CALLER if r.flags & AGENT else CALLER_TO_AGENT,
            r.payload.decode() if r.flags & TEXT else r.payload,
        )
        for r in messages
    ] == done.call.messages
    events = [event_of(r.payload) for r in records if r.kind == Kind.EVENT]
    assert [type(e) for e in events] == [ToolEvent, StageMark]
    assert records.index(next(r for r in records if r.kind == Kind.EVENT)) == 1 + 11
    close = orjson.loads(records[close_at].payload)
    assert close["terminal"] == "caller_closed" and close["close"]["initiator"] == "caller"
    assert records[close_at].t_ns == START_NS + done.call.end_ns
    assert orjson.loads(records[-1].payload) == {"call": done.receipt.call, "added": {}}


def test_files_are_the_owner_s_alone(tmp_path: Path) -> None:
    os.umask(0o022)  # a permissive umask does not widen them
    writer = writer_in(tmp_path / "new" / "caps")
    capture_call(writer, scripted_twilio(), events=False)
    writer.close()
    directory = tmp_path / "new" / "caps"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    (capture,) = directory.iterdir()
    assert stat.S_IMODE(capture.stat().st_mode) == 0o600


def test_a_directory_others_may_read_is_refused_in_one_line(tmp_path: Path) -> None:
    open_dir = tmp_path / "shared"
    open_dir.mkdir(mode=0o755)
    open_dir.chmod(0o755)
    with pytest.raises(ConfigError, match=r"others may read it \(mode 0755\).*chmod 700"):
        prepare_directory(open_dir)
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(ConfigError, match="--capture"):
        prepare_directory(a_file)


def test_the_newest_max_calls_captures_are_kept(tmp_path: Path) -> None:
    writer = writer_in(tmp_path, max_calls=3)
    calls = []
    for seed in range(5):
        calls.append(capture_call(writer, scripted_twilio(seed), events=False).receipt.call)
        writer.close()  # (each written before the next: their ages are their order)
    assert writer.written == 5 and writer.removed == 2
    left = sorted(p.name for p in tmp_path.iterdir())
    # Two calls may share a call id (the scripted wire's): the second is CALL-2.vxcap.
    assert len(left) == 3


def test_the_captures_are_kept_under_max_bytes(tmp_path: Path) -> None:
    probe = writer_in(tmp_path / "probe")
    capture_call(probe, scripted_twilio(), events=False)
    probe.close()
    size = next((tmp_path / "probe").iterdir()).stat().st_size
    writer = writer_in(tmp_path / "caps", max_bytes=int(size * 2.5))
    for seed in range(4):
        capture_call(writer, scripted_twilio(seed), events=False)
        writer.close()
    files = list((tmp_path / "caps").iterdir())
    assert len(files) == 2 and writer.removed == 2
    assert sum(p.stat().st_size for p in files) <= size * 2.5


def test_a_call_larger_than_max_bytes_is_abandoned_not_the_call(tmp_path: Path) -> None:
    writer = writer_in(tmp_path, max_bytes=10_000, chunk_bytes=4096)
    done = capture_call(writer, scripted_twilio(), events=False)
    writer.close()
    assert done.receipt.summary.turns >= 2  # measured as ever
    assert writer.failed == 1 and writer.written == 0
    assert list(tmp_path.iterdir()) == []


def test_more_waiting_for_the_disk_than_the_bound_abandons_the_capture(tmp_path: Path) -> None:
    writer = writer_in(tmp_path, chunk_bytes=8192, max_pending_bytes=4096)
    done = capture_call(writer, scripted_twilio(), events=False)
    writer.close()
    assert done.capture.dead and writer.failed == 1 and writer.written == 0
    assert done.receipt.summary.turns >= 2
    assert list(tmp_path.iterdir()) == []


def test_a_directory_gone_mid_call_is_counted_not_raised(tmp_path: Path) -> None:
    directory = tmp_path / "caps"
    writer = CaptureWriter(CaptureSettings(directory, chunk_bytes=4096))
    shutil.rmtree(directory)
    done = capture_call(writer, scripted_twilio(), events=False)
    writer.close()
    assert writer.failed == 1 and writer.written == 0 and done.capture.dead
    assert done.receipt.summary.turns >= 2


def test_an_earlier_run_s_unfinished_captures_are_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tmp_path.chmod(0o700)
    (tmp_path / ".123-1.vxcap.part").write_bytes(b"x")
    writer_in(tmp_path)
    assert "1 unfinished capture(s) of an earlier run" in caplog.text


def test_two_writers_on_one_directory_keep_their_calls_apart(tmp_path: Path) -> None:
    """Two proxies of one process (or --workers siblings) writing to one directory: each
    call in progress has a file of its own (on ca47800 both were .PID-1.vxcap.part)."""
    from support.capturekit import header

    writers = [writer_in(tmp_path, chunk_bytes=1024) for _ in range(2)]
    captures = [w.open_call(header(link_id=f"l{i}")) for i, w in enumerate(writers)]
    for capture, writer in zip(captures, writers, strict=True):
        capture.message(CALLER_TO_AGENT, bytes(2048), START_NS + 1, False, False)
        writer.close()  # (its file is open, unfinished, when the other's is made)
    for i, (capture, writer) in enumerate(zip(captures, writers, strict=True)):
        capture.finish(f"c_{i}")
        writer.close()
    assert [w.failed for w in writers] == [0, 0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c_0.vxcap", "c_1.vxcap"]


def _age(path: Path, seconds: float) -> None:
    """Make ``path`` look ``seconds`` old."""
    t = path.stat().st_mtime - seconds
    os.utime(path, (t, t))


def test_captures_past_max_age_are_removed_at_start_and_while_idle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A capture holds a call's audio: with --capture-max-age none outlives it, also on a
    # proxy that takes no more calls (before, captures went only when a newer one was
    # finished past --capture-max-calls or --capture-max-bytes).
    import voxproxy.captures.writer as writer_module

    directory = tmp_path / "caps"
    first = writer_in(directory)
    for seed in range(2):
        capture_call(first, scripted_twilio(seed), events=False)
        first.close()
    old, fresh = sorted(directory.iterdir())
    _age(old, 3 * 3600)
    monkeypatch.setattr(writer_module, "sweep_interval_s", lambda _age_s: 0.02)
    writer = writer_in(directory, max_age_s=3600.0)
    try:
        assert not old.exists() and fresh.exists() and writer.removed == 1  # at start
        _age(fresh, 2 * 3600)  # ... and later, with no call finishing meanwhile
        for _ in range(500):  # (the thread counts the removal just after the unlink)
            if not fresh.exists() and writer.removed == 2:
                break
            time.sleep(0.01)
        assert not fresh.exists() and writer.removed == 2
    finally:
        writer.close()
    # No age bound: nothing goes for its age.
    capture_call(first, scripted_twilio(3), events=False)
    first.close()
    (kept,) = directory.iterdir()
    _age(kept, 365 * 86400)
    writer_in(directory).close()
    assert kept.exists()


def test_an_age_bound_is_positive_and_swept_often_enough() -> None:
    with pytest.raises(ConfigError, match="--capture-max-age"):
        CaptureSettings(Path("x"), max_age_s=0.0)
    from voxproxy.captures.writer import sweep_interval_s

    assert sweep_interval_s(7 * 86400) == 60.0  # at least every minute
    assert sweep_interval_s(600) == 30.0  # a twentieth: at most 5% past the age
    assert sweep_interval_s(2) == 1.0
