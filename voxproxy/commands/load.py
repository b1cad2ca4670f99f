"""``voxproxy load``: replay scripted callers against an agent (or a voxproxy in front of one)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxproxy.commands.load_merge import Sharding, add_shard_arguments, sharding

if TYPE_CHECKING:
    from voxproxy.loadgen.progress import CallCounter, CallDone
    from voxproxy.loadgen.results import CallOutcome
    from voxproxy.loadgen.runner import LoadPlan
    from voxproxy.transcripts.score import Scoring


def add_parser(sub: Any) -> None:
    from voxproxy.commands.parsing import DefaultsShown, EnvParser, add_transport_arguments

    p: EnvParser = sub.add_parser(
        "load",
        formatter_class=DefaultsShown,
        usage="%(prog)s SCENARIO [SCENARIO ...] --target URL [options]",
        help="replay scripted callers against a target, many at once; write results and a report",
        description="Each call streams recorded caller audio at real-time pace, plays the "
        "agent's audio with the playout rule and follows a scenario script. Writes "
        "results.json, summary.json and report.html to --out; exits 1 when an expectation fails.",
    )
    g_calls = p.add_group("the calls")
    g_how = p.add_group("how many, how fast")
    g_out = p.add_group("results")
    p.add_argument(
        "scenarios",
        nargs="+",
        metavar="SCENARIO",
        help="scenario YAML files, or names of built-in scenarios (e.g. normal_question; "
        "`voxproxy scenarios` lists them and the clips a step can say)",
    )
    g_calls.add_argument(
        "--target",
        metavar="URL",
        required=True,
        help="ws:// URL of the agent or of a voxproxy; with --transport webrtc, the http(s):// "
        "signaling URL (a WHIP endpoint, or Pipecat's .../api/offer)",
    )
    add_transport_arguments(
        g_calls.add_argument,
        "webrtc: each call is a WebRTC peer (aiortc) sending 20 ms Opus packets",
        "webrtc: how to offer",
    )
    g_calls.add_argument(
        "--dialect",
        choices=["raw", "twilio", "telnyx", "plivo", "vonage", "exotel", "openai-realtime"],
        default=None,
        help="wire to speak (default: raw, said on stderr; a voxproxy target expects its own "
        "--dialect)",
    )
    g_calls.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="twilio: a start.customParameters entry; telnyx: start.custom_parameters (repeatable)",
    )
    g_how.add_argument(
        "--calls", metavar="N", type=int, default=None, help="calls in all (default: 1)"
    )
    g_how.add_argument(
        "--concurrency",
        metavar="N",
        type=int,
        default=None,
        help="calls at once; with --arrival-rate, the most in flight (an arrival that finds "
        "them all busy is dropped and counted) (default: 10; with --arrival-rate, the "
        "arrivals of the longest call the scenarios allow: clips, silences, and waits for "
        "the agent to their timeouts)",
    )
    g_how.add_argument(
        "--arrival-rate",
        type=float,
        default=None,
        metavar="PER_S",
        help="the open model, like k6's arrival-rate executors: start calls at this rate "
        "(calls per second) whether or not earlier ones finished, for --duration seconds "
        "(after --ramp-up); instead of --calls",
    )
    g_how.add_argument(
        "--ramp-up",
        type=float,
        default=0.0,
        metavar="S",
        help="with --arrival-rate: seconds to climb linearly from 0 to the rate",
    )
    g_how.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="S",
        help="with --arrival-rate: seconds to hold the rate (after --ramp-up)",
    )
    g_how.add_argument(
        "--workers",
        metavar="N",
        type=int,
        default=1,
        help="local processes to spread the calls over (shards of the run, started together "
        "and merged into one result)",
    )
    g_out.add_argument("--out", metavar="DIR", default="voxproxy-load", help="output directory")
    g_calls.add_argument(
        "--sample-rate",
        metavar="HZ",
        type=int,
        default=16000,
        help="raw and vonage: caller audio rate in Hz",
    )
    g_calls.add_argument(
        "--header", action="append", default=[], metavar="NAME:VALUE", help="extra header"
    )
    g_out.add_argument(
        "--proxy-receipts",
        metavar="FILE",
        default=None,
        help="the target voxproxy's receipts file: adds its figures and their error",
    )
    g_out.add_argument(
        "--proxy-secret",
        metavar="KEY",
        default=None,
        help="the target voxproxy's --secret (to find each call's receipt)",
    )
    g_calls.add_argument(
        "--seed",
        metavar="N",
        type=int,
        default=0,
        help="seed of the callers' random noise (white noise under a call); call i uses "
        "SEED + i, so a run with the same seed plays the same calls",
    )
    g_out.add_argument(
        "--transcript-policy",
        default=None,
        metavar="YAML",
        help="normalization policy for scoring the agent's transcripts (default: embedded)",
    )
    g_out.add_argument(
        "--transcript-terms",
        action="append",
        default=[],
        metavar="YAML",
        help="meaning-bearing term list for transcript scores (repeatable; default: embedded)",
    )
    add_shard_arguments(p.add_group("sharded runs (several processes or machines)"))
    p.set_defaults(func=_cmd)


def _cmd(args: argparse.Namespace) -> int:
    """Check the flags, play the calls, write and print the results; 1 when a call failed."""
    load = _settings(args)
    counter = _counter(load)
    started = time.monotonic()
    records, interrupted = _play(load, counter)
    if interrupted:  # said first: every figure below is of the calls that finished
        _say_interrupted(load, len(records))
    calls = _call_outcomes(load, records)
    summary = _write_results(load, calls, interrupted)
    _print_results(summary, len(calls), load.out, started, interrupted)
    return _exit_status(load, summary, interrupted)


@dataclass(frozen=True)
class _Schedule:
    """How many calls, how many at once, and (with --arrival-rate) when each starts."""

    calls: int
    concurrency: int | None  # None: --arrival-rate's default, once the scenarios are read
    arrivals: tuple[float, ...] | None  # start offsets (s), the open model; None: closed
    rate: float | None = None  # --arrival-rate


@dataclass(frozen=True)
class _LoadSettings:
    """``voxproxy load``'s flags, checked: the plan and how to run and report it."""

    plan: LoadPlan  # with its run id when sharded (or given --run-id)
    shards: Sharding | None  # None: an ordinary run
    scoring: Scoring
    workers: int
    out: Path
    receipts: tuple[Path, str] | None  # --proxy-receipts and --proxy-secret, when given

    @property
    def calls_here(self) -> int:
        """Calls this process plays (a shard's, or all of them)."""
        return self.shards.calls if self.shards else self.plan.calls


def _settings(args: argparse.Namespace) -> _LoadSettings:
    """Check the flags (ConfigError on a mistake, in this order) and build the load plan."""
    from voxproxy.loadgen.runner import LoadPlan
    from voxproxy.loadgen.scenario import find_scenario
    from voxproxy.transcripts.score import Scoring

    schedule = _schedule(args)
    _check_transport(args)
    headers = _headers(args.header)
    dialect = _dialect(args.dialect, args.transport)
    params = _custom_parameters(args.param, dialect)
    scenarios = tuple(find_scenario(ref) for ref in args.scenarios)
    scoring = Scoring.load(args.transcript_policy, args.transcript_terms)
    plan = LoadPlan(
        target=args.target,
        dialect=dialect,
        scenarios=scenarios,
        calls=schedule.calls,
        concurrency=schedule.concurrency or _default_cap(schedule, scenarios),
        sample_rate_hz=args.sample_rate,
        headers=headers,
        seed=args.seed,
        transport=args.transport,
        signaling=args.signaling,
        custom_parameters=params,
        arrivals=schedule.arrivals,
    )
    shards = sharding(args, plan)  # --shard/--start-at/--run-id (voxproxy.loadgen.shard)
    return _LoadSettings(
        plan=shards.plan if shards is not None else plan,
        shards=shards,
        scoring=scoring,
        workers=args.workers,
        out=Path(args.out),
        receipts=(Path(args.proxy_receipts), args.proxy_secret) if args.proxy_receipts else None,
    )


def _schedule(args: argparse.Namespace) -> _Schedule:
    """--calls and --concurrency (defaults 1 and 10), or the --arrival-rate schedule
    (--concurrency's default left to :func:`_default_cap`)."""
    from voxproxy.core.errors import ConfigError

    calls: int | None = args.calls
    concurrency: int | None = args.concurrency
    arrivals = None
    if args.arrival_rate is not None:
        from voxproxy.loadgen.arrivals import arrival_times

        if calls is not None:
            raise ConfigError("--arrival-rate plays calls on a schedule: give no --calls")
        if args.duration is None:
            raise ConfigError("--arrival-rate needs --duration (seconds at the rate)")
        arrivals = arrival_times(args.arrival_rate, args.ramp_up, args.duration)
        calls = len(arrivals)
    elif args.duration is not None or args.ramp_up:
        raise ConfigError("--duration and --ramp-up go with --arrival-rate")
    else:
        concurrency = 10 if concurrency is None else concurrency
    calls = 1 if calls is None else calls
    if calls < 1 or (concurrency is not None and concurrency < 1) or args.workers < 1:
        raise ConfigError("--calls, --concurrency and --workers must be at least 1")
    return _Schedule(calls, concurrency, arrivals, args.arrival_rate)


def _default_cap(schedule: _Schedule, scenarios: tuple[tuple[Any, Path], ...]) -> int:
    """--arrival-rate's --concurrency when not given: the arrivals of the longest call
    the scenarios' scripts allow (:func:`voxproxy.loadgen.arrivals.default_cap`)."""
    from voxproxy.loadgen.arrivals import default_cap
    from voxproxy.loadgen.steps import DEFAULT_TAIL_MS, longest_call_s

    assert schedule.rate is not None
    longest = max(
        longest_call_s(scenario.caller_steps(base), DEFAULT_TAIL_MS) for scenario, base in scenarios
    )
    return default_cap(schedule.rate, longest)


def _check_transport(args: argparse.Namespace) -> None:
    """The target's scheme fits --transport; --proxy-receipts comes with --proxy-secret."""
    from voxproxy.core.errors import ConfigError

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


def _name_value(item: str, sep: str, flag: str) -> tuple[str, str]:
    """``NAME<sep>VALUE`` split in two, the name stripped (and not empty)."""
    from voxproxy.core.errors import ConfigError

    name, found, value = item.partition(sep)
    if not found or not name.strip():
        raise ConfigError(f"{flag} wants NAME{sep}VALUE, got {item!r}")
    return name.strip(), value


def _headers(items: list[str]) -> tuple[tuple[str, str], ...]:
    """The --header flags (NAME:VALUE), name and value stripped."""
    pairs = (_name_value(h, ":", "--header") for h in items)
    return tuple((name, value.strip()) for name, value in pairs)


def _dialect(dialect: str | None, transport: str) -> str:
    """The wire to speak: --dialect, or raw (said on stderr, not assumed silently).
    WebRTC calls carry Opus media and no websocket wire: no --dialect, nothing said."""
    from voxproxy.core.errors import ConfigError

    if transport == "webrtc":
        if dialect is not None:
            raise ConfigError(
                "--dialect is a websocket wire; --transport webrtc calls send Opus media "
                "(give no --dialect)"
            )
        return "raw"
    if dialect is not None:
        return dialect
    print(
        "voxproxy load: speaking the raw wire (the default); pass --dialect to speak "
        "another (twilio, telnyx, plivo, vonage, exotel, openai-realtime)",
        file=sys.stderr,
    )
    return "raw"


def _custom_parameters(items: list[str], dialect: str) -> tuple[tuple[str, str], ...]:
    """The --param flags (NAME=VALUE, the value as given), for the wires that carry them."""
    from voxproxy.core.errors import ConfigError

    params = tuple(_name_value(item, "=", "--param") for item in items)
    if params and dialect not in ("twilio", "telnyx"):
        raise ConfigError("--param: only the twilio and telnyx wires carry custom parameters")
    return params


def _counter(load: _LoadSettings) -> CallCounter:
    """The progress count of this process's calls, started now."""
    from voxproxy.loadgen.progress import CallCounter

    shards, plan = load.shards, load.plan
    shard = shards.shard if shards else None
    at_once = shard.concurrency(plan.concurrency) if shard else None
    arrivals = None
    if plan.arrivals:
        mine = shard.indices(plan.calls) if shard else range(plan.calls)
        arrivals = {i: plan.arrivals[i] for i in mine}
    started = time.monotonic()
    if shards is not None and shards.start_at is not None:  # calls begin at the barrier
        started += max(0.0, shards.start_at - time.time())
    return CallCounter(load.calls_here, at_once or plan.concurrency, started, arrivals)


def _play(load: _LoadSettings, counter: CallCounter) -> tuple[list[Any], bool]:
    """Play the calls, showing progress; Ctrl-C stops them.

    Returns the calls' records and whether Ctrl-C interrupted the run (then the records
    are those of the calls that finished)."""
    from voxproxy.loadgen.shard import play

    shards, plan = load.shards, load.plan
    finished: list[Any] = []  # the calls that finished, as they finish
    stop = threading.Event()  # set on Ctrl-C: workers stop and report what finished

    def run(progress: Callable[[CallDone], None] | None) -> Awaitable[list[Any]]:
        if shards:
            return shards.play(progress, finished)
        return play(plan, load.workers, progress, finished, stop)

    # Played on this loop (else by worker processes, told through `stop`).
    one_loop = shards is not None or min(load.workers, plan.calls, plan.concurrency) <= 1
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

    try:
        import uvloop

        records: list[Any] = uvloop.run(main())
    except ImportError:
        records = asyncio.run(main())
    return records, interrupted


def _logged(counter: CallCounter) -> Callable[[CallDone], None]:
    """Without a terminal: a progress line at each tenth of the calls (for CI logs)."""
    said = [0]

    def tick(call: CallDone) -> None:
        counter.add(call, time.monotonic())
        tenth = 10 * counter.done // counter.total
        if tenth > said[0]:
            said[0] = tenth
            print(f"voxproxy load: {counter.line(time.monotonic())}", file=sys.stderr)

    return tick


async def _shown(
    play_with: Callable[[Callable[[CallDone], None]], Awaitable[list[Any]]],
    counter: CallCounter,
) -> list[Any]:
    """On a terminal: a progress bar (calls done, failed, ETA), gone when the run ends."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (BarColumn(), TextColumn("{task.fields[info]}"), TimeElapsedColumn())
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task("calls", total=counter.total, info=counter.line(time.monotonic()))

        def tick(call: CallDone | None = None) -> None:
            if call is not None:
                counter.add(call, time.monotonic())
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


def _call_outcomes(load: _LoadSettings, records: list[Any]) -> list[CallOutcome]:
    """The calls' outcomes, with the target voxproxy's receipts when --proxy-receipts."""
    from voxproxy.loadgen.runner import outcomes, receipts_by_call

    receipts = None
    secret = None
    if load.receipts is not None:
        path, proxy_secret = load.receipts
        time.sleep(0.5)  # the proxy writes each receipt as its call ends
        secret = proxy_secret.encode()
        receipts = receipts_by_call(path, secret)
    return outcomes(load.plan, records, receipts, secret)


def _write_results(
    load: _LoadSettings, calls: list[CallOutcome], interrupted: bool
) -> dict[str, Any]:
    """results.json, summary.json and report.html (and a shard's shard.json.gz, unless
    interrupted) in --out; returns the summary."""
    from voxproxy.loadgen.runner import write_results

    shards = load.shards
    view = shards.view() if shards else load.plan
    _results, summary = write_results(load.out, view, calls, load.scoring, interrupted=interrupted)
    if shards is not None and not interrupted:
        shards.save(load.out, calls)
    return summary


def _print_results(
    summary: dict[str, Any], calls: int, out: Path, started: float, interrupted: bool
) -> None:
    """The run's table, what the agent heard (when scored) and a line on the whole run."""
    from voxproxy.loadgen.runner import print_summary

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
    took = f"{time.monotonic() - started:.0f} s"
    print(
        (
            f"interrupted after {took}: of the {calls} calls that finished, {failed} failed "
            "an expectation"
            if interrupted
            else f"{calls} calls in {took}; {failed} failed an expectation"
        )
        + (f" ({errors} did not get through: causes above)" if errors else "")
        + f". Results: {out / 'results.json'}, {out / 'summary.json'}, {out / 'report.html'}"
    )


def _say_interrupted(load: _LoadSettings, finished: int) -> None:
    print(
        f"interrupted: {finished} of {load.calls_here} calls had finished; the results, "
        "summary and report below are theirs (calls cut off in flight are left out)"
        + ("; no shard.json.gz is written" if load.shards is not None else ""),
        file=sys.stderr,
        flush=True,
    )


def _exit_status(load: _LoadSettings, summary: dict[str, Any], interrupted: bool) -> int:
    """130 when interrupted, 0 for a shard, else 1 when a call failed."""
    if interrupted:
        return 130
    if load.shards is not None and load.shards.shard is not None:
        return 0  # a shard's calls are judged by `voxproxy load merge` (exit 1 there)
    return 1 if summary["all"]["failed_calls"] else 0
