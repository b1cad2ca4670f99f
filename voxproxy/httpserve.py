"""What the proxy's HTTP listeners share: WHIP/Pipecat signaling, the event API, /metrics.

All three run on aiohttp, whose server has no timeout of its own for a request
that arrives slowly: a client could hold a connection open for minutes by
sending half a request line, or a body byte by byte. Here:

- a connection must deliver each request's headers within ``header_timeout_s``
  of connecting or of its previous response (aiohttp's keep-alive timer, which
  closes a connection that is waiting for a request, is set to that value);
- a handler reads a body with :func:`read_body`, which gives up after
  ``body_timeout_s`` (answered ``408``);
- request lines and header fields are capped at 8 KiB (aiohttp's default, made
  explicit).

aiohttp logs a malformed request (an over-long URL, say) at ERROR with a
traceback whose message quotes the request line: a caller's path, which may
carry ids or tokens, would land in the proxy's log. :class:`BadRequestLogGuard`
turns those records into one INFO line naming only the kind of error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from voxproxy.health import HEALTH_PATH, LIVE_PATH, READY_PATH, health_answer

HEADER_TIMEOUT_S = 10.0  # as the websocket listener's --handshake-timeout default
BODY_TIMEOUT_S = 10.0
MAX_LINE_BYTES = 8190


class BodyTimeout(Exception):
    """The request's body did not arrive within the body timeout."""


class BadRequestLogGuard(logging.Filter):
    """Rewrites aiohttp's record of a malformed request: no request line, no traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.msg = "malformed HTTP request refused (%s, status %s); details withheld"
            record.args = (type(exc).__name__, exc.code)
            record.exc_info = None
            record.exc_text = None
            record.levelno = logging.INFO
            record.levelname = logging.getLevelName(logging.INFO)
        return True


_GUARD = BadRequestLogGuard()


def guard_server_log() -> None:
    """Install the guard on aiohttp's server logger (once; idempotent)."""
    logger = logging.getLogger("aiohttp.server")
    if _GUARD not in logger.filters:
        logger.addFilter(_GUARD)


def app_runner(
    app: web.Application, *, header_timeout_s: float = HEADER_TIMEOUT_S
) -> web.AppRunner:
    """An :class:`aiohttp.web.AppRunner` with the listeners' common limits (see above)."""
    guard_server_log()
    return web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        keepalive_timeout=header_timeout_s,
        max_line_size=MAX_LINE_BYTES,
        max_field_size=MAX_LINE_BYTES,
    )


class HttpListener:
    """An aiohttp app served on one address with the limits above (the event API and
    /metrics): ``_listen`` in the subclass's ``start``; the health paths and ``stop`` here.

    The health paths answer as the proxy port's do: ``/healthz`` and ``/readyz`` say
    whether the process would admit a caller now (``ready``: the reason it would not, or
    None; unset, the listener is ready while it answers), ``/livez`` that it answers."""

    header_timeout_s: float
    _runner: web.AppRunner | None
    port: int | None
    ready: Callable[[], str | None] | None = None

    async def _listen(self, app: web.Application, host: str, port: int) -> int:
        """Serve ``app`` on ``host:port``; the bound port (port 0 picks a free one)."""
        runner = app_runner(app, header_timeout_s=self.header_timeout_s)
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        return self.port

    def _add_health(self, app: web.Application) -> None:
        """Route the health paths of ``app`` here."""
        for path in (HEALTH_PATH, READY_PATH):
            app.router.add_get(path, self._ready)
        app.router.add_get(LIVE_PATH, self._live)

    async def _ready(self, request: web.Request) -> web.Response:
        del request
        return health_web_response(self.ready() if self.ready is not None else None)

    async def _live(self, request: web.Request) -> web.Response:
        del request
        return health_web_response(None)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def health_web_response(refusal: str | None, note: str | None = None) -> web.Response:
    """A health path's answer (see :func:`health_answer`), never cached."""
    status, text = health_answer(refusal, note)
    return web.Response(status=status, text=text, headers={"Cache-Control": "no-store"})


async def read_body(request: web.Request, timeout_s: float = BODY_TIMEOUT_S) -> bytes:
    """The request's body, or :class:`BodyTimeout` when it takes longer than ``timeout_s``.

    aiohttp's own errors (a body over ``client_max_size``) pass through unchanged.
    """
    try:
        async with asyncio.timeout(timeout_s):
            return await request.read()
    except TimeoutError:
        raise BodyTimeout from None


def body_timeout_response() -> web.Response:
    response = web.Response(status=408, text="the request body did not arrive in time\n")
    response.force_close()
    return response
