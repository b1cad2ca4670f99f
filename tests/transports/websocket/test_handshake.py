"""The HTTP pieces of a websocket call, on requests built in memory (no sockets)."""

from __future__ import annotations

from websockets.datastructures import Headers
from websockets.http11 import Request, Response
from websockets.uri import parse_uri

from voxproxy.transports.websocket import handshake as hs

KEY = "dGhlIHNhbXBsZSBub25jZQ=="


def _request(**extra: str) -> Request:
    headers = Headers(
        [
            ("Host", "proxy"),
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", KEY),
            ("Sec-WebSocket-Version", "13"),
        ]
    )
    for name, value in extra.items():
        headers[name.replace("_", "-")] = value
    return Request("/media?x=1", headers)


def test_a_valid_handshake_is_not_rejected_and_a_broken_one_is_answered() -> None:
    assert hs.handshake_rejection(_request()) is None
    broken = _request()
    del broken.headers["Sec-WebSocket-Key"]
    answer = hs.handshake_rejection(broken)
    assert answer is not None and answer.status_code == 400


def test_the_health_answer_is_a_plain_200_or_a_503_with_the_reason() -> None:
    answer = hs.health_response()
    assert (answer.status_code, answer.body) == (200, b"ok\n")
    assert answer.headers["Content-Length"] == "3"
    answer = hs.health_response("at capacity (2 calls in progress)")
    assert (answer.status_code, answer.reason_phrase) == (503, "Service Unavailable")
    assert answer.body == b"refusing callers: at capacity (2 calls in progress)\n"
    assert answer.headers["Content-Length"] == str(len(answer.body))


def test_every_offered_subprotocol_is_passed_on_in_order() -> None:
    request = _request()
    request.headers["Sec-WebSocket-Protocol"] = "a, b"
    request.headers["Sec-WebSocket-Protocol"] = "c"  # a second header line adds to them
    assert hs.offered_subprotocols(request) == ["a", "b", "c"]


def test_end_to_end_headers_pass_and_one_hop_s_do_not() -> None:
    request = _request(Authorization="Bearer caller", X_Tenant="42")
    out = Request("/", Headers())
    hs.pass_request_headers(request, out, parse_uri("ws://agent:8766/"))
    assert dict(out.headers.raw_items()) == {"Authorization": "Bearer caller", "X-Tenant": "42"}
    with_credentials = Request("/", Headers())
    hs.pass_request_headers(request, with_credentials, parse_uri("ws://u:p@agent:8766/"))
    assert "Authorization" not in with_credentials.headers  # the upstream URL's win


def test_our_headers_replace_a_caller_s_of_the_same_name() -> None:
    out = Request("/", Headers([("Traceparent", "caller's"), ("X-Other", "kept")]))
    hs.add_own_headers(out, [("traceparent", "ours")])
    assert out.headers.get_all("traceparent") == ["ours"]
    assert out.headers["X-Other"] == "kept"


def test_the_agent_s_answer_headers_pass_back_but_not_its_hop_headers() -> None:
    agent = Headers([("Set-Cookie", "s=1"), ("Server", "agent"), ("Content-Type", "text/x")])
    accept = Response(101, "Switching Protocols", Headers())
    hs.pass_response_headers(agent, accept)
    assert dict(accept.headers.raw_items()) == {"Set-Cookie": "s=1", "Content-Type": "text/x"}
    refusal = Response(403, "Forbidden", Headers([("Content-Type", "text/plain")]))
    hs.pass_response_headers(agent, refusal, content_type=False)
    assert refusal.headers.get_all("Content-Type") == ["text/plain"]  # ours kept, alone


def test_the_request_line_is_held_until_whole_and_http10_read_as_http11() -> None:
    line = hs.RequestLine()
    assert line.feed(b"GET /healthz HT") == b""  # not whole yet: nothing handed on
    assert line.feed(b"TP/1.0\r\nHost: x\r\n\r\n") == b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    assert line.http10
    other = hs.RequestLine()
    assert other.feed(b"GET / HTTP/1.1\r\n") == b"GET / HTTP/1.1\r\n" and not other.http10
    endless = hs.RequestLine()  # no line end within the limit: handed on as it is
    assert endless.feed(b"G" * 5000) == b""
    assert endless.feed(b"G" * 5000) == b"G" * 10000 and not endless.http10
