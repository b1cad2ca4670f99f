"""Signaling, the callers' side: the HTTP server that answers WHIP and Pipecat offers."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from aiohttp import web
from aiortc import (
    RTCPeerConnection,
)
from aiortc.sdp import candidate_from_sdp

from voxproxy.httpserve import (
    HEADER_TIMEOUT_S,
    BodyTimeout,
    app_runner,
    body_timeout_response,
    read_body,
)
from voxproxy.transports.webrtc.signaling_client import PIPECAT_PATH, WHIP_PATH, Signaling

MAX_OFFER_BYTES = 64 * 1024


@dataclass(slots=True)
class Offer:
    """An offer as a caller posted it."""

    sdp: str
    signaling: Signaling
    headers: dict[str, str]  # lower-cased names
    request_data: Any = None


class Session(Protocol):
    """What a :class:`SignalingServer` keeps per answered offer."""

    id: str

    async def hang_up(self) -> None:
        """The caller ended the session (WHIP DELETE)."""
        ...

    async def add_candidates(self, candidates: list[dict[str, Any]]) -> None:
        """Remote candidates trickled by the caller (Pipecat PATCH)."""
        ...


OpenSession = Callable[[Offer], Awaitable[tuple[str, Session]]]


class HttpError(Exception):
    def __init__(self, status: int, reason: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = headers


def _error(status: int, reason: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, text=reason + "\n", content_type="text/plain", headers=headers
    )


T = TypeVar("T")
PIPECAT_OFFER = "a Pipecat offer is the JSON object {sdp, type, pc_id?}"
PIPECAT_CANDIDATES = "expected JSON {pc_id, candidates}"


async def _read(
    request: web.Request, parse: Callable[[bytes], T], too_large: str, malformed: str
) -> T | web.Response:
    """The request's body through ``parse``, or the answer to give instead: 408 when it
    arrives too slowly, 413 (``too_large``) past the size limit, 400 (``malformed``) when
    ``parse`` raises ``ValueError`` (a ``UnicodeDecodeError`` too) or ``LookupError``."""
    try:
        return parse(await read_body(request))
    except BodyTimeout:
        return body_timeout_response()
    except web.HTTPRequestEntityTooLarge:
        return _error(413, too_large)
    except (ValueError, LookupError):
        return _error(400, malformed)


def _json_object(body: bytes) -> dict[str, Any]:
    msg = json.loads(body)
    if not isinstance(msg, dict):
        raise ValueError("not a JSON object")
    return msg


class SignalingServer:
    """Answers WHIP and Pipecat offers on one HTTP port, for any :data:`OpenSession`.

    Routes: ``POST {whip_path}`` (WHIP, ``application/sdp``), ``DELETE``/``PATCH``
    ``{whip_path}/{id}``; ``POST``/``PATCH /api/offer`` (Pipecat). ``open_session``
    returns the answer SDP and the session, or raises :class:`HttpError`.
    """

    def __init__(
        self,
        open_session: OpenSession,
        *,
        whip_path: str = WHIP_PATH,
        cors_origins: Sequence[str] = ("*",),
        header_timeout_s: float = HEADER_TIMEOUT_S,
    ) -> None:
        self.open_session = open_session
        self.header_timeout_s = header_timeout_s
        self.whip_path = "/" + whip_path.strip("/")
        self.sessions: dict[str, Session] = {}
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self.host: str | None = None
        self.cors_origins = tuple(cors_origins)
        app = web.Application(client_max_size=MAX_OFFER_BYTES, middlewares=[self._cors])
        app.router.add_post(self.whip_path, self._whip_post)
        app.router.add_delete(self.whip_path + "/{id}", self._whip_delete)
        app.router.add_patch(self.whip_path + "/{id}", self._whip_patch)
        app.router.add_post(PIPECAT_PATH, self._pipecat_post)
        app.router.add_patch(PIPECAT_PATH, self._pipecat_patch)
        self.app = app

    @web.middleware
    async def _cors(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """CORS for pages that offer from another origin (a browser's WHIP client): the
        preflight of an ``application/sdp`` POST, and ``Location`` exposed to scripts."""
        origin = request.headers.get("Origin")
        allowed = origin is not None and ("*" in self.cors_origins or origin in self.cors_origins)
        if request.method == "OPTIONS" and allowed:
            response: web.StreamResponse = web.Response(status=204)
            response.headers["Access-Control-Allow-Methods"] = "POST, PATCH, DELETE, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = "Content-Type, Authorization"
            response.headers["Access-Control-Max-Age"] = "600"
        else:
            response = await handler(request)
        if allowed:
            assert origin is not None
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Expose-Headers"] = "Location"
            response.headers["Vary"] = "Origin"
        return response

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        runner = app_runner(self.app, header_timeout_s=self.header_timeout_s)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        self._runner = runner
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1]) if sockets else port
        self.host = host
        return self.port

    def url(self, signaling: Signaling = "whip") -> str:
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        path = self.whip_path if signaling == "whip" else PIPECAT_PATH
        return f"http://{host}:{self.port}{path}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def forget(self, session_id: str) -> None:
        self.sessions.pop(session_id, None)

    async def _open(self, offer: Offer) -> tuple[str, Session] | web.Response:
        try:
            answer, session = await self.open_session(offer)
        except HttpError as exc:
            return _error(exc.status, exc.reason, exc.headers)
        self.sessions[session.id] = session
        return answer, session

    async def _whip_post(self, request: web.Request) -> web.StreamResponse:
        ctype = request.content_type
        if ctype != "application/sdp":
            return _error(415, f"a WHIP offer is application/sdp, not {ctype or 'untyped'}")
        charset = request.charset or "utf-8"
        sdp = await _read(
            request,
            lambda body: body.decode(charset),
            "the offer is too large",
            "malformed SDP offer: not UTF-8",
        )
        if isinstance(sdp, web.Response):
            return sdp
        headers = {k.lower(): v for k, v in request.headers.items()}
        opened = await self._open(Offer(sdp, "whip", headers))
        if isinstance(opened, web.Response):
            return opened
        answer, session = opened
        location = f"{self.whip_path}/{session.id}"
        return web.Response(
            status=201,
            text=answer,
            content_type="application/sdp",
            headers={"Location": location},
        )

    async def _whip_delete(self, request: web.Request) -> web.StreamResponse:
        session = self.sessions.pop(request.match_info["id"], None)
        if session is None:
            return _error(404, "no such session")
        await session.hang_up()
        return web.Response(status=200)

    async def _whip_patch(self, request: web.Request) -> web.StreamResponse:
        del request
        return web.Response(
            status=405,
            text="this WHIP session supports neither trickle ICE nor ICE restarts\n",
            headers={"Allow": "DELETE"},
        )

    async def _pipecat_post(self, request: web.Request) -> web.StreamResponse:
        msg = await _read(request, _json_object, "the offer is too large", PIPECAT_OFFER)
        if isinstance(msg, web.Response):
            return msg
        if not isinstance(msg.get("sdp"), str):
            return _error(400, PIPECAT_OFFER)
        if msg.get("type", "offer") != "offer":
            return _error(400, f"expected an offer, got type {msg.get('type')!r}")
        if msg.get("pc_id") is not None and str(msg["pc_id"]) in self.sessions:
            return _error(501, "renegotiation of a running session is not supported")
        headers = {k.lower(): v for k, v in request.headers.items()}
        data = msg.get("request_data", msg.get("requestData"))
        opened = await self._open(Offer(msg["sdp"], "pipecat", headers, data))
        if isinstance(opened, web.Response):
            return opened
        answer, session = opened
        return web.json_response({"sdp": answer, "type": "answer", "pc_id": session.id})

    async def _pipecat_patch(self, request: web.Request) -> web.StreamResponse:
        msg = await _read(request, _json_object, "the candidates are too large", PIPECAT_CANDIDATES)
        if isinstance(msg, web.Response):
            return msg
        session = self.sessions.get(str(msg.get("pc_id")))
        if session is None:
            return _error(404, "no such session")
        candidates = msg.get("candidates")
        if not isinstance(candidates, list):
            return _error(400, "expected a list of candidates")
        await session.add_candidates([c for c in candidates if isinstance(c, dict)])
        return web.json_response({"status": "success"})


async def add_trickled(pc: RTCPeerConnection, candidates: list[dict[str, Any]]) -> int:
    """Add Pipecat-style trickled candidates ``{candidate, sdp_mid, sdp_mline_index}``."""
    added = 0
    for c in candidates:
        text = c.get("candidate")
        if not isinstance(text, str) or not text:
            continue
        try:
            cand = candidate_from_sdp(
                text.split(":", 1)[1] if text.startswith("candidate:") else text
            )
            cand.sdpMid = c.get("sdp_mid", c.get("sdpMid"))
            cand.sdpMLineIndex = c.get("sdp_mline_index", c.get("sdpMLineIndex"))
            await pc.addIceCandidate(cand)
            added += 1
        except Exception:
            continue
    return added
