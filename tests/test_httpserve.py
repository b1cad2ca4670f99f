"""The HTTP listeners (WHIP signaling, event API, /metrics): slow requests are cut off,
and a malformed request never puts its request line into the proxy's log."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress

import pytest
from prometheus_client import CollectorRegistry

from voxproxy.proxy.eventapi import EventApi
from voxproxy.proxy.livecalls import LiveCalls
from voxproxy.telemetry.prometheus import MetricsServer
from voxproxy.transports.webrtc import SignalingServer

TOKEN = "listener-token-0123456789"


async def _no_session(offer: object) -> tuple[str, object]:
    raise AssertionError("no offer is expected here")


@asynccontextmanager
async def listener(kind: str, **timeouts: float) -> AsyncIterator[int]:
    stop: Callable[[], Awaitable[None]]
    if kind == "events":
        api = EventApi(LiveCalls(b"k"), b"k", TOKEN, **timeouts)
        port = await api.start("127.0.0.1", 0)
        stop = api.stop
    elif kind == "whip":
        server = SignalingServer(_no_session, **timeouts)  # type: ignore[arg-type]
        port = await server.start("127.0.0.1", 0)
        stop = server.stop
    else:
        metrics = MetricsServer(CollectorRegistry(), **timeouts)
        port = await metrics.start("127.0.0.1", 0)
        stop = metrics.stop
    try:
        yield port
    finally:
        await stop()


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with suppress(ConnectionError):
        await writer.wait_closed()


@pytest.mark.parametrize("kind", ["events", "whip", "metrics"])
async def test_a_half_sent_request_is_dropped_after_the_header_timeout(kind: str) -> None:
    async with listener(kind, header_timeout_s=0.3) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /whip HTTP/1.1\r\nHost: x\r\n")  # ... and nothing more
        got = await asyncio.wait_for(reader.read(), 5)  # dropped: EOF, no answer
        await _close(writer)
    assert got == b""


async def test_a_body_that_never_arrives_is_answered_408() -> None:
    async with listener("events", body_timeout_s=0.3) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            b"POST /v1/calls/x/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Length: 100\r\n\r\n{"
        )
        got = await asyncio.wait_for(reader.readline(), 5)
        await _close(writer)
    assert got.startswith(b"HTTP/1.1 408 ")


@pytest.mark.parametrize("kind", ["events", "whip", "metrics"])
async def test_an_over_long_url_is_refused_without_logging_it(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "caller-path-token-77aa"
    async with listener(kind) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /" + (secret * 1000).encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        got = await asyncio.wait_for(reader.read(), 5)
        await _close(writer)
    assert got.startswith(b"HTTP/1.0 400 ") or got.startswith(b"HTTP/1.1 400 ")
    text = "\n".join(caplog.handler.format(r) for r in caplog.records)
    assert secret not in text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "malformed HTTP request refused (LineTooLong" in text


def test_aioice_does_not_log_callers_addresses_at_info(caplog: pytest.LogCaptureFixture) -> None:
    import voxproxy.transports.webrtc  # noqa: F401  (importing the transport sets it)

    caplog.set_level(logging.INFO)  # the proxy's --log-level info

    assert not logging.getLogger("aioice.ice").isEnabledFor(logging.INFO)
    assert logging.getLogger("aioice.ice").isEnabledFor(logging.WARNING)


@pytest.mark.parametrize(
    ("method", "path", "body", "ctype", "status", "text"),
    [
        ("POST", "/whip", b"v=0\xff\r\n", "application/sdp", 400, "malformed SDP offer: not UTF-8"),
        ("POST", "/whip", b"v=0\r\n", "application/sdp; charset=nope", 400, "not UTF-8"),
        ("POST", "/whip", b"v" * (64 * 1024 + 1), "application/sdp", 413, "the offer is too large"),
        ("POST", "/api/offer", b"not json", "application/json", 400, "a Pipecat offer is"),
        ("POST", "/api/offer", b"[1]", "application/json", 400, "a Pipecat offer is"),
        ("POST", "/api/offer", b'{"type": "offer"}', "application/json", 400, "a Pipecat offer"),
        ("POST", "/api/offer", b" " * (64 * 1024 + 1), "application/json", 413, "too large"),
        ("PATCH", "/api/offer", b"\xff", "application/json", 400, "expected JSON {pc_id"),
        ("PATCH", "/api/offer", b"[]", "application/json", 400, "expected JSON {pc_id"),
        ("PATCH", "/api/offer", b" " * (64 * 1024 + 1), "application/json", 413, "candidates"),
        ("PATCH", "/api/offer", b'{"pc_id": "nope"}', "application/json", 404, "no such session"),
    ],
)
async def test_signaling_answers_a_body_it_cannot_use_without_opening_a_session(
    method: str, path: str, body: bytes, ctype: str, status: int, text: str
) -> None:
    import aiohttp

    async with listener("whip") as port:
        async with aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{port}{path}"
            async with http.request(method, url, data=body, headers={"Content-Type": ctype}) as r:
                got = (r.status, await r.text())
    assert got[0] == status and text in got[1], got
