"""``voxproxy proxy --workers N``: N processes serve one port, as one proxy.

The parent (:func:`run_workers`), before any event loop or thread exists in it:
checks the configuration and loads the policy (a mistake fails once, here);
claims the address, reserves the port and checks that no other process serves it
(:mod:`voxproxy.proxy.listenclaim`: a second proxy on the port fails to start, in
one line, rather than take a share of the callers); cuts a torn last line off the
receipts file and folds the crash journals of workers that will not run again into
worker 0's; then forks N workers.

Each worker is a :class:`voxproxy.server.ProxyServer` listening on the port with
``SO_REUSEPORT``: the kernel spreads new connections across the workers'
listeners (by a hash of the connection's addresses). A call lives and dies in the
worker that accepted it. What the workers share:

- **receipts**: one file, to which each worker appends whole lines under an
  exclusive ``flock`` (:mod:`voxproxy.receipts.writer`); one SQLite store (WAL,
  writers wait for each other up to sqlite3's 5 s timeout). Worker ``i`` journals
  its calls in progress in ``FILE.open-calls`` (``i = 0``, the single process's
  name) or ``FILE.open-calls.i``.
- **metrics**: each worker serves ``/metrics`` on a loopback port of its own; the
  parent serves ``--metrics-listen`` and merges the workers' on every scrape
  (:func:`voxproxy.telemetry.prometheus.merge_expositions`): one view, counts of
  all calls. OTLP export, when on, goes from each worker.
- **event API**: each worker's listens on a loopback port of its own; the parent
  serves ``--events-listen`` and forwards each request to every worker. The worker
  that holds the call answers it (202, or 4xx for a bad event); the others answer
  404 (no such live call). The parent replies with the holder's answer, or 404
  when no worker holds the call. The token is checked by the workers.
- **signals**: SIGTERM or SIGINT to the parent go to every worker, which drains
  as a single proxy does (``--drain-timeout``); the parent waits for them, then
  exits. A worker whose parent is gone (``kill -9``) drains and exits too: it
  watches a pipe that only the parent holds open for writing.

With N = 1, :func:`voxproxy.server.serve` runs the proxy in its own process, as
before: none of this is involved.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import signal
import socket
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
from urllib.parse import quote

from voxproxy.errors import ConfigError, VoxproxyError
from voxproxy.health import HEALTH_PATH, LIVE_PATH, READY_PATH, REFUSING
from voxproxy.proxy.listenclaim import AddressClaim, check_unserved, reserve_port
from voxproxy.receipts.journal import journal_path
from voxproxy.receipts.policy import Policy, load_policy
from voxproxy.server import ProxyServer, ServeConfig, log_started, run_loop

log = logging.getLogger("voxproxy")

READY_TIMEOUT_S = 60.0  # a worker's start, from fork to listening
FORWARD_TIMEOUT_S = 10.0  # the parent's requests to a worker's /metrics or event API
HEALTH_TIMEOUT_S = 2.0  # the parent's question to a worker: would you admit a caller?
LOOPBACK = "127.0.0.1"


def default_workers() -> int:
    """One worker per CPU this process may run on: the CPUs it is allowed
    (``sched_getaffinity``), no more than its cgroup's CPU quota allows (a container's
    CPU limit: ``cpu.max``, rounded up)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        cpus = min(cpus, quota)
    return max(1, cpus)


def cgroup_cpu_quota(path: str = "/sys/fs/cgroup/cpu.max") -> int | None:
    """CPUs the cgroup (v2) quota allows, rounded up; None when unlimited or unknown."""
    try:
        quota, period = Path(path).read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return max(1, -(-int(quota) // int(period)))
    except (ValueError, ZeroDivisionError):
        return None


def worker_journal(receipts: str | Path, index: int) -> Path:
    """Where worker ``index`` journals its calls in progress."""
    base = journal_path(receipts)
    return base if index == 0 else base.with_name(f"{base.name}.{index}")


def fold_journals(receipts: str | Path, workers: int) -> int:
    """Append the journals of workers numbered ``workers`` and up (left by a run with
    more workers) to worker 0's, so that their calls get their receipts; returns how
    many journals were folded."""
    base = journal_path(receipts)
    folded = 0
    for path in sorted(base.parent.glob(base.name + ".*")):
        suffix = path.name[len(base.name) + 1 :]
        if not suffix.isdigit() or int(suffix) < workers:
            continue
        text = path.read_text(encoding="utf-8")
        if text.strip():
            head = base.read_bytes()[-1:] if base.exists() else b"\n"
            with open(base, "a", encoding="utf-8") as fh:
                if head not in (b"", b"\n"):
                    fh.write("\n")  # never glue a line to a torn one
                fh.write(text if text.endswith("\n") else text + "\n")
        path.unlink()
        folded += 1
    return folded


@dataclass
class Worker:
    index: int
    process: multiprocessing.process.BaseProcess
    ready: Connection
    pid: int = 0
    metrics_port: int | None = None
    events_port: int | None = None


def _worker_config(config: ServeConfig, policy: Policy, index: int, port: int) -> ServeConfig:
    telemetry = config.telemetry
    if telemetry.metrics_listen is not None:
        telemetry = replace(telemetry, metrics_listen=(LOOPBACK, 0))
    events = config.events
    if events is not None:
        events = replace(events, listen=(LOOPBACK, 0))
    return replace(
        config,
        workers=1,
        listen=(config.listen[0], port),
        reuse_port=True,
        policy=policy,
        telemetry=telemetry,
        events=events,
        journal=worker_journal(config.receipts, index) if config.receipts is not None else None,
    )


class _WorkerTag(logging.Filter):
    """Begins a worker's log lines with its number."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.prefix = f"worker {index}: "

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and not record.msg.startswith(self.prefix):
            record.msg = self.prefix + record.msg
        return True


def _worker_main(
    config: ServeConfig,
    index: int,
    ready: Connection,
    alive: tuple[int, int],
    claim: AddressClaim,
) -> None:
    """A forked worker: serve until told to stop, or until the parent is gone."""
    alive_r, alive_w = alive
    os.close(alive_w)  # only the parent keeps it: EOF on alive_r says the parent is gone
    claim.close()  # the parent's: it lets go of it when it drains
    tag = _WorkerTag(index)
    for handler in logging.getLogger().handlers:
        handler.addFilter(tag)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def parent_gone() -> None:
            loop.remove_reader(alive_r)
            log.warning("worker %d: the parent process is gone; draining", index)
            stop.set()

        loop.add_reader(alive_r, parent_gone)

        def started(server: ProxyServer) -> None:
            metrics = getattr(server.telemetry, "metrics_port", None)
            events = server.events_api.port if server.events_api is not None else None
            ready.send({"pid": os.getpid(), "metrics": metrics, "events": events})

        await ProxyServer(config).run(stop, on_started=started)

    try:
        run_loop(main())
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        with contextlib.suppress(OSError):
            ready.send({"error": f"{type(exc).__name__}: {exc}"})
        raise SystemExit(1) from None  # the parent says it, once; no traceback per worker


def _prepare_outputs(config: ServeConfig) -> ServeConfig:
    """What every worker would otherwise find out, or say, for itself, done once here
    before any starts: the receipts file and the store opened for writing (a path that
    cannot be written fails here, in one line), the open-files limit raised and said,
    and, without --secret, one key for every worker's call ids, made and warned of."""
    from voxproxy.fdwatch import raise_fd_limit
    from voxproxy.ids import new_secret
    from voxproxy.proxy.websocket import NO_SECRET

    if config.receipts is not None:
        Path(config.receipts).parent.mkdir(parents=True, exist_ok=True)
        with open(config.receipts, "a", encoding="utf-8"):
            pass
    if config.store is not None:
        from voxproxy.receipts.store import connect

        connect(config.store).close()
    limit = raise_fd_limit()
    if limit is not None:
        log.info("open files: up to %d a worker", limit)
    proxy = config.proxy
    if getattr(proxy, "secret", b"") is None:
        log.warning("%s", NO_SECRET)
        config = replace(config, proxy=replace(proxy, secret=new_secret()))
    return config


def run_workers(config: ServeConfig) -> None:
    """Run ``config.workers`` worker processes on one port until SIGINT or SIGTERM."""
    if config.transport != "websocket":
        raise ConfigError("--workers > 1 needs --transport websocket")
    policy = config.policy if isinstance(config.policy, Policy) else load_policy(config.policy)
    config = _prepare_outputs(config)
    host = config.listen[0]
    claim, reserved = _take_address(host, config.listen[1])
    port = int(reserved.getsockname()[1])
    if config.receipts is not None:
        from voxproxy.receipts.writer import cut_torn_tail

        Path(config.receipts).parent.mkdir(parents=True, exist_ok=True)
        cut_torn_tail(Path(config.receipts))
        fold_journals(config.receipts, config.workers)
    ctx = multiprocessing.get_context("fork")  # before any loop or thread: nothing to lose
    alive = os.pipe()
    workers: list[Worker] = []
    try:
        for index in range(config.workers):
            receive, send = ctx.Pipe(duplex=False)
            process = ctx.Process(
                target=_worker_main,
                args=(_worker_config(config, policy, index, port), index, send, alive, claim),
                name=f"voxproxy-worker-{index}",
            )
            process.start()
            send.close()
            workers.append(Worker(index, process, receive))
        os.close(alive[0])
        for w in workers:
            _await_ready(w)
    except BaseException:
        _terminate(workers)
        reserved.close()
        claim.close()
        raise
    try:
        run_loop(_supervise(config, policy, port, workers, claim))
    finally:
        _terminate(workers)
        os.close(alive[1])
        reserved.close()
        claim.close()


def _take_address(host: str, port: int) -> tuple[AddressClaim, socket.socket]:
    """Claim ``host:port`` for this proxy, reserve it, and check that nothing else listens
    there (:mod:`voxproxy.proxy.listenclaim`); for port 0, the port picked is claimed."""
    claim = AddressClaim(host, port) if port != 0 else None
    try:
        reserved = reserve_port(host, port)
    except BaseException:
        if claim is not None:
            claim.close()
        raise
    try:
        if claim is None:
            claim = AddressClaim(host, int(reserved.getsockname()[1]))
        check_unserved(host, int(reserved.getsockname()[1]))
    except BaseException:
        reserved.close()
        if claim is not None:
            claim.close()
        raise
    return claim, reserved


def _await_ready(w: Worker) -> None:
    if not w.ready.poll(READY_TIMEOUT_S):
        raise VoxproxyError(f"worker {w.index} did not start within {READY_TIMEOUT_S:.0f} s")
    try:
        msg: dict[str, Any] = w.ready.recv()
    except EOFError:
        raise VoxproxyError(f"worker {w.index} exited while starting") from None
    if "error" in msg:
        raise ConfigError(f"worker {w.index} could not start: {msg['error']}")
    w.pid, w.metrics_port, w.events_port = msg["pid"], msg["metrics"], msg["events"]


def _terminate(workers: list[Worker], grace_s: float = 5.0) -> None:
    """Stop whatever worker is still running (SIGTERM, then SIGKILL after ``grace_s``)."""
    for w in workers:
        if w.process.is_alive() and w.process.pid is not None:
            os.kill(w.process.pid, signal.SIGTERM)
    for w in workers:
        w.process.join(grace_s)
        if w.process.is_alive():
            w.process.kill()
            w.process.join()


async def _supervise(
    config: ServeConfig, policy: Policy, port: int, workers: list[Worker], claim: AddressClaim
) -> None:
    """The parent's loop: the public /metrics and event API, signals, the drain."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    exited: set[int] = set()

    def on_exit(w: Worker) -> None:
        loop.remove_reader(w.process.sentinel)
        exited.add(w.index)
        if not stop.is_set():
            log.error(
                "worker %d (pid %d) exited (code %s) before the proxy was stopped",
                w.index,
                w.pid,
                w.process.exitcode,
            )
            if len(exited) == len(workers):
                stop.set()

    for w in workers:
        loop.add_reader(w.process.sentinel, on_exit, w)
    front = Front(workers, config)
    await front.start()
    pids = ", ".join(str(w.pid) for w in workers)
    log_started(config, policy, port, f" ({len(workers)} workers, pids {pids})")
    try:
        await stop.wait()
        claim.close()  # draining: a successor may take the address (our listeners close)
        log.info(
            "shutting down: %d worker(s) drain their calls for up to %.0f s",
            len(workers) - len(exited),
            config.drain_timeout_s,
        )
        for w in workers:
            if w.index not in exited and w.process.is_alive():
                os.kill(w.pid, signal.SIGTERM)
        deadline = loop.time() + config.drain_timeout_s + 15.0
        while len(exited) < len(workers) and loop.time() < deadline:
            await asyncio.sleep(0.05)
    finally:
        await front.stop()
    if len(exited) == len(workers) and not all(w.process.exitcode == 0 for w in workers):
        codes = ", ".join(f"{w.index}: {w.process.exitcode}" for w in workers)
        log.warning("worker exit codes: %s", codes)


class Front:
    """The parent's HTTP listeners: ``/metrics`` merged over the workers', and the event
    API forwarded to the worker that holds the call."""

    def __init__(self, workers: list[Worker], config: ServeConfig) -> None:
        self.workers = workers
        self.config = config
        self.metrics_port: int | None = None
        self.events_port: int | None = None
        self._runners: list[Any] = []
        self._http: Any = None

    async def start(self) -> None:
        import aiohttp
        from aiohttp import web

        from voxproxy.httpserve import app_runner
        from voxproxy.proxy.eventapi import MAX_BODY_BYTES

        cfg = self.config
        if cfg.telemetry.metrics_listen is None and cfg.events is None:
            return
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S))
        if cfg.telemetry.metrics_listen is not None:
            app = web.Application()
            app.router.add_get("/metrics", self._metrics)
            self._add_health(app)
            self.metrics_port = await self._serve(app_runner(app), cfg.telemetry.metrics_listen)
            log.info(
                "metrics on http://%s:%d/metrics (merged over the workers)",
                cfg.telemetry.metrics_listen[0],
                self.metrics_port,
            )
        if cfg.events is not None:
            app = web.Application(client_max_size=MAX_BODY_BYTES)
            app.router.add_post("/v1/calls/{call}/events", self._event)
            self._add_health(app)
            runner = app_runner(app, header_timeout_s=cfg.events.header_timeout_s)
            self.events_port = await self._serve(runner, cfg.events.listen)
            log.info(
                "event API on http://%s:%d/v1/calls/{call}/events (forwarded to the workers)",
                cfg.events.listen[0],
                self.events_port,
            )

    async def _serve(self, runner: Any, listen: tuple[str, int]) -> int:
        from aiohttp import web

        await runner.setup()
        await web.TCPSite(runner, listen[0], listen[1]).start()
        self._runners.append(runner)
        return int(runner.addresses[0][1])

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
        if self._http is not None:
            await self._http.close()
            self._http = None

    def _add_health(self, app: Any) -> None:
        for path in (HEALTH_PATH, READY_PATH):
            app.router.add_get(path, self._ready)
        app.router.add_get(LIVE_PATH, self._live)

    async def _ready(self, request: Any) -> Any:
        """Readiness over the workers: ready while one of them would admit a caller (the
        kernel gives a new connection only to a worker that listens); each that would
        not is named, with why."""
        from voxproxy.httpserve import health_web_response

        del request
        workers = list(self.workers)
        answers = await asyncio.gather(*(self._worker_refusal(w) for w in workers))
        refusing = [
            f"worker {w.index}: {why}" for w, why in zip(workers, answers, strict=True) if why
        ]
        if len(refusing) == len(workers):
            return health_web_response("; ".join(refusing))
        return health_web_response(None, "; ".join(refusing) or None)

    async def _live(self, request: Any) -> Any:
        from voxproxy.httpserve import health_web_response

        del request
        if any(w.process.is_alive() for w in self.workers):
            return health_web_response(None)
        return health_web_response("no worker is running")

    async def _worker_refusal(self, w: Worker) -> str | None:
        """Why worker ``w`` would refuse a caller now (its own readiness), or None."""
        if not w.process.is_alive():
            return "down"
        port = w.metrics_port if w.metrics_port is not None else w.events_port
        if port is None:
            return None  # no listener to ask: it runs
        import aiohttp

        try:
            url = f"http://{LOOPBACK}:{port}{READY_PATH}"
            timeout = aiohttp.ClientTimeout(total=HEALTH_TIMEOUT_S)
            async with self._http.get(url, timeout=timeout) as answer:
                text: str = (await answer.text()).strip()
        except Exception:  # a worker gone or stuck
            return "not answering"
        if answer.status == 200:
            return None
        return text.removeprefix(REFUSING) or f"status {answer.status}"

    async def _metrics(self, request: Any) -> Any:
        from aiohttp import web
        from prometheus_client.exposition import choose_encoder

        from voxproxy.telemetry.prometheus import merge_expositions

        texts = await asyncio.gather(
            *(self._scrape(w.metrics_port) for w in self.workers if w.metrics_port is not None)
        )
        registry = merge_expositions([t for t in texts if t is not None])
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encoder(registry), headers={"Content-Type": content_type})

    async def _scrape(self, port: int) -> str | None:
        try:
            async with self._http.get(f"http://{LOOPBACK}:{port}/metrics") as answer:
                text: str = await answer.text()
                return text if answer.status == 200 else None
        except Exception:  # a worker gone or stuck
            return None

    async def _event(self, request: Any) -> Any:
        from aiohttp import web

        from voxproxy.httpserve import BodyTimeout, body_timeout_response, read_body

        try:
            body = await read_body(request)
        except BodyTimeout:
            return body_timeout_response()
        call = quote(request.match_info["call"], safe="")
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() in ("authorization", "content-type")
        }
        answers = await asyncio.gather(
            *(
                self._forward(w.events_port, call, body, headers)
                for w in self.workers
                if w.events_port is not None
            )
        )
        found = [a for a in answers if a is not None and a[0] != 404]
        chosen = found[0] if found else next((a for a in answers if a is not None), None)
        if chosen is None:
            return web.json_response(
                {"error": "unavailable", "reason": "no worker answered"}, status=503
            )
        status, content_type, data, extra = chosen
        return web.Response(status=status, body=data, content_type=content_type, headers=extra)

    async def _forward(
        self, port: int, call: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, str, bytes, dict[str, str]] | None:
        url = f"http://{LOOPBACK}:{port}/v1/calls/{call}/events"
        try:
            async with self._http.post(url, data=body, headers=headers) as answer:
                data: bytes = await answer.read()
                extra = {k: v for k, v in answer.headers.items() if k.lower() == "www-authenticate"}
                return answer.status, answer.content_type, data, extra
        except Exception:  # a worker gone or stuck: the others may hold the call
            return None
