"""The parent's HTTP front of ``voxproxy proxy --workers N``: one ``/metrics``, one event
API and the health paths, for all the workers (see :mod:`voxproxy.proxy.workers`).

It runs in a process of its own (:func:`front_main`), forked by the parent, so that
the parent itself never runs an event loop or a thread and can fork a replacement
worker at any time. The parent tells it each worker's state as it changes
(:class:`WorkerView`: up with its loopback ports, starting, or down until a restart).

- ``/metrics`` merges the workers' (:func:`voxproxy.telemetry.prometheus.merge_expositions`);
- ``POST /v1/calls/{call}/events`` goes to every worker; the one that holds the call
  answers (202, or 4xx for a bad event), the others 404;
- readiness (``/healthz``, ``/readyz``): ready while one worker would admit a caller
  (the kernel hands a new connection only to a worker that listens), ``ok: ...``
  naming each that would not and why (``worker 1: down, restarting in 4 s``); ``503``
  when none would. Liveness (``/livez``): while one worker is up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any
from urllib.parse import quote

from voxproxy.health import HEALTH_PATH, LIVE_PATH, READY_PATH, REFUSING
from voxproxy.proxy.server import ServeConfig, run_loop

log = logging.getLogger("voxproxy")

FORWARD_TIMEOUT_S = 10.0  # the front's requests to a worker's /metrics or event API
HEALTH_TIMEOUT_S = 2.0  # the front's question to a worker: would you admit a caller?
LOOPBACK = "127.0.0.1"

UP, STARTING, DOWN = "up", "starting", "down"


@dataclass
class WorkerView:
    """A worker as the front knows it: where it listens on loopback, and its state
    (``up``; ``starting``; ``down``, to be started again at ``restart_at``, monotonic)."""

    index: int
    pid: int = 0
    metrics_port: int | None = None
    events_port: int | None = None
    state: str = STARTING
    restart_at: float | None = None

    def down_reason(self, now: float) -> str:
        """Why a worker that is not up admits no caller, on one line."""
        if self.state == STARTING:
            return "starting"
        if self.restart_at is None:
            return "down"
        wait = self.restart_at - now
        return f"down, restarting in {wait:.0f} s" if wait >= 0.5 else "down, restarting"


def start_failure(exc: BaseException) -> dict[str, Any]:
    """What a child (the front or a worker) that could not start tells the parent: an
    operating system error keeps its errno and text (the parent raises it again, so the
    command says it in the one line it has for that error: a port in use, a path that
    cannot be written), anything else its type and message."""
    if isinstance(exc, OSError) and exc.errno is not None:
        text = exc.strerror or str(exc)
        return {"error": f"{type(exc).__name__}: {exc}", "errno": exc.errno, "strerror": text}
    return {"error": f"{type(exc).__name__}: {exc}"}


def front_main(
    config: ServeConfig,
    workers: dict[int, WorkerView],
    updates: Connection,
    ready: Connection,
    alive_r: int,
) -> None:
    """The front's process: serve until the parent says stop (SIGTERM) or is gone.
    ``updates`` brings :class:`WorkerView` changes; ``ready`` takes the ports bound."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C: the parent decides

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_reader(alive_r, stop.set)  # EOF: the parent is gone

        def update() -> None:
            try:
                while updates.poll():
                    view: WorkerView = updates.recv()
                    workers[view.index] = view
            except (EOFError, OSError):
                loop.remove_reader(updates.fileno())
                stop.set()

        loop.add_reader(updates.fileno(), update)
        front = Front(workers, config)
        try:
            await front.start()
            ready.send({"metrics": front.metrics_port, "events": front.events_port})
            await stop.wait()
        finally:
            await front.stop()

    try:
        run_loop(main())
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        with contextlib.suppress(OSError):  # read only while starting
            ready.send(start_failure(exc))
        raise SystemExit(1) from None  # the parent says it, once, without a traceback
    finally:
        os.close(alive_r)


class Front:
    """The parent's HTTP listeners: ``/metrics`` merged over the workers', and the event
    API forwarded to the worker that holds the call."""

    def __init__(self, workers: dict[int, WorkerView], config: ServeConfig) -> None:
        self.workers = workers  # by index, kept up to date by the parent (see front_main)
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
        workers = [self.workers[i] for i in sorted(self.workers)]
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
        if any(w.state == UP for w in self.workers.values()):
            return health_web_response(None)
        return health_web_response("no worker is running")

    async def _worker_refusal(self, w: WorkerView) -> str | None:
        """Why worker ``w`` would refuse a caller now (its own readiness), or None."""
        if w.state != UP:
            return w.down_reason(time.monotonic())
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
            *(self._scrape(w.metrics_port) for w in self._up() if w.metrics_port is not None)
        )
        registry = merge_expositions([t for t in texts if t is not None])
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encoder(registry), headers={"Content-Type": content_type})

    def _up(self) -> list[WorkerView]:
        return [w for w in self.workers.values() if w.state == UP]

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
                for w in self._up()
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
