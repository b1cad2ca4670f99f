"""The websocket forwarding plane: a relay built on websockets' sans-I/O protocols.

Each call is two asyncio protocols (the caller's connection and ours to the
agent) joined by a :class:`Relay`. Bytes read from one leg go through that leg's
:class:`websockets.server.ServerProtocol` or :class:`websockets.client.ClientProtocol`;
every data frame that comes out is written to the other leg at once, with its
opcode and FIN bit, so messages arrive unchanged and in order (fragmentation
included). Pings are answered per hop; close codes and reasons are carried
across. No task runs per connection once the call is up: this is the leaner
path that DESIGN.md measured (about 22-29 µs of CPU per message against 35-47 µs
for the stock connection layer), and it leaves room for measurement.

Only after a message has been forwarded does the relay hand a copy to its
:class:`CallObserver`, which measures; an observer that raises is counted and
ignored, never allowed to touch the call.

The caller's handshake request is checked completely first (RFC 6455 4.2.1:
``GET``, HTTP/1.1, ``Upgrade``/``Connection``, a 16-byte key, version 13): a
request that is not a valid websocket handshake is answered at once with
websockets' own 4xx/505, with no admission, no agent connection and no receipt.
A plain ``GET /healthz`` (no ``Upgrade``) is answered ``200 ok``: the health
check of a load balancer. A valid handshake is answered only once the agent has
answered ours, so the subprotocol the agent picked and its refusals pass
through: a refusal is mirrored with the agent's own HTTP status, an unreachable
agent is a 502 and a silent one a 504.

Limits: ``RelayConfig.max_calls`` caps the calls in progress (from the caller's
handshake request until both sockets are gone). A caller over the cap is
refused at the handshake with HTTP 503 and ``Retry-After`` (no agent connection
is made, no measurement starts, so no receipt is written) and counted in
:attr:`Admission.refused`. Refusing at the handshake rather than accepting and
closing with 1013 keeps an overloaded proxy from spending anything on the call,
and every websocket client reports an HTTP status plainly. A caller that sends
no handshake request within ``handshake_timeout_s`` is dropped.

A peer that takes no bytes for ``stall_timeout_s`` while the relay has bytes for
it (its leg's writes stay paused that long: it stopped reading) is treated as
gone: its connection is aborted and the call ends as if it had vanished (a
stalled agent: the caller is closed with 1014 and the receipt says
``agent_vanished``; a stalled caller: the agent gets 1001, ``caller_vanished``).
Without this a stalled agent would hold the call, and both sockets, forever:
while its writes are paused the relay reads nothing from the other leg, so it
would not even see that leg go away. Once a leg is gone (or closing), what the
other peer still sends is read only to find its close frame: it is neither
forwarded nor measured, so a flooding agent behind a dropped caller costs no
memory during the close timeout.

``idle_timeout_s`` closes a call (1001 both ways) after that long without
media: only a complete message counts, and once the call's wire has carried
audio, only a message with audio (the observer says which). Pings, pongs and a
frame that never ends keep nothing alive. A message may come in at most
:data:`MAX_FRAGMENTS` frames; more close the call with 1009, as a message over
``max_message_bytes`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import ssl
import sys
import time
import traceback
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, cast
from urllib.parse import urlsplit

from websockets.client import ClientProtocol
from websockets.datastructures import Headers
from websockets.exceptions import InvalidStatus
from websockets.frames import Close, CloseCode, Frame, Opcode
from websockets.http11 import Request, Response
from websockets.protocol import SEND_EOF, State
from websockets.server import ServerProtocol
from websockets.typing import Subprotocol
from websockets.uri import WebSocketURI, parse_uri

from voxproxy.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Direction
from voxproxy.fdwatch import FD_ALARM, FD_ERRNOS

log = logging.getLogger("voxproxy.transport")

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
_UNSENDABLE_CODES = frozenset({1005, 1006, 1015})
WRITE_HIGH_WATER = 512 * 1024
HEALTH_PATH = "/healthz"  # a plain GET (no Upgrade) here is answered 200 by the proxy itself
MAX_FRAGMENTS = 4096  # frames of one message; more close the call with 1009 (message too big)


def log_failure(message: str) -> None:
    """Log the exception being handled with its traceback but without its text.

    A bug in measurement may quote what it choked on (audio, a transcript, a header)
    in its message; the log keeps the type and where it was raised, never that.
    """
    exc = sys.exc_info()[1]
    if exc is None:
        log.error("%s", message)
        return
    where = "".join(traceback.format_tb(exc.__traceback__))
    log.error("%s: %s (message withheld)\n%s", message, type(exc).__name__, where.rstrip())


def _no_subprotocol(protocol: ServerProtocol, offered: Sequence[Subprotocol]) -> None:
    del protocol, offered


def _handshake_rejection(request: Request) -> Response | None:
    """The HTTP error answer to a caller's request that is not a valid websocket
    handshake (RFC 6455 4.2.1: method, HTTP/1.1, Upgrade, Connection, key, version 13),
    or None when it is valid.

    websockets' own checks run on a scratch protocol, so that the call's protocol still
    answers a valid request later, with the subprotocol the agent picks.
    """
    probe = ServerProtocol(select_subprotocol=_no_subprotocol)
    response = probe.accept(request)
    return None if response.status_code == 101 else response


class EndCause(enum.StrEnum):
    """How the call ended, as the transport saw it."""

    CALLER_CLOSED = "caller_closed"
    AGENT_CLOSED = "agent_closed"
    CALLER_VANISHED = "caller_vanished"
    AGENT_VANISHED = "agent_vanished"
    UPSTREAM_REFUSED = "upstream_refused"
    UPSTREAM_UNREACHABLE = "upstream_unreachable"
    UPSTREAM_TIMEOUT = "upstream_timeout"
    MESSAGE_TOO_BIG = "message_too_big"
    IDLE_TIMEOUT = "idle_timeout"
    PROXY_SHUTDOWN = "proxy_shutdown"
    PROXY_ERROR = "proxy_error"
    BAD_REQUEST = "bad_request"  # the caller's handshake was not a valid websocket request
    OVER_CAPACITY = "over_capacity"  # refused with 503: max_calls calls were in progress
    HEALTH_CHECK = "health_check"  # a plain GET of HEALTH_PATH, answered 200: not a call


@dataclass(slots=True)
class EndInfo:
    cause: EndCause
    caller_code: int | None = None
    agent_code: int | None = None
    upstream_status: int | None = None
    initiator: str = "none"  # "caller", "agent", "proxy" or "none"


class CallObserver(Protocol):
    """What the relay tells the measurement side. Implementations must be cheap."""

    def upstream_headers(self, request: Request) -> Iterable[tuple[str, str]]:
        """Extra headers for our handshake to the agent (e.g. trace context)."""
        ...

    def on_upstream_open(self, t_ns: int, status: int) -> None: ...

    def on_message(self, direction: Direction, payload: bytes | str, t_ns: int) -> bool | None:
        """Measure one message. True: it carried media; False: it did not (the call is
        idle if nothing else does); None: cannot tell (the relay counts it as media)."""
        ...

    def on_end(self, t_ns: int, info: EndInfo) -> None: ...


ObserverFactory = Callable[[int], CallObserver]


@dataclass(frozen=True, slots=True)
class RelayConfig:
    upstream: str  # ws:// or wss:// URL of the agent
    pass_path: bool | None = None  # None: pass the caller's path when the upstream has none
    pass_query: bool = True  # the caller's query goes on to the agent, after the upstream's
    max_message_bytes: int | None = 1 << 20
    handshake_timeout_s: float = 10.0
    close_timeout_s: float = 5.0
    idle_timeout_s: float | None = None
    upstream_ssl: ssl.SSLContext | None = None
    max_calls: int | None = None  # calls in progress at most; more are refused with 503
    stall_timeout_s: float | None = 30.0  # a peer that reads nothing this long is gone
    parsed: WebSocketURI = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parsed", parse_uri(self.upstream))

    def upstream_resource(self, caller_path: str) -> str:
        """The path and query to request from the agent for a caller's ``caller_path``.

        The path: the upstream's, with the caller's appended when ``pass_path`` (by
        default, when the upstream URL has no path of its own). The query: the
        upstream's, then the caller's unless ``pass_query`` is off.
        """
        base = self.parsed
        base_path = base.path or "/"
        passing = self.pass_path if self.pass_path is not None else base_path in ("", "/")
        parts = urlsplit(caller_path)
        path = base_path.rstrip("/") + (parts.path or "/") if passing else base_path
        caller_query = parts.query if self.pass_query else ""
        query = "&".join(q for q in (base.query, caller_query) if q)
        return path + ("?" + query if query else "")


class Admission:
    """Calls in progress against ``RelayConfig.max_calls``, and the callers refused.

    ``overloaded``, when set, says why the proxy would not serve a new call
    transparently now (its measured load: event-loop lag), or None: a caller is then
    refused as over capacity too (counted in ``refused`` and ``refused_overloaded``)."""

    __slots__ = ("active", "limit", "overloaded", "reason", "refused", "refused_overloaded")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.active = 0
        self.refused = 0
        self.refused_overloaded = 0
        self.overloaded: Callable[[], str | None] | None = None
        self.reason = ""  # why the last caller was refused

    def admit(self) -> bool:
        if self.limit is not None and self.active >= self.limit:
            self.refused += 1
            self.reason = f"at capacity ({self.limit} calls in progress)"
            return False
        why = self.overloaded() if self.overloaded is not None else None
        if why is not None:
            self.refused += 1
            self.refused_overloaded += 1
            self.reason = f"overloaded ({why})"
            return False
        self.active += 1
        return True

    def release(self) -> None:
        self.active -= 1


class _Leg(asyncio.Protocol):
    """One TCP connection of a call; forwards everything to its relay."""

    __slots__ = ("direction", "relay", "transport")

    def __init__(self, relay: Relay | None, direction: Direction) -> None:
        self.relay = relay
        self.direction = direction  # the direction of the messages this leg *receives*
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but quack alike.
        self.transport = transport = cast(asyncio.Transport, transport)
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        if self.relay is not None:
            self.relay.leg_made(self)

    def data_received(self, data: bytes) -> None:
        if self.relay is not None:
            self.relay.data(self, data)

    def eof_received(self) -> bool | None:
        if self.relay is not None:
            self.relay.eof(self)
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.relay is not None:
            self.relay.lost(self)

    def pause_writing(self) -> None:
        if self.relay is not None:
            self.relay.backpressure(self, True)

    def resume_writing(self) -> None:
        if self.relay is not None:
            self.relay.backpressure(self, False)


class Relay:
    """One call: the caller's leg, the agent's leg, and what passes between them."""

    def __init__(
        self,
        config: RelayConfig,
        observer_factory: ObserverFactory,
        registry: set[Relay],
        admission: Admission | None = None,
    ) -> None:
        self.config = config
        self._factory = observer_factory
        self._registry = registry
        self._admission = admission
        self._admitted = False
        self.loop = asyncio.get_running_loop()
        self.t_start_ns = time.monotonic_ns()
        self.observer: CallObserver | None = None
        self.caller = _Leg(self, CALLER_TO_AGENT)
        self.agent: _Leg | None = None
        self.server = ServerProtocol(
            max_size=config.max_message_bytes,
            select_subprotocol=self._subprotocol_selector(),
        )
        self.client: ClientProtocol | None = None
        self.request: Request | None = None
        self._agent_subprotocol: Subprotocol | None = None
        self._frags: list[list[bytes]] = [[], []]
        self._frag_text = [False, False]
        self._frag_count = [0, 0]  # frames of the message in progress, per direction
        self._caller_gone = False
        self._agent_gone = False
        self._connect_task: asyncio.Task[None] | None = None
        self._timers: list[asyncio.TimerHandle] = []
        self._idle_handle: asyncio.TimerHandle | None = None
        self._stalls: list[asyncio.TimerHandle | None] = [None, None]  # caller leg, agent leg
        self._last_activity = time.monotonic()
        self._end: EndInfo | None = None
        self._ended = False
        self.observer_errors = 0

    # -- leg callbacks -------------------------------------------------------------------

    def leg_made(self, leg: _Leg) -> None:
        if leg is self.caller:
            # Registered only now: over TLS the protocol exists from the accept, but a
            # failed TLS handshake never calls connection_made (nor connection_lost).
            self._registry.add(self)
            self._arm_idle()
            timeout = self.config.handshake_timeout_s
            self._timers.append(self.loop.call_later(timeout, self._request_deadline))
        else:
            self.agent = leg

    def data(self, leg: _Leg, data: bytes) -> None:
        # (Bytes are not activity: only a whole message with media is, see _measure.)
        t_ns = time.monotonic_ns()
        if leg is self.caller:
            self.server.receive_data(data)
            self._caller_events(self.server.events_received(), t_ns)
            self._flush_caller()
        elif self.client is not None:
            self.client.receive_data(data)
            self._agent_events(self.client.events_received(), t_ns)
            self._flush_agent()

    def eof(self, leg: _Leg) -> None:
        if leg is self.caller:
            self.server.receive_eof()
            self._flush_caller()
        elif self.client is not None:
            self.client.receive_eof()
            self._flush_agent()

    def lost(self, leg: _Leg) -> None:
        t_ns = time.monotonic_ns()
        # Reading from the other leg may have been paused for this one: resume it, so that
        # the close handshake on that leg can complete.
        other = self.agent if leg is self.caller else self.caller
        if other is not None and other.transport is not None and not other.transport.is_closing():
            other.transport.resume_reading()
        if leg is self.caller:
            self._caller_gone = True
            if self.server.close_rcvd is None and self._end is None:
                # The caller went away without a close frame.
                self._set_end(EndInfo(EndCause.CALLER_VANISHED, initiator="caller"))
            self._close_agent(CloseCode.GOING_AWAY, "caller went away")
        else:
            self._agent_gone = True
            client = self.client
            if client is not None and client.close_rcvd is None:
                if client.state is State.CONNECTING:
                    self._refuse(
                        502,
                        "agent closed the connection during the handshake",
                        EndCause.UPSTREAM_UNREACHABLE,
                    )
                else:
                    self._set_end(EndInfo(EndCause.AGENT_VANISHED, initiator="agent"))
                    self._close_caller(CloseCode.BAD_GATEWAY, "agent connection lost")
        self._maybe_finish(t_ns)

    def backpressure(self, leg: _Leg, paused: bool) -> None:
        # The leg we write to is full: stop reading from the other one until it drains.
        side = 0 if leg is self.caller else 1
        handle = self._stalls[side]
        if handle is not None:
            handle.cancel()
            self._stalls[side] = None
        timeout = self.config.stall_timeout_s
        if paused and timeout is not None and not self._ended:
            self._stalls[side] = self.loop.call_later(timeout, self._stalled, leg)
        other = self.agent if leg is self.caller else self.caller
        if other is None or other.transport is None or other.transport.is_closing():
            return
        if paused:
            other.transport.pause_reading()
        else:
            other.transport.resume_reading()

    def _stalled(self, leg: _Leg) -> None:
        """``leg``'s peer has read nothing for ``stall_timeout_s``: drop it as gone."""
        if leg is self.caller:
            self._stalls[0] = None
            self._set_end(EndInfo(EndCause.CALLER_VANISHED, initiator="proxy"))
        else:
            self._stalls[1] = None
            self._set_end(EndInfo(EndCause.AGENT_VANISHED, initiator="proxy"))
        log.info("the %s stopped reading: its connection is dropped", leg.direction.short)
        if leg.transport is not None:
            leg.transport.abort()  # lost() then closes the other leg as for a vanished peer

    # -- caller side ---------------------------------------------------------------------

    def _caller_events(self, events: list[Request | Frame | Response], t_ns: int) -> None:
        for ev in events:
            if isinstance(ev, Request):
                self._on_request(ev, t_ns)
            elif isinstance(ev, Frame):
                self._forward(ev, CALLER_TO_AGENT, t_ns)
        if self.server.state is State.CLOSING and self.server.close_sent is not None:
            code = self.server.close_sent.code
            if code == CloseCode.MESSAGE_TOO_BIG and self.server.close_rcvd is None:
                self._set_end(
                    EndInfo(EndCause.MESSAGE_TOO_BIG, caller_code=code, initiator="caller")
                )
                self._close_agent(CloseCode.MESSAGE_TOO_BIG, "caller message too big")
        if self.request is None and self.server.handshake_exc is not None:
            self._set_end(EndInfo(EndCause.BAD_REQUEST, initiator="caller"))

    def _request_deadline(self) -> None:
        # A caller that never completes its handshake request holds a socket: drop it.
        if self.request is None and not self._caller_gone:
            self._set_end(EndInfo(EndCause.BAD_REQUEST, initiator="caller"))
            self._abort_caller()

    def _on_request(self, request: Request, t_ns: int) -> None:
        self.request = request
        # Everything about the caller's request is checked before anything is spent on it:
        # no admission slot, no measurement, no connection to the agent, no receipt.
        if request.path == HEALTH_PATH and "Upgrade" not in request.headers:
            self._answer_health()
            return
        rejection = _handshake_rejection(request)
        if rejection is not None:
            self._set_end(EndInfo(EndCause.BAD_REQUEST, initiator="caller"))
            self.server.send_response(rejection)
            self._flush_caller()
            return
        admission = self._admission
        if admission is not None:
            if not admission.admit():
                self._over_capacity(admission)
                return
            self._admitted = True
        try:
            self.observer = self._factory(self.t_start_ns)
        except Exception:
            log_failure("observer factory failed; the call is forwarded unmeasured")
            self.observer = None
        self._connect_task = self.loop.create_task(self._connect_upstream(request))
        self._connect_task.add_done_callback(self._connect_done)

    def _connect_done(self, task: asyncio.Task[None]) -> None:
        del task
        self._maybe_finish(time.monotonic_ns())

    def _answer_health(self) -> None:
        self._set_end(EndInfo(EndCause.HEALTH_CHECK, initiator="caller"))
        body = b"ok\n"
        headers = Headers(
            [
                ("Content-Type", "text/plain; charset=utf-8"),
                ("Content-Length", str(len(body))),
                ("Connection", "close"),
                ("Cache-Control", "no-store"),
            ]
        )
        self.server.send_response(Response(200, "OK", headers, body))
        self._flush_caller()

    def _over_capacity(self, admission: Admission) -> None:
        n = admission.refused
        if n & (n - 1) == 0:  # the 1st, 2nd, 4th, 8th ... refusal: a log line, not a flood
            log.warning(
                "%s: caller refused with 503 (%d refused so far)",
                admission.reason,
                n,
            )
        text = f"voxproxy: {admission.reason}; try again later"
        self._refuse(503, text, EndCause.OVER_CAPACITY, Headers([("Retry-After", "1")]))

    def _subprotocol_selector(
        self,
    ) -> Callable[[ServerProtocol, Sequence[Subprotocol]], Subprotocol | None]:
        relay = weakref.ref(self)  # the protocol must not keep its relay alive (see _release)

        def select(protocol: ServerProtocol, offered: Sequence[Subprotocol]) -> Subprotocol | None:
            del protocol, offered
            found = relay()
            return None if found is None else found._agent_subprotocol  # the agent's choice

        return select

    async def _connect_upstream(self, request: Request) -> None:
        cfg = self.config
        uri = cfg.parsed
        offered = [
            Subprotocol(p.strip())
            for value in request.headers.get_all("Sec-WebSocket-Protocol")
            for p in value.split(",")
            if p.strip()
        ]
        client = ClientProtocol(uri, subprotocols=offered or None, max_size=cfg.max_message_bytes)
        self.client = client
        out = client.connect()
        out.path = cfg.upstream_resource(request.path)
        for name, value in request.headers.raw_items():
            lower = name.lower()
            if lower in _HOP_REQUEST_HEADERS:
                continue
            if lower == "authorization" and uri.user_info is not None:
                continue  # credentials in the upstream URL win
            out.headers[name] = value
        if self.observer is not None:
            try:
                extra = list(self.observer.upstream_headers(request))
                for name in {name.lower() for name, _ in extra}:
                    if name in out.headers:
                        del out.headers[name]  # ours replace a caller's (no duplicates)
                for name, value in extra:
                    out.headers[name] = value
            except Exception:
                self._observer_failed()
        leg = _Leg(self, AGENT_TO_CALLER)
        ssl_ctx: ssl.SSLContext | None = None
        if uri.secure:
            ssl_ctx = cfg.upstream_ssl or ssl.create_default_context()
        try:
            await asyncio.wait_for(
                self.loop.create_connection(
                    lambda: leg,
                    uri.host,
                    uri.port,
                    ssl=ssl_ctx,
                    server_hostname=uri.host if ssl_ctx else None,
                ),
                timeout=cfg.handshake_timeout_s,
            )
        except TimeoutError:
            self._refuse(504, "agent did not answer in time", EndCause.UPSTREAM_TIMEOUT)
            return
        except asyncio.CancelledError:
            return
        except OSError as exc:
            if exc.errno in FD_ERRNOS:
                FD_ALARM.hit("connecting to the agent")
            reason = f"agent unreachable: {exc.strerror or exc}"
            self._refuse(502, reason, EndCause.UPSTREAM_UNREACHABLE)
            return
        self.agent = leg
        if self._caller_gone:
            self._abort_agent()
            return
        client.send_request(out)
        self._flush_agent()
        self._timers.append(self.loop.call_later(cfg.handshake_timeout_s, self._handshake_deadline))

    def _handshake_deadline(self) -> None:
        if self.client is not None and self.client.state is State.CONNECTING:
            self._abort_agent()
            reason = "agent did not complete the handshake in time"
            self._refuse(504, reason, EndCause.UPSTREAM_TIMEOUT)

    def _refuse(
        self, status: int, text: str, cause: EndCause, headers: Headers | None = None
    ) -> None:
        """Answer the caller's handshake with an HTTP error."""
        refused = cause is EndCause.UPSTREAM_REFUSED
        self._set_end(
            EndInfo(
                cause,
                upstream_status=status if refused else None,
                initiator="agent" if refused else "proxy",
            )
        )
        if self.server.state is State.CONNECTING and not self._caller_gone:
            response = self.server.reject(status, text + "\n")
            if headers is not None:
                for name, value in headers.raw_items():
                    lower = name.lower()
                    if lower not in _HOP_RESPONSE_HEADERS and lower != "content-type":
                        response.headers[name] = value
            self.server.send_response(response)
            self._flush_caller()
        self._maybe_finish(time.monotonic_ns())

    # -- agent side ----------------------------------------------------------------------

    def _agent_events(self, events: list[Request | Frame | Response], t_ns: int) -> None:
        client = self.client
        assert client is not None
        for ev in events:
            if isinstance(ev, Response):
                self._on_response(ev, t_ns)
            elif isinstance(ev, Frame):
                self._forward(ev, AGENT_TO_CALLER, t_ns)
        if client.state is State.CLOSING and client.close_sent is not None:
            code = client.close_sent.code
            if code == CloseCode.MESSAGE_TOO_BIG and client.close_rcvd is None:
                self._set_end(EndInfo(EndCause.MESSAGE_TOO_BIG, agent_code=code, initiator="agent"))
                self._close_caller(CloseCode.MESSAGE_TOO_BIG, "agent message too big")

    def _on_response(self, response: Response, t_ns: int) -> None:
        client = self.client
        assert client is not None
        exc = client.handshake_exc
        if exc is not None or response.status_code != 101:
            status = response.status_code if response.status_code != 101 else 502
            body = (response.body or b"").decode("utf-8", "replace").strip() or "refused"
            if isinstance(exc, InvalidStatus) or response.status_code != 101:
                self._refuse(status, body[:200], EndCause.UPSTREAM_REFUSED, response.headers)
            else:
                self._refuse(502, f"agent handshake invalid: {exc}", EndCause.UPSTREAM_UNREACHABLE)
            return
        self._agent_subprotocol = client.subprotocol
        if self.server.state is not State.CONNECTING or self.request is None:
            return
        accept = self.server.accept(self.request)
        for name, value in response.headers.raw_items():
            if name.lower() not in _HOP_RESPONSE_HEADERS:
                accept.headers[name] = value
        self.server.send_response(accept)
        self._flush_caller()
        if self.observer is not None:
            try:
                self.observer.on_upstream_open(t_ns, response.status_code)
            except Exception:
                self._observer_failed()

    # -- forwarding ----------------------------------------------------------------------

    def _forward(self, frame: Frame, direction: Direction, t_ns: int) -> None:
        opcode = frame.opcode
        if direction is CALLER_TO_AGENT:
            dst = self.client
            dst_ok = dst is not None and dst.state is State.OPEN and not self._agent_gone
        else:
            dst = self.server  # type: ignore[assignment]
            dst_ok = self.server.state is State.OPEN and not self._caller_gone
        if opcode is Opcode.TEXT or opcode is Opcode.BINARY or opcode is Opcode.CONT:
            count = self._frag_count[direction] + 1
            self._frag_count[direction] = 0 if frame.fin else count
            if count > MAX_FRAGMENTS:
                self._too_many_fragments(direction)
                return
            if not dst_ok:
                # The other side is gone or closing: nothing is forwarded, so nothing is
                # measured either (a flooding peer must not be read into memory for the
                # close timeout, see _stalled).
                self._frags[direction].clear()
                return
            assert dst is not None
            if opcode is Opcode.TEXT:
                dst.send_text(frame.data, fin=frame.fin)
            elif opcode is Opcode.BINARY:
                dst.send_binary(frame.data, fin=frame.fin)
            else:
                dst.send_continuation(frame.data, fin=frame.fin)
            if direction is CALLER_TO_AGENT:
                self._flush_agent()
            else:
                self._flush_caller()
            self._measure(frame, direction, t_ns)
        elif opcode is Opcode.CLOSE:
            close = Close.parse(frame.data) if frame.data else Close(CloseCode.NO_STATUS_RCVD, "")
            if direction is CALLER_TO_AGENT:
                self._set_end(EndInfo(EndCause.CALLER_CLOSED, close.code, initiator="caller"))
                self._close_agent(close.code, close.reason)
            else:
                info = EndInfo(EndCause.AGENT_CLOSED, agent_code=close.code, initiator="agent")
                self._set_end(info)
                self._close_caller(close.code, close.reason)
        # Pings and pongs are answered per hop by the sans-I/O protocol.

    def _too_many_fragments(self, direction: Direction) -> None:
        """A message in more than MAX_FRAGMENTS frames: closed as too big (1009) both ways."""
        self._frags[direction].clear()
        self._frag_count[direction] = 0
        log.info("the %s sent a message in too many fragments: call closed", direction.short)
        if direction is CALLER_TO_AGENT:
            if self.server.state is State.OPEN:
                self.server.fail(CloseCode.MESSAGE_TOO_BIG, "too many fragments")
                self._flush_caller()
        elif self.client is not None and self.client.state is State.OPEN:
            self.client.fail(CloseCode.MESSAGE_TOO_BIG, "too many fragments")
            self._flush_agent()

    def _measure(self, frame: Frame, direction: Direction, t_ns: int) -> None:
        observer = self.observer
        if observer is None:
            if frame.fin:
                self._last_activity = time.monotonic()
            return
        frags = self._frags[direction]
        if frame.opcode is not Opcode.CONT:
            self._frag_text[direction] = frame.opcode is Opcode.TEXT
        if not frame.fin:
            frags.append(bytes(frame.data))
            return
        data = bytes(frame.data)
        if frags:
            frags.append(data)
            data = b"".join(frags)
            frags.clear()
        payload: bytes | str = data
        if self._frag_text[direction]:
            payload = data.decode("utf-8", "replace")
        try:
            media = observer.on_message(direction, payload, t_ns)
        except Exception:
            media = None
            self._observer_failed()
        if media is not False:
            self._last_activity = time.monotonic()

    def _observer_failed(self) -> None:
        self.observer_errors += 1
        if self.observer_errors == 1:
            log_failure("measurement failed; the call goes on")

    # -- closing -------------------------------------------------------------------------

    def _close_agent(self, code: int, reason: str) -> None:
        client = self.client
        if client is None or self.agent is None or self._agent_gone:
            if self._connect_task is not None and not self._connect_task.done():
                self._connect_task.cancel()
            return
        if client.state is State.OPEN:
            if code in _UNSENDABLE_CODES:
                client.send_close()
            else:
                client.send_close(code, reason)
            self._flush_agent()
            timeout = self.config.close_timeout_s
            self._timers.append(self.loop.call_later(timeout, self._abort_agent))
        elif client.state is State.CONNECTING:
            self._abort_agent()

    def _close_caller(self, code: int, reason: str) -> None:
        server = self.server
        if self._caller_gone:
            return
        if server.state is State.OPEN:
            if code in _UNSENDABLE_CODES:
                server.send_close()
            else:
                server.send_close(code, reason)
            self._flush_caller()
            timeout = self.config.close_timeout_s
            self._timers.append(self.loop.call_later(timeout, self._abort_caller))
        elif server.state is State.CONNECTING:
            self._refuse(502, reason or "agent failed", EndCause.PROXY_ERROR)

    def _abort_agent(self) -> None:
        if self.agent is not None and self.agent.transport is not None:
            self.agent.transport.abort()

    def _abort_caller(self) -> None:
        if self.caller.transport is not None:
            self.caller.transport.abort()

    def shutdown(self, code: int = CloseCode.GOING_AWAY, reason: str = "proxy shutdown") -> None:
        """Close both legs (graceful proxy shutdown)."""
        self._set_end(EndInfo(EndCause.PROXY_SHUTDOWN, initiator="proxy"))
        if self.server.state is State.CONNECTING and not self._caller_gone:
            # Still in the handshake: there is no websocket to close with 1001 yet.
            if self.request is None:
                self._abort_caller()
            else:
                self._refuse(503, "voxproxy is shutting down", EndCause.PROXY_SHUTDOWN)
        else:
            self._close_caller(code, reason)
        self._close_agent(code, reason)

    def _flush_caller(self) -> None:
        transport = self.caller.transport
        for chunk in self.server.data_to_send():
            if transport is None or transport.is_closing():
                continue
            if chunk is SEND_EOF or chunk == b"":
                transport.close()  # a server closes the TCP connection first (RFC 6455 7.1.1)
            else:
                transport.write(chunk)

    def _flush_agent(self) -> None:
        client = self.client
        leg = self.agent
        if client is None or leg is None:
            return
        transport = leg.transport
        for chunk in client.data_to_send():
            if transport is None or transport.is_closing():
                continue
            if chunk is SEND_EOF or chunk == b"":
                if transport.can_write_eof():
                    transport.write_eof()
                else:
                    transport.close()
            else:
                transport.write(chunk)
        if client.state is State.CLOSED and transport is not None and not transport.is_closing():
            transport.close()

    def _set_end(self, info: EndInfo) -> None:
        if self._end is None:
            self._end = info

    def _arm_idle(self) -> None:
        timeout = self.config.idle_timeout_s
        if timeout is None:
            return
        self._idle_handle = self.loop.call_later(timeout, self._idle_check)

    def _idle_check(self) -> None:
        timeout = self.config.idle_timeout_s
        assert timeout is not None
        idle = time.monotonic() - self._last_activity
        if idle >= timeout:
            self._set_end(EndInfo(EndCause.IDLE_TIMEOUT, initiator="proxy"))
            self._close_caller(CloseCode.GOING_AWAY, "idle timeout")
            self._close_agent(CloseCode.GOING_AWAY, "idle timeout")
        else:
            self._idle_handle = self.loop.call_later(timeout - idle, self._idle_check)

    def _maybe_finish(self, t_ns: int) -> None:
        """Report the end once both sockets are gone (or the agent's was never opened)."""
        if self._ended or not self._caller_gone:
            return
        connecting = self._connect_task is not None and not self._connect_task.done()
        if connecting or (self.agent is not None and not self._agent_gone):
            return
        self._ended = True
        if self._admitted and self._admission is not None:
            self._admission.release()
        for timer in self._timers:
            timer.cancel()
        if self._idle_handle is not None:
            self._idle_handle.cancel()
        for stall in self._stalls:
            if stall is not None:
                stall.cancel()
        self._registry.discard(self)
        info = self._end or EndInfo(EndCause.PROXY_ERROR, initiator="none")
        if info.caller_code is None and self.server.close_rcvd is not None:
            info.caller_code = self.server.close_rcvd.code
        elif info.caller_code is None and self.server.close_sent is not None:
            info.caller_code = self.server.close_sent.code
        client = self.client
        if client is not None and info.agent_code is None:
            if client.close_rcvd is not None:
                info.agent_code = client.close_rcvd.code
            elif client.close_sent is not None:
                info.agent_code = client.close_sent.code
        if self.observer is not None:
            try:
                self.observer.on_end(t_ns, info)
            except Exception:
                self._observer_failed()
        self._release()

    def _release(self) -> None:
        """The call is over: let go of what it held, so that reference counting frees it
        at once (its measurement above all) instead of the cyclic garbage collector, some
        time later. Nothing calls back into the relay after this: both sockets are gone."""
        self.observer = None
        self.caller.relay = None
        if self.agent is not None:
            self.agent.relay = None
        self._connect_task = None
        self._timers.clear()
        self._idle_handle = None
        self._stalls = [None, None]


class RelayServer:
    """Accepts callers and runs one :class:`Relay` per call."""

    def __init__(self, config: RelayConfig, observer_factory: ObserverFactory) -> None:
        self.config = config
        self.observer_factory = observer_factory
        self.relays: set[Relay] = set()
        self.admission = Admission(config.max_calls)
        self.server: asyncio.Server | None = None

    def _protocol(self) -> _Leg:
        relay = Relay(self.config, self.observer_factory, self.relays, self.admission)
        return relay.caller

    async def start(
        self,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None = None,
        *,
        reuse_port: bool = False,
    ) -> int:
        """Listen; ``reuse_port`` shares the port with other processes (SO_REUSEPORT)."""
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(
            self._protocol, host, port, ssl=ssl_context, reuse_port=reuse_port or None
        )
        sock = self.server.sockets[0]
        return int(sock.getsockname()[1])

    async def stop(self, drain_s: float = 0.0) -> None:
        """Stop accepting; let calls finish for ``drain_s``; then close the rest."""
        if self.server is not None:
            self.server.close()
        deadline = time.monotonic() + drain_s
        while self.relays and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for relay in list(self.relays):
            relay.shutdown()
        deadline = time.monotonic() + self.config.close_timeout_s + 1.0
        while self.relays and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        for relay in list(self.relays):
            relay._abort_caller()
            relay._abort_agent()
        if self.server is not None:
            with contextlib.suppress(Exception):
                await self.server.wait_closed()
