"""The HTTP side of a call: the caller's handshake request, ours to the agent, and
the answers.

Which headers are one hop's (never passed on) and which are end-to-end; the check of
a caller's request against RFC 6455 4.2.1; the health paths' answer; the request
we send the agent (the caller's end-to-end headers, our own added); the agent's
answer headers passed back to the caller.
"""

from __future__ import annotations

import http
from collections.abc import Iterable, Sequence

from websockets.datastructures import Headers
from websockets.http11 import Request, Response
from websockets.server import ServerProtocol
from websockets.typing import Subprotocol
from websockets.uri import WebSocketURI

from voxproxy.health import health_answer
from voxproxy.transports.websocket.config import MAX_REQUEST_LINE

# Request headers that belong to one hop or to the handshake itself; everything
# else is end-to-end and passes through to the agent.
_HOP_REQUEST_HEADERS = frozenset(
    {
        "host",
        "connection",
        "upgrade",
        "keep-alive",
        "te",
        "trailer",
        "transfer-encoding",
        "content-length",
        "proxy-authorization",
        "proxy-connection",
        "sec-websocket-key",
        "sec-websocket-version",
        "sec-websocket-extensions",
        "sec-websocket-protocol",
    }
)
_HOP_RESPONSE_HEADERS = frozenset(
    {
        "connection",
        "upgrade",
        "keep-alive",
        "transfer-encoding",
        "content-length",
        "sec-websocket-accept",
        "sec-websocket-extensions",
        "sec-websocket-protocol",
        "date",
        "server",
    }
)


def _no_subprotocol(protocol: ServerProtocol, offered: Sequence[Subprotocol]) -> None:
    del protocol, offered


def handshake_rejection(request: Request) -> Response | None:
    """The HTTP error answer to a caller's request that is not a valid websocket
    handshake (RFC 6455 4.2.1: method, HTTP/1.1, Upgrade, Connection, key, version 13),
    or None when it is valid.

    websockets' own checks run on a scratch protocol, so that the call's protocol still
    answers a valid request later, with the subprotocol the agent picks.
    """
    probe = ServerProtocol(select_subprotocol=_no_subprotocol)
    response = probe.accept(request)
    return None if response.status_code == 101 else response


class RequestLine:
    """The caller's first bytes, held until its request line is whole (at most
    ``MAX_REQUEST_LINE`` of them), then handed on, an ``HTTP/1.0`` line read as
    ``HTTP/1.1`` and remembered (:attr:`http10`). Every websockets release the package
    allows then parses the request alike (15 and 16 cannot parse an HTTP/1.0 request
    line and answered nothing at all, where 17 answers it), and the relay answers an
    HTTP/1.0 request itself: a health check as any other, an upgrade with 505
    (:func:`http_version_rejection`)."""

    __slots__ = ("held", "http10")

    def __init__(self) -> None:
        self.held = bytearray()
        self.http10 = False

    def feed(self, data: bytes) -> bytes:
        """The bytes to hand on: none while the line is not whole, then all held."""
        held = self.held
        held += data
        end = held.find(b"\r\n")
        if end < 0 and len(held) < MAX_REQUEST_LINE:
            return b""
        if end >= 0 and held[:end].endswith(b" HTTP/1.0"):
            self.http10 = True
            held[end - 1 : end] = b"1"  # HTTP/1.0 -> HTTP/1.1, in place
        return bytes(held)


def http_version_rejection() -> Response:
    """The answer to a websocket request made over HTTP/1.0: 505, as websockets
    itself answers it where it parses such a request (RFC 6455 4.2.1: HTTP/1.1 or
    higher)."""
    probe = ServerProtocol(select_subprotocol=_no_subprotocol)
    return probe.reject(
        http.HTTPStatus.HTTP_VERSION_NOT_SUPPORTED,
        "Failed to open a WebSocket connection: unsupported protocol; expected HTTP/1.1.\n",
    )


def health_response(refusal: str | None = None) -> Response:
    """The answer to a plain ``GET`` of a health path: ``200 ok``, or ``503`` with
    ``refusal`` (why a caller would be refused now) on one line."""
    status, text = health_answer(refusal)
    body = text.encode()
    headers = Headers(
        [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Length", str(len(body))),
            ("Connection", "close"),
            ("Cache-Control", "no-store"),
        ]
    )
    return Response(status, "OK" if status == 200 else "Service Unavailable", headers, body)


def offered_subprotocols(request: Request) -> list[Subprotocol]:
    """The subprotocols the caller offers, to be offered to the agent in turn."""
    return [
        Subprotocol(p.strip())
        for value in request.headers.get_all("Sec-WebSocket-Protocol")
        for p in value.split(",")
        if p.strip()
    ]


def pass_request_headers(request: Request, out: Request, uri: WebSocketURI) -> None:
    """Copy the caller's end-to-end headers onto our request to the agent."""
    for name, value in request.headers.raw_items():
        lower = name.lower()
        if lower in _HOP_REQUEST_HEADERS:
            continue
        if lower == "authorization" and uri.user_info is not None:
            continue  # credentials in the upstream URL win
        out.headers[name] = value


def add_own_headers(out: Request, extra: Iterable[tuple[str, str]]) -> None:
    """Set our own headers (the observer's, e.g. trace context) on the request to the
    agent: ours replace a caller's of the same name (no duplicates)."""
    extra = list(extra)
    for name in {name.lower() for name, _ in extra}:
        if name in out.headers:
            del out.headers[name]
    for name, value in extra:
        out.headers[name] = value


def pass_response_headers(src: Headers, dst: Response, *, content_type: bool = True) -> None:
    """Copy the agent's end-to-end answer headers (``src``) onto our answer to the
    caller; ``content_type=False`` keeps our own ``Content-Type``."""
    for name, value in src.raw_items():
        lower = name.lower()
        if lower not in _HOP_RESPONSE_HEADERS and (content_type or lower != "content-type"):
            dst.headers[name] = value
