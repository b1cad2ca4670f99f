"""voxproxy as the agent's WHIP or Pipecat client (``voxproxy/transports/webrtc/
signaling_client.py``), against a hand-made agent on loopback: what the offer looks like
on each signaling, the answer read back, and each failure mapped to the status the
caller is answered with and the call's end cause."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from voxproxy.transports.ends import EndCause
from voxproxy.transports.webrtc.signaling_client import (
    SignalingError,
    hang_up,
    post_offer,
)

OFFER = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\n"
Handler = Callable[[web.Request], Any]


@asynccontextmanager
async def agent(handler: Handler) -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """An agent at http://127.0.0.1:PORT answering every request with ``handler``; each
    request it got (method, path, content type, body)."""
    got: list[dict[str, Any]] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        got.append(
            {
                "method": request.method,
                "path": request.path,
                "type": request.headers.get("Content-Type"),
                "auth": request.headers.get("Authorization"),
                "body": await request.text(),
            }
        )
        response: web.StreamResponse = await handler(request)
        return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", got
    finally:
        await runner.cleanup()


def answering(status: int, text: str, **headers: str) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        del request
        return web.Response(status=status, text=text, headers=headers)

    return handler


async def test_a_whip_offer_is_the_sdp_and_the_session_url_is_resolved_against_it() -> None:
    async with agent(answering(201, "v=0 answer", Location="../sessions/7")) as (url, got):
        async with aiohttp.ClientSession() as http:
            answer = await post_offer(
                http, f"{url}/rooms/whip", "whip", OFFER, headers={"Authorization": "Bearer k"}
            )
            assert await hang_up(http, answer.session_url or "") == 201
    assert (answer.status, answer.sdp, answer.pc_id) == (201, "v=0 answer", None)
    assert answer.session_url == f"{url}/sessions/7"
    offer, teardown = got
    assert offer == {
        "method": "POST",
        "path": "/rooms/whip",
        "type": "application/sdp",
        "auth": "Bearer k",
        "body": OFFER,
    }
    assert (teardown["method"], teardown["path"]) == ("DELETE", "/sessions/7")


async def test_a_whip_answer_without_a_location_has_no_session_to_hang_up() -> None:
    async with agent(answering(200, "v=0 answer")) as (url, _):
        async with aiohttp.ClientSession() as http:
            answer = await post_offer(http, f"{url}/whip", "whip", OFFER)
    assert answer.status == 200 and answer.session_url is None


async def test_a_pipecat_offer_is_json_with_the_request_data_and_the_pc_id_comes_back() -> None:
    reply = json.dumps({"sdp": "v=0 answer", "type": "answer", "pc_id": 42})
    async with agent(answering(200, reply)) as (url, got):
        async with aiohttp.ClientSession() as http:
            answer = await post_offer(
                http, f"{url}/api/offer", "pipecat", OFFER, request_data={"bot": "a"}
            )
            plain = await post_offer(http, f"{url}/api/offer", "pipecat", OFFER)
    assert (answer.sdp, answer.pc_id, answer.session_url) == ("v=0 answer", "42", None)
    assert got[0]["type"] == "application/json"
    assert json.loads(got[0]["body"]) == {
        "sdp": OFFER,
        "type": "offer",
        "request_data": {"bot": "a"},
    }
    assert json.loads(got[1]["body"]) == {"sdp": OFFER, "type": "offer"}
    assert plain.pc_id == "42"


@pytest.mark.parametrize(
    ("status", "text", "answered", "says"),
    [
        (403, "  not\n  you  ", 403, "the agent refused the call: HTTP 403: not you"),
        (503, "", 503, "HTTP 503: no reason given"),
        (302, "elsewhere", 502, "HTTP 302: elsewhere"),
    ],
)
async def test_a_refusal_is_passed_on_to_the_caller(
    status: int, text: str, answered: int, says: str
) -> None:
    async with agent(answering(status, text)) as (url, _):
        async with aiohttp.ClientSession() as http:
            with pytest.raises(SignalingError) as refused:
                await post_offer(http, f"{url}/whip", "whip", OFFER)
    e = refused.value
    assert (e.status, e.cause, e.upstream_status) == (answered, EndCause.UPSTREAM_REFUSED, status)
    assert says in e.reason


@pytest.mark.parametrize("reply", ["v=0 not json", json.dumps({"type": "answer"}), "[1]"])
async def test_a_pipecat_answer_that_is_not_its_json_is_a_bad_gateway(reply: str) -> None:
    async with agent(answering(200, reply)) as (url, _):
        async with aiohttp.ClientSession() as http:
            with pytest.raises(SignalingError) as bad:
                await post_offer(http, f"{url}/api/offer", "pipecat", OFFER)
    assert (bad.value.status, bad.value.upstream_status) == (502, 200)
    assert "Pipecat's runner" in bad.value.reason


async def test_an_agent_that_never_answers_is_a_gateway_timeout() -> None:
    never = asyncio.Event()

    async def handler(request: web.Request) -> web.Response:
        await never.wait()
        return web.Response(text="late")

    async with agent(handler) as (url, _):
        async with aiohttp.ClientSession() as http:
            with pytest.raises(SignalingError) as late:
                await post_offer(http, f"{url}/whip", "whip", OFFER, timeout_s=0.05)
        never.set()
    e = late.value
    assert (e.status, e.cause, e.upstream_status) == (504, EndCause.UPSTREAM_TIMEOUT, None)


async def test_an_unreachable_agent_is_a_bad_gateway_and_a_hang_up_there_is_none() -> None:
    async with agent(answering(200, "")) as (url, _):
        pass  # closed: nothing listens there now
    async with aiohttp.ClientSession() as http:
        with pytest.raises(SignalingError) as gone:
            await post_offer(http, f"{url}/whip", "whip", OFFER)
        assert await hang_up(http, f"{url}/sessions/1") is None
    e = gone.value
    assert (e.status, e.cause) == (502, EndCause.UPSTREAM_UNREACHABLE)
    assert e.reason.startswith("the agent is unreachable: ")
