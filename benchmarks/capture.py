"""What ``proxy --capture`` costs a message: on the event loop, and in the writer's thread.

Scripted Twilio calls (``benchmarks/measurement.py``'s ``scripted_calls``: turn-taking
with barge-ins, paced and in bursts, clean and noisy: speech, pauses and noise as real
calls carry them, no audio looped) are fed, message by message, to the same code the
proxy runs:

* ``tap``: the capture alone (``CallCapture.message``: a record appended to the call's
  buffer, a full buffer handed to the thread): what capturing adds to the loop's work
  per message, besides the tap's call from the session;
* ``session``: ``CallSession.on_message`` for every message, then ``close``: the
  measurement a proxy does anyway;
* ``session+capture``: the same with the capture as the session's tap, and its close
  and end; the difference to ``session`` is capturing's cost on the loop;
* ``thread``: the writer thread's CPU (zlib and the file), which runs beside the loop,
  per message (the process's CPU less the main thread's, over the ``session+capture``
  rounds).

CPU is ``time.thread_time`` of the main thread (the loop's share), the best of
``--repeat`` rounds, the stages interleaved. Also said: bytes on the wire and on disk
per call-second, and the compression ratio.

Run:  PYTHONPATH=. .venv/bin/python benchmarks/capture.py [--calls 6] [--repeat 3]
Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import benchkit  # noqa: E402
import record  # noqa: E402
from measurement import Call, scripted_calls  # noqa: E402

from voxproxy import native  # noqa: E402
from voxproxy.captures.format import CaptureHeader  # noqa: E402
from voxproxy.captures.writer import CaptureSettings, CaptureWriter  # noqa: E402
from voxproxy.core.dialects import make_decoder  # noqa: E402
from voxproxy.core.dialects.base import DialectOptions  # noqa: E402
from voxproxy.core.receipt import CloseInfo  # noqa: E402
from voxproxy.core.session import CallSession, SessionConfig  # noqa: E402
from voxproxy.core.timebase import EpochAnchor  # noqa: E402

SECRET = b"bench"


def _header(call: Call) -> CaptureHeader:
    return CaptureHeader.of(
        transport="websocket",
        dialect="twilio",
        options=DialectOptions(),
        config=SessionConfig(),
        start_ns=call.start_ns,
        anchor=EpochAnchor(mono_ns=call.start_ns, wall_ns=0),
        link_id="bench",
        secret=SECRET,
        version="bench",
    )


def stage_tap(calls: list[Call], writer: CaptureWriter) -> None:
    for n, call in enumerate(calls):
        capture = writer.open_call(_header(call))
        for t, d, payload in call.messages:
            capture.message(d, payload, t, False, False)
        capture.finish(f"c_tap{n}")


def stage_session(calls: list[Call], writer: CaptureWriter | None) -> None:
    for n, call in enumerate(calls):
        session = CallSession(make_decoder("twilio"), call.start_ns, secret=SECRET, link_id="b")
        capture = None
        if writer is not None:
            session.tap = capture = writer.open_call(_header(call))
        feed = session.on_message
        for t, d, payload in call.messages:
            feed(d, payload, t)
        receipt = session.close(call.end_ns, "completed", CloseInfo(initiator="caller"))
        if capture is not None:
            capture.finish(f"{receipt.call}-{n}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=6)
    p.add_argument("--repeat", type=int, default=3)
    record.add_flag(p)
    args = p.parse_args()
    calls = scripted_calls(args.calls)
    messages = sum(len(c.messages) for c in calls)
    wire = sum(len(m.encode() if isinstance(m, str) else m) for c in calls for *_x, m in c.messages)
    best: dict[str, float] = {}
    thread_cpu: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for stage in ("tap", "session", "session+capture"):
                directory = Path(tmp) / f"{stage}-{time.monotonic_ns()}"
                writer = CaptureWriter(CaptureSettings(directory, max_bytes=1 << 40))
                proc0, main0 = time.process_time(), time.thread_time()
                if stage == "tap":
                    stage_tap(calls, writer)
                else:
                    stage_session(calls, writer if stage == "session+capture" else None)
                main_s = time.thread_time() - main0
                writer.close()
                if stage == "session+capture":
                    thread_cpu.append(time.process_time() - proc0 - main_s)
                    disk = sum(f.stat().st_size for f in directory.iterdir())
                best[stage] = min(best.get(stage, float("inf")), main_s)
    us = {k: v / messages * 1e6 for k, v in best.items()}
    added = us["session+capture"] - us["session"]
    thread_us = min(thread_cpu) / messages * 1e6
    call_s = sum(c.end_ns - c.start_ns for c in calls) / 1e9
    from rich.console import Console

    table = benchkit.figures_table(
        f"capture cost per message ({native.build()} core; {messages} messages, "
        f"{args.calls} scripted calls, {call_s:.0f} s, best of {args.repeat})",
        ("stage", "µs/message (loop thread)"),
        title_justify="left",
    )
    table.add_row("tap alone", f"{us['tap']:.2f}")
    table.add_row("session", f"{us['session']:.2f}")
    table.add_row("session+capture", f"{us['session+capture']:.2f}")
    table.add_row(
        "capture's share on the loop", f"{added:.2f} ({100 * added / us['session']:.1f}%)"
    )
    table.add_row("writer thread (beside the loop)", f"{thread_us:.2f}")
    Console().print(table)
    print(
        f"wire {wire / call_s / 1024:.1f} KiB per call-second, on disk "
        f"{disk / call_s / 1024:.1f} KiB ({disk / wire:.2f} of the wire)"
    )
    record.finish(
        "capture",
        {
            "build": native.build(),
            "messages": messages,
            "tap_us_per_msg": round(us["tap"], 3),
            "session_us_per_msg": round(us["session"], 3),
            "session_capture_us_per_msg": round(us["session+capture"], 3),
            "capture_loop_us_per_msg": round(added, 3),
            "capture_thread_us_per_msg": round(thread_us, 3),
            "disk_kib_per_call_s": round(disk / call_s / 1024, 2),
            "compressed_of_wire": round(disk / wire, 3),
        },
        args,
    )


if __name__ == "__main__":
    main()
