"""The measurement plane's CPU per message, offline and repeatable (no sockets, no clock).

Recorded-shape Twilio calls are fed, message by message with their arrival times
(``t_ns``), to the same code the proxy runs for each forwarded message
(``CallSession.on_message``, both directions, then ``close``). Three stages are timed
over the same messages in the same run, so the table reads as a ratio against what any
measurement of this wire must do:

* ``parse``: ``orjson.loads`` and the base64 of each media payload (the least work that
  sees the audio: the baseline);
* ``decode``: the Twilio dialect's decoder (JSON, base64, μ-law to PCM, its events);
* ``session``: the whole measurement (decode, VAD, levels, playout, turns, receipt);
* ``queued``: the same, as the proxy runs it: every message queued with its call as it
  arrives, the queue measuring each call's messages in its group turns every 50 ms
  (``proxy/measuring.py``, ``session/batch.py``), each call's pumps alone;
* ``grouped``: ``queued`` with the calls' pumps due in a turn finished together, one
  energies pass for all (``session/pumps.py``: what the proxy does).

Workloads: ``overhead`` is ``benchmarks/overhead.py``'s call shape (60 s of looped
speech both ways in 20 ms messages); ``scripted`` is a set of turn-taking calls with
barge-ins (``support.scripted``: clean, with caller noise at -45 dBFS, and over a
babble bed at -35 dBFS), which carry silence and noise as real calls do;
``concurrent`` is ``--concurrent`` calls of the overhead shape (10 s) all open at once,
their messages interleaved in time as a proxy carrying them sees them (every call's
state in turn: the caches are colder than with one call).

CPU is ``time.process_time`` (this process's CPU, not wall time), the best of
``--repeat`` rounds, the stages interleaved in each: other processes on the machine slow
it far less than wall time, yet a busy machine still adds a few per cent (caches), and on
a noisy one far more: compare the ratios within a run, and the instruction counts
(``benchmarks/instructions.py``) where they disagree.
``receipts_sha256`` digests every receipt (less its wall-clock ``started_at``): the same
digest before and after a change means the same figures.

Run:  PYTHONPATH=. .venv/bin/python benchmarks/measurement.py [--repeat 5] [--profile FILE]
Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import dataclasses
import hashlib
import heapq
import io
import json
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # support.*: the helpers tests and benchmarks share

import benchkit  # noqa: E402
import record  # noqa: E402
from support.queued import QueuedSession  # noqa: E402
from support.scripted import render, turn_taking_plans  # noqa: E402

from voxproxy import native  # noqa: E402
from voxproxy.clips import load_clips  # noqa: E402
from voxproxy.core.audio.g711 import pcm_to_ulaw  # noqa: E402
from voxproxy.core.dialects import make_decoder  # noqa: E402
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Direction  # noqa: E402
from voxproxy.core.receipt import CloseInfo  # noqa: E402
from voxproxy.core.session import CallSession  # noqa: E402
from voxproxy.core.timebase import NS_PER_MS as MS  # noqa: E402
from voxproxy.proxy.measuring import MeasurementQueue  # noqa: E402

Message = tuple[int, Direction, str]


@dataclasses.dataclass
class Call:
    messages: list[Message]
    end_ns: int
    start_ns: int = 0


def _ulaw_frames(name: str, n: int, skip: int = 0) -> list[str]:
    """``n`` 20 ms base64 μ-law frames of a fixture clip, looped (as overhead.py sends),
    from its ``skip``-th frame."""
    pcm = load_clips()[name].pcm
    pcm8 = pcm[: (pcm.size // 2) * 2].reshape(-1, 2).astype(np.int32).mean(axis=1).astype(np.int16)
    ulaw = pcm_to_ulaw(pcm8)
    frames = [ulaw[i : i + 160] for i in range(0, len(ulaw) - 160, 160)]
    return [base64.b64encode(frames[(skip + i) % len(frames)]).decode("ascii") for i in range(n)]


def overhead_call(seconds: float, start_ns: int = 0, skip: int = 0) -> Call:
    """One call of overhead.py's shape: a 20 ms media message each way every 20 ms."""
    n = int(seconds * 50)
    caller = _ulaw_frames("caller_where_is_order", n, skip)
    agent = _ulaw_frames("agent_long_answer", n, skip)
    sid = "MZ" + "0" * 32
    start = {
        "event": "start",
        "sequenceNumber": "1",
        "start": {
            "streamSid": sid,
            "callSid": "CA" + "1" * 32,
            "accountSid": "AC0",
            "tracks": ["inbound"],
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
            "customParameters": {},
        },
        "streamSid": sid,
    }
    msgs: list[Message] = [
        (start_ns, CALLER_TO_AGENT, '{"event":"connected","protocol":"Call","version":"1.0.0"}'),
        (start_ns + 1_000, CALLER_TO_AGENT, json.dumps(start)),
    ]
    for k in range(n):
        t = start_ns + (k + 1) * 20_000_000
        media = {
            "track": "inbound",
            "chunk": str(k),
            "timestamp": str(k * 20),
            "payload": caller[k],
        }
        msgs.append(
            (
                t + 300_000,
                CALLER_TO_AGENT,
                json.dumps(
                    {
                        "event": "media",
                        "sequenceNumber": str(k + 1),
                        "media": media,
                        "streamSid": sid,
                        "t": t,
                    }
                ),
            )
        )
        msgs.append(
            (
                t + 700_000,
                AGENT_TO_CALLER,
                json.dumps(
                    {"event": "media", "streamSid": sid, "media": {"payload": agent[k]}, "t": t}
                ),
            )
        )
    return Call(msgs, msgs[-1][0] + 1_000, start_ns)


def concurrent_calls(count: int, seconds: float) -> list[Call]:
    """``count`` calls of overhead.py's shape at once, started spread over 20 ms (their
    messages are measured interleaved in time, as a proxy carrying them all does)."""
    return [overhead_call(seconds, k * 20_000_000 // count, 37 * k) for k in range(count)]


def scripted_calls(count: int, seed: int = 1717) -> list[Call]:
    """Turn-taking Twilio calls with barge-ins, paced and in bursts, clean and noisy
    (support.scripted.turn_taking_plans)."""
    calls = []
    for plan in turn_taking_plans(count, seed):
        call = render(plan)
        calls.append(Call(list(call.messages), call.end_ns))
    return calls


def stage_parse(calls: list[Call]) -> None:
    loads, b64 = orjson.loads, base64.b64decode
    for call in calls:
        for _, _, payload in call.messages:
            msg = loads(payload)
            media = msg.get("media")
            if media is not None:
                b64(media["payload"])


def stage_decode(calls: list[Call]) -> None:
    for call in calls:
        dec = make_decoder("twilio")
        for t, d, payload in call.messages:
            dec.decode(d, payload, t)


def _session_receipts(calls: list[Call], together: bool = False) -> list[str]:
    """Each call through its own CallSession, one after the other or (``together``) all
    open at once, their messages in time order."""
    out = []
    groups = [calls] if together else [[c] for c in calls]
    for group in groups:
        sessions = [
            CallSession(make_decoder("twilio"), c.start_ns, secret=b"bench", link_id="bench")
            for c in group
        ]
        streams = [[(t, i, d, p) for t, d, p in c.messages] for i, c in enumerate(group)]
        feeds = [s.on_message for s in sessions]
        for t, i, d, payload in heapq.merge(*streams) if together else streams[0]:
            feeds[i](d, payload, t)
        for s, c in zip(sessions, group, strict=True):
            r = s.close(c.end_ns, "completed", CloseInfo(initiator="caller"))
            out.append(r.model_dump_json(exclude={"started_at"}))
    return out


def _queued_receipts(calls: list[Call], pumps: bool) -> list[str]:
    """The calls all open at once, their messages queued as they arrive and measured in
    the queue's group turns every 50 ms of call time (no budget: a turn measures all
    that is queued); ``pumps``: the calls' pumps due in a turn finished together."""
    later: list[Callable[[], None]] = []
    now = [0]
    queue = MeasurementQueue(
        group_ms=50.0,
        max_backlog=1 << 30,
        shed_after_ms=1e12,
        cpu_ns=lambda: 0,
        loop_cpu_ns=lambda: 0,
        now_ns=lambda: now[0],
        call_soon=later.append,
        call_later=lambda _s, fn: later.append(fn),
    )
    sessions = [
        CallSession(make_decoder("twilio"), c.start_ns, secret=b"bench", link_id="bench")
        for c in calls
    ]
    if pumps:
        for s in sessions:
            s.pumps = queue.pumps
    held = [QueuedSession(s) for s in sessions]
    streams = [[(t, i, d, p) for t, d, p in c.messages] for i, c in enumerate(calls)]
    next_turn = min(c.start_ns for c in calls) + 50 * MS
    for t, i, d, payload in heapq.merge(*streams):
        while t >= next_turn:
            now[0] = next_turn
            todo = later[:]
            later.clear()
            for fn in todo:
                fn()
            next_turn += 50 * MS
        now[0] = t
        queue.defer(held[i], (d, payload, t))
    queue.drain()
    out = []
    for s, c in zip(sessions, calls, strict=True):
        r = s.close(c.end_ns, "completed", CloseInfo(initiator="caller"))
        out.append(r.model_dump_json(exclude={"started_at"}))
    return out


def stage_queued(calls: list[Call]) -> None:
    _queued_receipts(calls, pumps=False)


def stage_grouped(calls: list[Call]) -> None:
    _queued_receipts(calls, pumps=True)


def stage_session(calls: list[Call]) -> None:
    _session_receipts(calls, together=len({c.start_ns for c in calls}) > 1)


STAGES: dict[str, Callable[[list[Call]], None]] = {
    "parse": stage_parse,
    "decode": stage_decode,
    "session": stage_session,
    "queued": stage_queued,
    "grouped": stage_grouped,
}


def best_cpus(
    stages: dict[str, Callable[[list[Call]], None]], calls: list[Call], repeat: int
) -> dict[str, float]:
    """Each stage's best CPU over ``repeat`` rounds, the stages interleaved (their order
    reversed every other round): a machine whose speed drifts within the run, or a
    stage that warms the caches for the next, favours none of them."""
    best = dict.fromkeys(stages, float("inf"))
    names = list(stages)
    for r in range(repeat):
        for name in names if r % 2 == 0 else names[::-1]:
            t0 = time.process_time()
            stages[name](calls)
            best[name] = min(best[name], time.process_time() - t0)
    return best


def profile_top(calls: list[Call], top: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    stage_session(calls)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    return buf.getvalue()


WORKLOADS = ("overhead", "scripted", "concurrent")


def workload(
    name: str, seconds: float, calls: int, concurrent: int, concurrent_seconds: float
) -> list[Call]:
    """The calls of a workload by its name: ``overhead`` (one call of ``seconds``),
    ``scripted`` (``calls`` calls), ``concurrent`` (``concurrent`` calls of
    ``concurrent_seconds`` each). ValueError for another name."""
    if name == "overhead":
        return [overhead_call(seconds)]
    if name == "scripted":
        return scripted_calls(calls)
    if name == "concurrent":
        return concurrent_calls(concurrent, concurrent_seconds)
    raise ValueError(f"unknown workload {name!r} (one of {', '.join(WORKLOADS)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5, help="runs per stage; the best counts")
    ap.add_argument("--seconds", type=float, default=60.0, help="length of the overhead call")
    ap.add_argument("--calls", type=int, default=12, help="scripted calls")
    ap.add_argument("--concurrent", type=int, default=50, help="calls at once (concurrent)")
    ap.add_argument("--workloads", default="overhead,scripted,concurrent")
    ap.add_argument("--profile", metavar="FILE", help="write cProfile's top (own time) here")
    record.add_flag(ap)
    args = ap.parse_args()

    workloads: dict[str, list[Call]] = {}
    for name in args.workloads.split(","):
        try:
            workloads[name] = workload(name, args.seconds, args.calls, args.concurrent, 10.0)
        except ValueError as exc:
            ap.error(str(exc))

    rows = []
    digest = hashlib.sha256()
    for name, calls in workloads.items():
        n = sum(len(c.messages) for c in calls)
        receipts = _session_receipts(calls, name == "concurrent")  # also warms up
        for receipt in receipts:
            digest.update(receipt.encode("utf-8"))
        for pumps in (False, True):  # the proxy's way gives the same receipts
            if _queued_receipts(calls, pumps) != receipts:
                raise SystemExit(f"{name}: the queued receipts differ (pumps together: {pumps})")
        us = {st: cpu / n * 1e6 for st, cpu in best_cpus(STAGES, calls, args.repeat).items()}
        rows.append(
            {
                "workload": name,
                "messages": n,
                "parse_us": round(us["parse"], 2),
                "decode_us": round(us["decode"], 2),
                "session_us": round(us["session"], 2),
                "queued_us": round(us["queued"], 2),
                "grouped_us": round(us["grouped"], 2),
                "measurement_us": round(us["session"] - us["parse"], 2),
                "session_over_parse": round(us["session"] / us["parse"], 2),
            }
        )

    from rich.console import Console

    build = native.build()
    cols = ("workload", "messages", "parse", "decode", "session", "queued", "grouped")
    table = benchkit.figures_table(
        "voxproxy measurement CPU per message, offline (process_time, best run); "
        f"measurement core: {build}",
        (*cols, "session-parse", "ratio"),
    )
    for r in rows:
        table.add_row(
            str(r["workload"]),
            str(r["messages"]),
            f"{r['parse_us']:.2f} µs",
            f"{r['decode_us']:.2f} µs",
            f"{r['session_us']:.2f} µs",
            f"{r['queued_us']:.2f} µs",
            f"{r['grouped_us']:.2f} µs",
            f"{r['measurement_us']:.2f} µs",
            f"{r['session_over_parse']:.2f}",
        )
    console = Console(width=120)
    console.print(table)
    console.print(
        "parse = orjson + base64 of each message (baseline); decode = the Twilio decoder; "
        "session = CallSession.on_message for every message + close; queued = the same "
        "through the proxy's measurement queue, in group turns every 50 ms; grouped = queued "
        "with the pumps of a turn finished together (the proxy's way); ratio = session / parse."
    )
    if args.profile:
        calls = [c for cs in workloads.values() for c in cs]
        Path(args.profile).write_text(profile_top(calls, 30))
        console.print(f"profile (cProfile, own time) written to {args.profile}")
    record.finish(
        "measurement",
        {"build": build, "workloads": rows, "receipts_sha256": digest.hexdigest()},
        args,
    )


if __name__ == "__main__":
    main()
