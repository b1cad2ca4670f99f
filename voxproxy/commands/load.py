"""``voxproxy load``: replay scripted callers against an agent (or a voxproxy in front of one)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from voxproxy.commands.load_merge import add_shard_arguments, sharding


def add_parser(sub: Any) -> None:
    from voxproxy.cli import DefaultsShown, add_transport_arguments

    p = sub.add_parser(
        "load",
        formatter_class=DefaultsShown,
        help="replay scripted callers against a target, many at once; write results and a report",
        description="Each call streams recorded caller audio at real-time pace, plays the "
        "agent's audio with the playout rule and follows a scenario script. Writes "
        "results.json, summary.json and report.html to --out; exits 1 when an expectation fails.",
    )
    p.add_argument(
        "scenarios",
        nargs="+",
        metavar="SCENARIO",
        help="scenario YAML files, or names of built-in scenarios (e.g. normal_question)",
    )
    p.add_argument(
        "--target",
        required=True,
        help="ws:// URL of the agent or of a voxproxy; with --transport webrtc, the http(s):// "
        "signaling URL (a WHIP endpoint, or Pipecat's .../api/offer)",
    )
    add_transport_arguments(
        p.add_argument,
        "webrtc: each call is a WebRTC peer (aiortc) sending 20 ms Opus packets",
        "webrtc: how to offer",
    )
    p.add_argument(
        "--dialect",
        choices=["raw", "twilio", "telnyx", "plivo", "vonage", "exotel", "openai-realtime"],
        default=None,
        help="wire to speak (default: raw, said on stderr; a voxproxy target expects its own "
        "--dialect)",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="twilio: a start.customParameters entry; telnyx: start.custom_parameters (repeatable)",
    )
    p.add_argument("--calls", type=int, default=None, help="calls in all (default: 1)")
    p.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="calls at once (default: 10); with --arrival-rate, the most in flight (default: "
        "30 s of arrivals): an arrival that finds them all busy is dropped and counted",
    )
    p.add_argument(
        "--arrival-rate",
        type=float,
        default=None,
        metavar="PER_S",
        help="the open model, like k6's arrival-rate executors: start calls at this rate "
        "(calls per second) whether or not earlier ones finished, for --duration seconds "
        "(after --ramp-up); instead of --calls",
    )
    p.add_argument(
        "--ramp-up",
        type=float,
        default=0.0,
        metavar="S",
        help="with --arrival-rate: seconds to climb linearly from 0 to the rate",
    )
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="S",
        help="with --arrival-rate: seconds to hold the rate (after --ramp-up)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="local processes to spread the calls over (shards of the run, started together "
        "and merged into one result)",
    )
    p.add_argument("--out", default="voxproxy-load", help="output directory")
    p.add_argument(
        "--sample-rate", type=int, default=16000, help="raw and vonage: caller audio rate in Hz"
    )
    p.add_argument(
        "--header", action="append", default=[], metavar="NAME:VALUE", help="extra header"
    )
    p.add_argument(
        "--proxy-receipts",
        default=None,
        help="the target voxproxy's receipts file: adds its figures and their error",
    )
    p.add_argument(
        "--proxy-secret",
        default=None,
        help="the target voxproxy's --secret (to find each call's receipt)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the callers' random noise (white noise under a call); call i uses "
        "SEED + i, so a run with the same seed plays the same calls",
    )
    p.add_argument(
        "--transcript-policy",
        default=None,
        metavar="YAML",
        help="normalization policy for scoring the agent's transcripts (default: embedded)",
    )
    p.add_argument(
        "--transcript-terms",
        action="append",
        default=[],
        metavar="YAML",
        help="meaning-bearing term list for transcript scores (repeatable; default: embedded)",
    )
    add_shard_arguments(p)
    p.set_defaults(func=_cmd)


def _cmd(args: argparse.Namespace) -> int:
    from voxproxy.errors import ConfigError
    from voxproxy.loadgen.progress import CallCounter, CallDone
    from voxproxy.loadgen.runner import (
        LoadPlan,
        outcomes,
        play,
        print_summary,
        receipts_by_call,
        write_results,
    )
    from voxproxy.loadgen.scenario import find_scenario
    from voxproxy.transcripts.score import Scoring

    arrivals = None
    if args.arrival_rate is not None:
        from voxproxy.loadgen.arrivals import arrival_times, default_cap

        if args.calls is not None:
            raise ConfigError("--arrival-rate plays calls on a schedule: give no --calls")
        if args.duration is None:
            raise ConfigError("--arrival-rate needs --duration (seconds at the rate)")
        arrivals = arrival_times(args.arrival_rate, args.ramp_up, args.duration)
        args.calls = len(arrivals)
        if args.concurrency is None:
            args.concurrency = default_cap(args.arrival_rate)
    elif args.duration is not None or args.ramp_up:
        raise ConfigError("--duration and --ramp-up go with --arrival-rate")
    args.calls = 1 if args.calls is None else args.calls
    args.concurrency = 10 if args.concurrency is None else args.concurrency
    if args.calls < 1 or args.concurrency < 1 or args.workers < 1:
        raise ConfigError("--calls, --concurrency and --workers must be at least 1")
    if args.transport == "webrtc":
        from voxproxy.extras import require

        require("webrtc", "--transport webrtc")
        if not args.target.startswith(("http://", "https://")):
            raise ConfigError(f"--transport webrtc needs an http(s):// target, got {args.target!r}")
        if args.proxy_receipts:
            raise ConfigError(
                "--proxy-receipts cannot be matched to WebRTC calls (they carry no wire call id)"
            )
    elif not args.target.startswith(("ws://", "wss://")):
        raise ConfigError(f"--target must be a ws:// or wss:// URL, got {args.target!r}")
    if bool(args.proxy_receipts) != bool(args.proxy_secret):
        raise ConfigError("--proxy-receipts and --proxy-secret go together")
    headers = []
    for h in args.header:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"--header wants NAME:VALUE, got {h!r}")
        headers.append((name.strip(), value.strip()))
    if args.dialect is None:
        args.dialect = "raw"
        print(
            "voxproxy load: speaking the raw wire (the default); pass --dialect to speak "
            "another (twilio, telnyx, plivo, vonage, exotel, openai-realtime)",
            file=sys.stderr,
        )
    params = []
    for item in args.param:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--param wants NAME=VALUE, got {item!r}")
        params.append((name.strip(), value))
    if params and args.dialect not in ("twilio", "telnyx"):
        raise ConfigError("--param: only the twilio and telnyx wires carry custom parameters")
    scenarios = tuple(find_scenario(ref) for ref in args.scenarios)
    scoring = Scoring.load(args.transcript_policy, args.transcript_terms)
    plan = LoadPlan(
        target=args.target,
        dialect=args.dialect,
        scenarios=scenarios,
        calls=args.calls,
        concurrency=args.concurrency,
        sample_rate_hz=args.sample_rate,
        headers=tuple(headers),
        seed=args.seed,
        transport=args.transport,
        signaling=args.signaling,
        custom_parameters=tuple(params),
        arrivals=arrivals,
    )
    shards = sharding(args, plan)  # --shard/--start-at/--run-id (voxproxy.loadgen.shard)
    if shards is not None:
        plan = shards.plan

    finished: list[Any] = []  # the calls that finished, as they finish
    stop = threading.Event()  # set on Ctrl-C: workers stop and report what finished

    def run(progress: Callable[[CallDone], None] | None) -> Awaitable[list[Any]]:
        if shards:
            return shards.play(progress, finished)
        return play(plan, args.workers, progress, finished, stop)

    total = shards.calls if shards else plan.calls
    at_once = shards.shard.concurrency(plan.concurrency) if shards and shards.shard else None
    last = plan.arrivals[-1] if plan.arrivals else None
    counter = CallCounter(total, at_once or plan.concurrency, time.monotonic(), last)
    # Played on this loop (else by worker processes, told through `stop`).
    one_loop = shards is not None or min(args.workers, plan.calls, plan.concurrency) <= 1
    interrupted = False

    async def main() -> list[Any]:
        loop = asyncio.get_running_loop()
        playing = _shown(run, counter) if sys.stderr.isatty() else run(_logged(counter))
        task = asyncio.ensure_future(playing)

        def on_sigint() -> None:
            nonlocal interrupted
            interrupted = True
            stop.set()
            if one_loop:
                task.cancel()  # on this loop: the finished calls are in `finished`

        loop.add_signal_handler(signal.SIGINT, on_sigint)
        try:
            return await task
        except asyncio.CancelledError:
            if not interrupted:
                raise
            return sorted(finished, key=lambda r: r[0])
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    def _logged(counter: CallCounter) -> Callable[[CallDone], None]:
        """Without a terminal: a progress line at each tenth of the calls (for CI logs)."""
        said = [0]

        def tick(call: CallDone) -> None:
            counter.add(call)
            tenth = 10 * counter.done // counter.total
            if tenth > said[0]:
                said[0] = tenth
                print(f"voxproxy load: {counter.line(time.monotonic())}", file=sys.stderr)

        return tick

    async def _shown(
        play_with: Callable[[Callable[[CallDone], None]], Awaitable[list[Any]]],
        counter: CallCounter,
    ) -> list[Any]:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (BarColumn(), TextColumn("{task.fields[info]}"), TimeElapsedColumn())
        with Progress(*columns, transient=True) as bar:
            task = bar.add_task("calls", total=counter.total, info=counter.line(time.monotonic()))

            def tick(call: CallDone | None = None) -> None:
                if call is not None:
                    counter.add(call)
                bar.update(task, completed=counter.done, info=counter.line(time.monotonic()))

            async def clock() -> None:  # the ETA counts down between calls too
                while True:
                    await asyncio.sleep(1.0)
                    tick()

            ticking = asyncio.ensure_future(clock())
            try:
                return await play_with(tick)
            finally:
                ticking.cancel()

    started = time.monotonic()
    try:
        import uvloop

        records = uvloop.run(main())
    except ImportError:
        records = asyncio.run(main())
    receipts = None
    secret = None
    if args.proxy_receipts:
        time.sleep(0.5)  # the proxy writes each receipt as its call ends
        secret = args.proxy_secret.encode()
        receipts = receipts_by_call(Path(args.proxy_receipts), secret)
    calls = outcomes(plan, records, receipts, secret)
    out = Path(args.out)
    view = shards.view() if shards else plan
    _results, summary = write_results(out, view, calls, scoring, interrupted=interrupted)
    if shards is not None and not interrupted:
        shards.save(out, calls)
    print_summary(summary)
    heard = summary["all"].get("transcripts") or {}
    if heard.get("scorecard"):
        wer, ter = heard["wer"], heard["term_error_rate"]
        print(
            f"what the agent heard: WER {'—' if wer is None else f'{100 * wer:.1f} %'}, "
            f"term error rate {'—' if ter is None else f'{100 * ter:.1f} %'}, numbers "
            f"{heard['numbers']['text']} right, scorecard {heard['scorecard']['total']} / 100 "
            "(not-recognized list in report.html)"
        )
    failed = summary["all"]["failed_calls"]
    errors = summary["all"]["errors"]
    print(
        f"{len(calls)} calls in {time.monotonic() - started:.0f} s; {failed} failed an "
        "expectation"
        + (f" ({errors} did not get through: causes above)" if errors else "")
        + f". Results: {out / 'results.json'}, {out / 'summary.json'}, {out / 'report.html'}"
    )
    if interrupted:
        print(
            f"interrupted: {len(calls)} of {total} calls had finished; the results, summary "
            "and report above are theirs (calls cut off in flight are left out)"
            + ("; no shard.json.gz was written" if shards is not None else ""),
            file=sys.stderr,
        )
        return 130
    if shards is not None and shards.shard is not None:
        return 0  # a shard's calls are judged by `voxproxy load merge` (exit 1 there)
    return 1 if failed else 0
