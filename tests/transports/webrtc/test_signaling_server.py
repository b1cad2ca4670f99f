"""voxproxy.transports.webrtc.signaling_server: the callers' side of signaling.

The HTTP server is run on 127.0.0.1 with a fake ``open_session`` that records the offers it
is handed and answers a fixed SDP, so what is tested is the server's own routing: WHIP
(POST, DELETE, the 405 to PATCH), Pipecat (POST, PATCH, renegotiation refused), the
answers to bad or oversized bodies, the open session's own HTTP error, CORS, and
:func:`add_trickled` on a fake peer connection. No peer connection is made.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest

from voxproxy.transports.webrtc.signaling_client import PIPECAT_PATH
from voxproxy.transports.webrtc.signaling_server import (
    MAX_OFFER_BYTES,
    HttpError,
    Offer,
    SignalingServer,
    add_trickled,
)

ANSWER = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=answer\r\n"
SDP = {"Content-Type": "application/sdp"}


@dataclass
class FakeSession:
    id: str
    hung_up: int = 0
    candidates: list[list[dict[str, Any]]] = field(default_factory=list)

    async def hang_up(self) -> None:
        self.hung_up += 1

    async def add_candidates(self, candidates: list[dict[str, Any]]) -> None:
        self.candidates.append(candidates)


@dataclass
class Opener:
    """The ``open_session`` handed to the server: records offers, may refuse them."""

    offers: list[Offer] = field(default_factory=list)
    sessions: list[FakeSession] = field(default_factory=list)
    refuse: HttpError | None = None

    async def __call__(self, offer: Offer) -> tuple[str, FakeSession]:
        self.offers.append(offer)
        if self.refuse is not None:
            raise self.refuse
        session = FakeSession(f"s{len(self.sessions)}")
        self.sessions.append(session)
        return ANSWER, session


@asynccontextmanager
async def served(
    **kwargs: Any,
) -> AsyncIterator[tuple[SignalingServer, Opener, aiohttp.ClientSession]]:
    opener = Opener()
    server = SignalingServer(opener, **kwargs)
    await server.start("127.0.0.1", 0)
    try:
        async with aiohttp.ClientSession() as http:
            yield server, opener, http
    finally:
        await server.stop()


# -- WHIP -------------------------------------------------------------------------------------


async def test_a_whip_offer_is_answered_201_with_its_session_location() -> None:
    async with served(whip_path="calls/") as (server, opener, http):
        assert server.url() == f"http://127.0.0.1:{server.port}/calls"
        headers = {**SDP, "X-Call-Tag": "abc"}
        async with http.post(server.url(), data=b"v=0\r\noffer", headers=headers) as r:
            assert r.status == 201
            assert r.content_type == "application/sdp"
            assert await r.text() == ANSWER
            assert r.headers["Location"] == "/calls/s0"
        (offer,) = opener.offers
        assert (offer.sdp, offer.signaling) == ("v=0\r\noffer", "whip")
        assert offer.headers["x-call-tag"] == "abc"  # names lower-cased
        assert server.sessions == {"s0": opener.sessions[0]}


async def test_a_whip_delete_hangs_up_once_and_forgets_the_session() -> None:
    async with served() as (server, opener, http):
        async with http.post(server.url(), data=b"v=0", headers=SDP) as r:
            location = r.headers["Location"]
        base = f"http://127.0.0.1:{server.port}"
        async with http.delete(base + location) as r:
            assert r.status == 200
        async with http.delete(base + location) as r:
            assert r.status == 404  # gone: a second DELETE finds nothing
        assert opener.sessions[0].hung_up == 1
        assert server.sessions == {}


async def test_a_whip_patch_is_refused_405_allowing_only_delete() -> None:
    async with served() as (server, _, http):
        async with http.patch(server.url() + "/any", data=b"a=candidate") as r:
            assert r.status == 405
            assert r.headers["Allow"] == "DELETE"


@pytest.mark.parametrize(
    ("headers", "body", "status"),
    [
        ({"Content-Type": "application/json"}, b"{}", 415),
        ({}, b"v=0", 415),
        (SDP, b"v=0 \xff\xfe", 400),  # not UTF-8
        (SDP, b"v" * (MAX_OFFER_BYTES + 1), 413),
    ],
    ids=["json", "untyped", "not-utf8", "too-large"],
)
async def test_a_bad_whip_offer_never_reaches_the_session(
    headers: dict[str, str], body: bytes, status: int
) -> None:
    async with served() as (server, opener, http):
        async with http.post(server.url(), data=body, headers=headers) as r:
            assert r.status == status
        assert opener.offers == []


async def test_the_sessions_own_refusal_is_the_callers_answer() -> None:
    async with served() as (server, opener, http):
        opener.refuse = HttpError(503, "busy", {"Retry-After": "1"})
        async with http.post(server.url(), data=b"v=0", headers=SDP) as r:
            assert (r.status, await r.text()) == (503, "busy\n")
            assert r.headers["Retry-After"] == "1"
        assert len(opener.offers) == 1 and server.sessions == {}


# -- Pipecat ----------------------------------------------------------------------------------


async def test_a_pipecat_offer_is_answered_with_its_pc_id_and_request_data() -> None:
    async with served() as (server, opener, http):
        assert server.url("pipecat").endswith(PIPECAT_PATH)
        offer = {"sdp": "v=0", "type": "offer", "requestData": {"room": 7}}
        async with http.post(server.url("pipecat"), json=offer) as r:
            assert r.status == 200
            assert await r.json() == {"sdp": ANSWER, "type": "answer", "pc_id": "s0"}
        assert opener.offers[0].signaling == "pipecat"
        assert opener.offers[0].request_data == {"room": 7}


async def test_pipecat_trickled_candidates_reach_their_session_dicts_only() -> None:
    async with served() as (server, opener, http):
        async with http.post(server.url("pipecat"), json={"sdp": "v=0"}) as r:
            pc_id = (await r.json())["pc_id"]
        good = {"candidate": "candidate:1 1 udp 1 127.0.0.1 9 typ host", "sdp_mid": "0"}
        patch = {"pc_id": pc_id, "candidates": [good, "junk", 3]}
        async with http.patch(server.url("pipecat"), json=patch) as r:
            assert (r.status, await r.json()) == (200, {"status": "success"})
        async with http.patch(server.url("pipecat"), json={"pc_id": "nope"}) as r:
            assert r.status == 404
        async with http.patch(server.url("pipecat"), json={"pc_id": pc_id}) as r:
            assert r.status == 400  # no list of candidates
        assert opener.sessions[0].candidates == [[good]]


async def test_renegotiating_a_running_pipecat_session_is_refused_501() -> None:
    async with served() as (server, opener, http):
        async with http.post(server.url("pipecat"), json={"sdp": "v=0"}) as r:
            pc_id = (await r.json())["pc_id"]
        async with http.post(server.url("pipecat"), json={"sdp": "v=0", "pc_id": pc_id}) as r:
            assert r.status == 501
        assert len(opener.offers) == 1


@pytest.mark.parametrize(
    "body",
    [b"[1, 2]", b"not json", json.dumps({"type": "offer"}).encode(), b'{"sdp": 5}'],
    ids=["array", "not-json", "no-sdp", "sdp-not-text"],
)
async def test_a_malformed_pipecat_offer_is_answered_400(body: bytes) -> None:
    async with served() as (server, opener, http):
        headers = {"Content-Type": "application/json"}
        async with http.post(server.url("pipecat"), data=body, headers=headers) as r:
            assert r.status == 400
            assert "Pipecat offer" in await r.text()
        assert opener.offers == []


async def test_a_pipecat_answer_posted_as_an_offer_is_refused() -> None:
    async with served() as (server, opener, http):
        async with http.post(server.url("pipecat"), json={"sdp": "v=0", "type": "answer"}) as r:
            assert r.status == 400
            assert "'answer'" in await r.text()
        assert opener.offers == []


# -- CORS -------------------------------------------------------------------------------------


async def test_cors_preflight_and_answers_for_an_allowed_origin_only() -> None:
    async with served(cors_origins=("http://good.test",)) as (server, _, http):
        good, bad = {"Origin": "http://good.test"}, {"Origin": "http://bad.test"}
        async with http.options(server.url(), headers=good) as r:
            assert r.status == 204
            assert r.headers["Access-Control-Allow-Origin"] == "http://good.test"
            assert "DELETE" in r.headers["Access-Control-Allow-Methods"]
            assert "Content-Type" in r.headers["Access-Control-Allow-Headers"]
        async with http.post(server.url(), data=b"v=0", headers={**SDP, **good}) as r:
            assert r.status == 201
            assert r.headers["Access-Control-Expose-Headers"] == "Location"
            assert r.headers["Vary"] == "Origin"
        async with http.post(server.url(), data=b"v=0", headers={**SDP, **bad}) as r:
            assert r.status == 201
            assert "Access-Control-Allow-Origin" not in r.headers
        async with http.options(server.url(), headers=bad) as r:
            assert r.status != 204 and "Access-Control-Allow-Origin" not in r.headers


# -- trickled candidates ----------------------------------------------------------------------


class FakePc:
    def __init__(self) -> None:
        self.added: list[Any] = []

    async def addIceCandidate(self, candidate: Any) -> None:  # aiortc's name
        self.added.append(candidate)


async def test_add_trickled_adds_what_parses_with_either_spelling_of_its_mid() -> None:
    pc = FakePc()
    line = "1 1 udp 2130706431 127.0.0.1 5000 typ host"
    added = await add_trickled(
        pc,  # type: ignore[arg-type]
        [
            {"candidate": "candidate:" + line, "sdp_mid": "0", "sdp_mline_index": 0},
            {"candidate": line, "sdpMid": "1", "sdpMLineIndex": 1},
            {"candidate": ""},  # end of candidates
            {"candidate": 7},
            {"candidate": "candidate:garbage"},
        ],
    )
    assert added == 2
    assert [(c.ip, c.port, c.sdpMid, c.sdpMLineIndex) for c in pc.added] == [
        ("127.0.0.1", 5000, "0", 0),
        ("127.0.0.1", 5000, "1", 1),
    ]
