"""voxproxy.proxy.front: the parent's HTTP front of ``voxproxy proxy --workers N``.

The front is run in this process on 127.0.0.1 (``Front.start``), in front of fake workers:
small aiohttp servers on loopback that answer ``/metrics``, ``/readyz`` and the event API
as a worker would. What is tested is the front's own part: the readiness over the
workers (one admitting is enough; each that would not is named), liveness, the merged
``/metrics``, an event forwarded to every worker and answered by the one that holds the
call, and what a child that could not start tells the parent. The real processes:
tests/proxy/test_workers.py.
"""

from __future__ import annotations

import errno
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from voxproxy.health import READY_PATH, REFUSING
from voxproxy.proxy.front import (
    DOWN,
    STARTING,
    UP,
    Front,
    WorkerView,
    start_failure,
)
from voxproxy.proxy.server import EventsConfig, ServeConfig
from voxproxy.proxy.websocket import ProxyConfig
from voxproxy.telemetry import TelemetryConfig
from voxproxy.transports.websocket import RelayConfig

TOKEN = "front-test-token-0123456789"
LOOPBACK = ("127.0.0.1", 0)


def _config(*, metrics: bool = True, events: bool = True) -> ServeConfig:
    return ServeConfig(
        ProxyConfig(RelayConfig("ws://127.0.0.1:1"), secret=b"s"),
        receipts=None,
        telemetry=TelemetryConfig(metrics_listen=LOOPBACK if metrics else None),
        events=EventsConfig(TOKEN, LOOPBACK) if events else None,
    )


@dataclass
class FakeWorker:
    """A worker's loopback listener: its metrics text, its readiness, the calls it holds."""

    calls: tuple[str, ...] = ()
    calls_total: float = 1.0
    ready: tuple[int, str] = (200, "ok\n")
    events: list[tuple[str, bytes, str | None]] = field(default_factory=list)
    port: int = 0

    async def _metrics(self, request: web.Request) -> web.Response:
        del request
        text = (
            "# HELP voxproxy_calls_total Calls ended.\n# TYPE voxproxy_calls_total counter\n"
            f'voxproxy_calls_total{{verdict="pass"}} {self.calls_total}\n'
        )
        return web.Response(text=text)

    async def _ready(self, request: web.Request) -> web.Response:
        del request
        return web.Response(status=self.ready[0], text=self.ready[1])

    async def _event(self, request: web.Request) -> web.Response:
        call = request.match_info["call"]
        self.events.append((call, await request.read(), request.headers.get("Authorization")))
        if call not in self.calls:
            return web.json_response({"error": "no such call"}, status=404)
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            headers = {"WWW-Authenticate": "Bearer", "X-Other": "dropped"}
            return web.json_response({"error": "token"}, status=401, headers=headers)
        return web.json_response({"accepted": call}, status=202)


@asynccontextmanager
async def fake_workers(*workers: FakeWorker) -> AsyncIterator[dict[int, WorkerView]]:
    runners = []
    views: dict[int, WorkerView] = {}
    try:
        for i, w in enumerate(workers):
            app = web.Application()
            app.router.add_get("/metrics", w._metrics)
            app.router.add_get(READY_PATH, w._ready)
            app.router.add_post("/v1/calls/{call}/events", w._event)
            runner = web.AppRunner(app)
            await runner.setup()
            await web.TCPSite(runner, *LOOPBACK).start()
            runners.append(runner)
            w.port = int(runner.addresses[0][1])
            views[i] = WorkerView(
                i, pid=1000 + i, metrics_port=w.port, events_port=w.port, state=UP
            )
        yield views
    finally:
        for runner in runners:
            await runner.cleanup()


@asynccontextmanager
async def front(
    views: dict[int, WorkerView], config: ServeConfig | None = None
) -> AsyncIterator[tuple[Front, aiohttp.ClientSession]]:
    f = Front(views, config or _config())
    await f.start()
    try:
        async with aiohttp.ClientSession() as http:
            yield f, http
    finally:
        await f.stop()


def _url(port: int | None, path: str) -> str:
    assert port is not None
    return f"http://127.0.0.1:{port}{path}"


# -- a worker's state ---------------------------------------------------------------------


def test_a_worker_down_says_when_it_starts_again() -> None:
    assert WorkerView(0, state=STARTING).down_reason(100.0) == "starting"
    assert WorkerView(0, state=DOWN).down_reason(100.0) == "down"
    assert WorkerView(0, state=DOWN, restart_at=104.2).down_reason(100.0) == (
        "down, restarting in 4 s"
    )
    assert WorkerView(0, state=DOWN, restart_at=100.2).down_reason(100.0) == "down, restarting"


def test_a_child_that_could_not_start_keeps_the_operating_systems_errno() -> None:
    failure = start_failure(OSError(errno.EADDRINUSE, "Address already in use"))
    assert failure["errno"] == errno.EADDRINUSE
    assert failure["strerror"] == "Address already in use"
    assert failure["error"].startswith("OSError: ")
    assert start_failure(ValueError("bad policy")) == {"error": "ValueError: bad policy"}
    assert "errno" not in start_failure(OSError("no errno"))


# -- readiness and liveness -----------------------------------------------------------------


async def test_the_front_s_readiness_is_ready_while_one_worker_admits() -> None:
    """The front's /readyz over the workers: the kernel gives a new caller only to a
    worker that listens, so the proxy admits while one worker would; each that would not
    is named, with why (a worker down says when it starts again)."""
    answers: dict[int, str | None] = {}

    async def refusal(w: WorkerView) -> str | None:
        return answers[w.index]

    views = {i: WorkerView(i, state=UP) for i in range(2)}
    front = Front(views, None)  # type: ignore[arg-type]
    front._worker_refusal = refusal  # type: ignore[method-assign]

    async def ready() -> tuple[int, str]:
        answer = await front._ready(None)
        return answer.status, answer.text

    answers.update({0: None, 1: None})
    assert await ready() == (200, "ok\n")
    answers[1] = "down, restarting in 4 s"
    assert await ready() == (200, "ok: worker 1: down, restarting in 4 s\n")
    answers[0] = "at capacity (2 calls in progress)"
    assert await ready() == (
        503,
        "refusing callers: worker 0: at capacity (2 calls in progress); "
        "worker 1: down, restarting in 4 s\n",
    )
    live = await front._live(None)
    assert (live.status, live.text) == (200, "ok\n")
    views[0] = WorkerView(0, state=DOWN)
    views[1] = WorkerView(1, state=DOWN)
    live = await front._live(None)
    assert (live.status, live.text) == (503, "refusing callers: no worker is running\n")


async def test_readiness_asks_each_worker_and_names_why_it_would_refuse() -> None:
    full = FakeWorker(ready=(503, f"{REFUSING}at capacity (2 calls in progress)\n"))
    odd = FakeWorker(ready=(500, "\n"))
    async with fake_workers(FakeWorker(), full, odd) as views:
        views[3] = WorkerView(3, state=STARTING)
        async with front(views) as (f, http):
            async with http.get(_url(f.metrics_port, READY_PATH)) as r:
                assert r.status == 200
                assert r.headers["Cache-Control"] == "no-store"
                assert await r.text() == (
                    "ok: worker 1: at capacity (2 calls in progress); "
                    "worker 2: status 500; worker 3: starting\n"
                )
            views[0].state = DOWN
            async with http.get(_url(f.events_port, "/healthz")) as r:
                assert r.status == 503
                assert (await r.text()).startswith(f"{REFUSING}worker 0: down; worker 1: ")


async def test_a_worker_that_does_not_answer_is_named_and_a_portless_one_runs() -> None:
    async with fake_workers() as views:
        async with front(views) as (f, _):
            gone = WorkerView(0, metrics_port=f.metrics_port, state=UP)
            await f.stop()  # nothing listens on that port any more
            f._http = aiohttp.ClientSession()
            try:
                assert await f._worker_refusal(gone) == "not answering"
                assert await f._worker_refusal(WorkerView(1, state=UP)) is None
            finally:
                await f._http.close()
                f._http = None


# -- /metrics and the event API ------------------------------------------------------------


async def test_metrics_are_merged_over_the_workers_that_are_up() -> None:
    workers = FakeWorker(calls_total=3.0), FakeWorker(calls_total=4.0), FakeWorker(calls_total=50)
    async with fake_workers(*workers) as views:
        views[2].state = DOWN  # a worker down is not scraped
        async with front(views) as (f, http):
            async with http.get(_url(f.metrics_port, "/metrics")) as r:
                assert r.status == 200
                text = await r.text()
    samples = {s.name: s.value for fam in text_string_to_metric_families(text) for s in fam.samples}
    assert samples["voxproxy_calls_total"] == 7.0


async def test_an_event_goes_to_every_worker_and_the_one_holding_the_call_answers() -> None:
    a, b = FakeWorker(calls=("c1",)), FakeWorker(calls=("c2",))
    async with fake_workers(a, b) as views:
        async with front(views) as (f, http):
            headers = {"Authorization": f"Bearer {TOKEN}", "X-Secret-Header": "not forwarded"}
            url = _url(f.events_port, "/v1/calls/c2/events")
            async with http.post(url, json={"kind": "state"}, headers=headers) as r:
                assert (r.status, await r.json()) == (202, {"accepted": "c2"})
            async with http.post(_url(f.events_port, "/v1/calls/none/events"), data=b"{}") as r:
                assert r.status == 404  # no worker holds it: a worker's 404 is the answer
    assert [e[0] for e in a.events] == ["c2", "none"] and [e[0] for e in b.events] == ["c2", "none"]
    assert b.events[0][1] == b'{"kind": "state"}'
    assert b.events[0][2] == f"Bearer {TOKEN}"


async def test_the_holding_workers_refusal_keeps_www_authenticate_only() -> None:
    async with fake_workers(FakeWorker(calls=("c1",))) as views:
        async with front(views) as (f, http):
            async with http.post(_url(f.events_port, "/v1/calls/c1/events"), data=b"{}") as r:
                assert r.status == 401
                assert r.headers["WWW-Authenticate"] == "Bearer"
                assert "X-Other" not in r.headers


async def test_an_event_with_no_worker_up_is_answered_503() -> None:
    async with fake_workers(FakeWorker(calls=("c1",))) as views:
        views[0].state = STARTING
        async with front(views) as (f, http):
            async with http.post(_url(f.events_port, "/v1/calls/c1/events"), data=b"{}") as r:
                assert r.status == 503
                assert (await r.json())["reason"] == "no worker answered"


async def test_a_call_id_is_quoted_into_the_workers_path() -> None:
    worker = FakeWorker(calls=("a/b",))
    async with fake_workers(worker) as views:
        async with front(views) as (f, http):
            url = _url(f.events_port, "/v1/calls/a%2Fb/events")
            async with http.post(
                url, data=b"{}", headers={"Authorization": f"Bearer {TOKEN}"}
            ) as r:
                assert r.status == 202
    assert worker.events[0][0] == "a/b"


@pytest.mark.parametrize(("metrics", "events"), [(True, False), (False, True), (False, False)])
async def test_the_front_listens_only_where_it_is_asked_to(metrics: bool, events: bool) -> None:
    async with front({}, _config(metrics=metrics, events=events)) as (f, _):
        assert (f.metrics_port is not None) == metrics
        assert (f.events_port is not None) == events
        assert (f._http is not None) == (metrics or events)
