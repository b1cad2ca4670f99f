"""Run the proxy from Python: one :class:`ServeConfig`, one :class:`ProxyServer`.

::

    from voxproxy.proxy.websocket import ProxyConfig
    from voxproxy.proxy.workers import serve
    from voxproxy.proxy.server import ServeConfig
    from voxproxy.transports.websocket import RelayConfig

    serve(ServeConfig(ProxyConfig(RelayConfig("ws://agent:8766")), listen=("0.0.0.0", 8765)))

:class:`ProxyServer` owns what surrounds the relay, for either transport (a
:class:`~voxproxy.proxy.ProxyConfig` runs the websocket proxy, a
:class:`~voxproxy.proxy.webrtc.WebRtcProxyConfig` the WebRTC one): the receipts
file and its crash journal (the receipts a killed proxy left owed are written at
start), the SQLite store, the verdict under the policy, telemetry (and
``/metrics``), the event API, the open-files watch, and on stop the drain and the
closing of every sink in order. :func:`voxproxy.proxy.workers.serve` runs one until
SIGINT or SIGTERM (or ``workers`` of them on one port).
``voxproxy proxy``, the demo and the benchmarks' harness (:mod:`voxproxy.harness.bench`),
``benchmarks/proxyhost.py`` and the tests all start proxies through it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxproxy import __version__, native
from voxproxy.core.errors import ConfigError
from voxproxy.core.receipt import Receipt
from voxproxy.httpserve import HEADER_TIMEOUT_S
from voxproxy.proxy.lifecycle import ReceiptSink, recover_crashed
from voxproxy.proxy.websocket import ProxyConfig
from voxproxy.receipts.policy import Policy, load_policy
from voxproxy.receipts.verdict import judged
from voxproxy.telemetry import NULL_TELEMETRY, Telemetry, TelemetryConfig, make_telemetry

if TYPE_CHECKING:
    from voxproxy.captures.writer import CaptureSettings, CaptureWriter
    from voxproxy.proxy.eventapi import EventApi
    from voxproxy.proxy.webrtc import WebRtcProxy, WebRtcProxyConfig
    from voxproxy.proxy.websocket import Proxy
    from voxproxy.receipts.journal import CallJournal
    from voxproxy.receipts.store import ReceiptStore
    from voxproxy.receipts.writer import ReceiptWriter

log = logging.getLogger("voxproxy")


@dataclass(frozen=True, slots=True)
class EventsConfig:
    """The event API (:mod:`voxproxy.proxy.eventapi`): where it listens, the token it needs."""

    token: str
    listen: tuple[str, int]
    names: frozenset[str] | None = None  # tool and field names kept verbatim (None: by shape)
    header_timeout_s: float = HEADER_TIMEOUT_S

    def __post_init__(self) -> None:
        from voxproxy.proxy.eventapi import MIN_TOKEN_CHARS

        if len(self.token) < MIN_TOKEN_CHARS:
            raise ConfigError(f"--events-token must be at least {MIN_TOKEN_CHARS} characters")


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """Everything a running proxy needs. ``receipts=None`` writes no file (and keeps no
    journal): the receipts go only to ``sinks`` (and ``store``)."""

    proxy: ProxyConfig | WebRtcProxyConfig
    listen: tuple[str, int] = ("127.0.0.1", 8765)
    receipts: str | Path | None = "receipts.jsonl"
    store: str | Path | None = None
    policy: Policy | str | Path | None = None  # a Policy, a YAML file or a profile name
    tls: ssl.SSLContext | None = None  # serve wss:// (websocket transport)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    events: EventsConfig | None = None
    sinks: tuple[ReceiptSink, ...] = ()  # more sinks, after the file and the store
    drain_timeout_s: float = 10.0
    watch_fds: bool = False  # raise the open-files limit and log when it runs low
    ice_hosts: tuple[str, ...] = ()  # webrtc: addresses to gather ICE host candidates on
    # Processes serving the listener (websocket): 1 serves in this process; N > 1 starts
    # N workers sharing the port (SO_REUSEPORT), the receipts file, one /metrics and one
    # event API (see voxproxy.proxy.workers).
    workers: int = 1
    reuse_port: bool = False  # share the listening port with other processes
    journal: str | Path | None = None  # the crash journal (default: beside the receipts)
    # Each call's session inputs on disk (proxy --capture: docs/captures.md); None: none.
    capture: CaptureSettings | None = None

    @property
    def transport(self) -> str:
        return "websocket" if isinstance(self.proxy, ProxyConfig) else "webrtc"

    def __post_init__(self) -> None:
        if self.transport == "webrtc" and self.tls is not None:
            raise ConfigError("--tls-cert is not supported with --transport webrtc yet")
        if self.workers < 1:
            raise ConfigError(f"--workers must be at least 1, got {self.workers}")
        if self.workers > 1 and self.transport == "webrtc":
            raise ConfigError(
                "--transport webrtc runs in one process (--workers 1): a WHIP session's "
                "later requests must reach the process that answered its offer"
            )


class ProxyServer:
    """One running proxy and everything around it. ``await start()``, ``await stop()``
    (or ``async with``); :meth:`run` serves until SIGINT or SIGTERM."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.policy = (
            config.policy if isinstance(config.policy, Policy) else load_policy(config.policy)
        )
        self.proxy: Proxy | WebRtcProxy | None = None
        self.writer: ReceiptWriter | None = None
        self.store: ReceiptStore | None = None
        self.journal: CallJournal | None = None
        self.captures: CaptureWriter | None = None
        self.telemetry: Telemetry = NULL_TELEMETRY
        self.events_api: EventApi | None = None
        self.port: int | None = None
        self.stopping = False
        self._tasks: list[asyncio.Task[None]] = []

    # -- what it serves -------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Where callers dial (websocket) or offer (webrtc: the WHIP endpoint)."""
        host = self.config.listen[0] or "127.0.0.1"
        if self.config.transport == "webrtc":
            return f"http://{host}:{self.port}/whip"
        return f"{'wss' if self.config.tls else 'ws'}://{host}:{self.port}"

    @property
    def active(self) -> int:
        return self.proxy.active if self.proxy is not None else 0

    def refusal(self) -> str | None:
        """Why a caller arriving now would be refused (one line), or None: the readiness
        answer of every listener's health paths (:mod:`voxproxy.health`)."""
        if self.stopping:
            return "shutting down"
        if self.proxy is None or self.port is None:
            return "starting"
        return self.proxy.server.admission.refusal()

    # -- start and stop -------------------------------------------------------------------

    async def start(self) -> int:
        """Open the sinks (writing what a killed proxy left owed), start telemetry, the
        event API and the listener; returns the port bound."""
        from voxproxy.receipts.journal import CallJournal
        from voxproxy.receipts.store import ReceiptStore
        from voxproxy.receipts.writer import ReceiptWriter

        cfg = self.config
        if not cfg.reuse_port and cfg.listen[1] != 0:
            from voxproxy.proxy.listenclaim import check_unserved

            # Before the receipts file and its journal are touched: a proxy that cannot
            # listen would write proxy_crashed receipts for the running one's calls.
            check_unserved(*cfg.listen)
        sinks: list[Callable[[Receipt], None]] = []
        left: list[dict[str, Any]] = []
        if cfg.receipts is not None:
            self.journal = (
                CallJournal(cfg.journal)
                if cfg.journal is not None
                else CallJournal.beside(cfg.receipts)
            )
            left = self.journal.open(cfg.receipts)  # calls a killed proxy left open
            self.writer = ReceiptWriter(cfg.receipts, on_written=self.journal.written)
            sinks.append(self.writer.write)
        if cfg.store is not None:
            self.store = ReceiptStore(cfg.store)
            sinks.append(self.store.write)
        sinks.extend(cfg.sinks)
        self.telemetry = make_telemetry(cfg.telemetry)
        if self.telemetry is not NULL_TELEMETRY:  # shared: it serves no /metrics anyway
            self.telemetry.ready = self.refusal
        policy = self.policy
        proxy = self._make_proxy(sinks, lambda r: judged(r, policy))
        self.proxy = proxy
        if cfg.capture is not None:
            from voxproxy.captures.writer import CaptureWriter

            self.captures = proxy.captures = CaptureWriter(cfg.capture)
        await self.telemetry.start()
        self._log_metrics_listener()
        proxy.journal = self.journal
        if left:
            recover_crashed(proxy, left, cfg.proxy.session)
        if cfg.events is not None:
            await self._start_events(cfg.events)
        host, port = cfg.listen
        if cfg.transport == "webrtc":
            from voxproxy.proxy.webrtc import WebRtcProxy

            assert isinstance(proxy, WebRtcProxy)
            self.port = await proxy.start(host, port)
        else:
            from voxproxy.proxy.websocket import Proxy

            assert isinstance(proxy, Proxy)
            self.port = await proxy.start(host, port, cfg.tls, reuse_port=cfg.reuse_port)
        if cfg.watch_fds:
            self._tasks.append(_watch_fds(say=not cfg.reuse_port))  # a worker: said once
        if self.journal is not None:
            self._tasks.append(asyncio.get_running_loop().create_task(_keep_alive(self.journal)))
        return self.port

    def _make_proxy(
        self, sinks: list[ReceiptSink], judge: Callable[[Receipt], Receipt]
    ) -> Proxy | WebRtcProxy:
        cfg = self.config
        if isinstance(cfg.proxy, ProxyConfig):
            from voxproxy.proxy.websocket import Proxy

            # One verdict per receipt, given before the sinks and telemetry see it.
            return Proxy(cfg.proxy, sinks=sinks, telemetry=self.telemetry, judge=judge)
        from voxproxy.proxy.webrtc import WebRtcProxy
        from voxproxy.transports.webrtc import use_host_addresses

        if cfg.ice_hosts:
            use_host_addresses(cfg.ice_hosts)
        return WebRtcProxy(cfg.proxy, sinks=sinks, telemetry=self.telemetry, judge=judge)

    async def _start_events(self, events: EventsConfig) -> None:
        from voxproxy.proxy.eventapi import EventApi

        assert self.proxy is not None
        self.events_api = EventApi(
            self.proxy.live,
            self.proxy.secret,
            events.token,
            header_timeout_s=events.header_timeout_s,
            names=events.names,
        )
        self.events_api.ready = self.refusal
        await self.events_api.start(*events.listen)

    def _log_metrics_listener(self) -> None:
        """Say where /metrics is served (the port actually bound, also when asked for 0)."""
        listen = self.config.telemetry.metrics_listen
        port = getattr(self.telemetry, "metrics_port", None)
        if listen is not None and port is not None:
            log.info("metrics on http://%s:%d/metrics", listen[0], port)

    async def stop(self, drain_s: float | None = None) -> None:
        """Stop taking calls, let those in progress finish for ``drain_s`` (default: the
        config's), close the rest; then close telemetry and every sink, in that order."""
        self.stopping = True
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        drain = self.config.drain_timeout_s if drain_s is None else drain_s
        try:
            if self.events_api is not None:
                await self.events_api.stop()
            if self.proxy is not None:
                await self.proxy.stop(drain)
            await self.telemetry.aclose()
        finally:
            # Whatever failed above, the receipts already handed to the writers reach the
            # disk, and the captures of the calls that ended.
            if self.captures is not None:
                self.captures.close()
            if self.writer is not None:
                self.writer.close()
            if self.journal is not None:
                self.journal.close()
            if self.store is not None:
                self.store.close()

    async def __aenter__(self) -> ProxyServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- serving until told to stop -------------------------------------------------------

    async def run(
        self,
        stop: asyncio.Event | None = None,
        on_started: Callable[[ProxyServer], None] | None = None,
    ) -> None:
        """Serve until SIGINT or SIGTERM (or ``stop`` is set), then drain and stop.
        ``on_started`` is called once listening (a worker tells its parent; see
        :mod:`voxproxy.proxy.workers`); without it the start is logged."""
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await self.start()
        # Everything built at startup lives as long as the process: keep it out of the
        # cyclic garbage collector's full passes (they would rescan it under load).
        if self.config.transport == "websocket":
            gc.freeze()
        if on_started is not None:
            on_started(self)
        else:
            self._log_started()
        await stop.wait()
        log.info(
            "shutting down: draining %d call(s) for up to %.0f s",
            self.active,
            self.config.drain_timeout_s,
        )
        try:
            await self.stop()
        finally:
            self._log_stopped()

    def _log_started(self) -> None:
        assert self.port is not None
        log_started(self.config, self.policy, self.port)

    def _log_stopped(self) -> None:
        cfg = self.config
        if self.writer is not None:
            log.info("%d receipt(s) written to %s", self.writer.written, cfg.receipts)
        if self.store is not None:
            log.info("%d receipt(s) stored in %s", self.store.written, cfg.store)
        if self.captures is not None and cfg.capture is not None:
            c = self.captures
            log.log(
                logging.WARNING if c.failed else logging.INFO,
                "%d call(s) captured to %s (%d failed, %d removed to keep the bound)",
                c.written,
                cfg.capture.directory,
                c.failed,
                c.removed,
            )
        refused = self.proxy.server.admission.refused if self.proxy is not None else 0
        if refused:
            what = "offer(s)" if cfg.transport == "webrtc" else "caller(s)"
            log.info("%d %s refused at capacity", refused, what)


def log_started(cfg: ServeConfig, policy: Policy, port: int, workers: str = "") -> None:
    """Say where the proxy listens and where its receipts go (``workers``: a suffix)."""
    host = cfg.listen[0]
    where = cfg.receipts if cfg.receipts is not None else "the sinks given"
    if cfg.transport == "webrtc":
        log.info(
            "voxproxy %s (webrtc) answering offers on http://%s:%d/whip and /api/offer -> "
            "%s (%s), receipts to %s",
            __version__,
            host,
            port,
            redact_url(cfg.proxy.relay.upstream),
            cfg.proxy.relay.signaling,  # type: ignore[union-attr]
            where,
        )
        return
    log.info(
        "voxproxy %s listening on %s://%s:%d -> %s (dialect %s), receipts to %s%s",
        __version__,
        "wss" if cfg.tls else "ws",
        host,
        port,
        redact_url(cfg.proxy.relay.upstream),
        cfg.proxy.dialect,
        where,
        workers,
    )
    log.info("measurement core: %s build (voxproxy/native.py)", native.build())
    warning = native.stale_warning()
    if warning is not None:
        log.warning("%s", warning)
    log.info(
        "verdicts under policy %s%s",
        policy.label,
        f"; receipts also stored in {cfg.store}" if cfg.store is not None else "",
    )
    if cfg.capture is not None:
        log.warning(
            "capturing every call's audio and messages to %s (the newest %d, at most %.1f "
            "MiB; docs/captures.md)",
            cfg.capture.directory,
            cfg.capture.max_calls,
            cfg.capture.max_bytes / (1 << 20),
        )


def run_loop(coro: Any) -> Any:
    """Run ``coro`` to completion on uvloop when it is installed, else on asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


async def _keep_alive(journal: CallJournal) -> None:
    """Tell the call journal the process is alive, so that a crash is placed in time."""
    from voxproxy.receipts.journal import ALIVE_INTERVAL_S

    while True:
        journal.alive(time.time_ns())
        await asyncio.sleep(ALIVE_INTERVAL_S)


def _watch_fds(say: bool = True) -> asyncio.Task[None]:
    """Raise the open-files limit as far as allowed, log it (a worker of ``--workers``
    does not: its parent says it once), and watch it (see fdwatch)."""
    from voxproxy.fdwatch import raise_fd_limit, watch_fds

    limit = raise_fd_limit()
    if limit is not None and say:
        log.info("open files: up to %d", limit)
    return asyncio.get_running_loop().create_task(watch_fds())


def redact_url(url: str) -> str:
    """``url`` fit for a log line: no credentials, no query (either may carry a token)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    auth = "***@" if parts.username is not None or parts.password is not None else ""
    query = "?***" if parts.query else ""
    return f"{parts.scheme}://{auth}{host}{port}{parts.path}{query}"


__all__ = ["EventsConfig", "ProxyServer", "ServeConfig", "redact_url", "run_loop"]
