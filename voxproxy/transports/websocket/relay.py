"""One call: the caller's leg, the agent's leg, and the :class:`Relay` between them.

A leg's handshake goes through websockets' sans-I/O protocol for it; after it the
leg's stream is cut into frames by :mod:`.frames` and the relay routes each cut
("Reading a leg" below): a whole data frame is written to the other leg as the bytes
that came (a caller's with a fresh masking key of the relay's), any other frame goes
through the protocol and each data frame that comes out of it is written at once; only
then is a message handed to the observer (:meth:`Relay._deliver`). The handshake's HTTP
pieces are in :mod:`.handshake`, the settings in :mod:`.config`, the accepting server in
:mod:`.server`; the package docstring tells the whole story.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time

from websockets.client import ClientProtocol
from websockets.datastructures import Headers
from websockets.exceptions import InvalidStatus
from websockets.frames import Close, CloseCode, Frame, Opcode
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.server import ServerProtocol

from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Direction
from voxproxy.fdwatch import FD_ALARM, FD_ERRNOS
from voxproxy.health import HEALTH_PATHS, LIVE_PATH
from voxproxy.transports.ends import EndCause
from voxproxy.transports.websocket.config import (
    MAX_FRAGMENTS,
    Admission,
    RelayConfig,
)
from voxproxy.transports.websocket.frames import (
    Failure,
    FrameCutter,
    Handover,
    MaskKeys,
    Splice,
    masked_anew,
)
from voxproxy.transports.websocket.handshake import (
    RequestLine,
    add_own_headers,
    handshake_rejection,
    health_response,
    http_version_rejection,
    offered_subprotocols,
    pass_request_headers,
    pass_response_headers,
)
from voxproxy.transports.websocket.leg import Leg, LegMode, log, log_failure
from voxproxy.transports.websocket.legs import CallLegs
from voxproxy.transports.websocket.observer import EndInfo, ObserverFactory

# The keys the relay masks the caller's spliced frames with, as the agent's client (a
# forked worker draws its own: what its parent drew is forgotten at the fork).
_KEYS = MaskKeys(os.urandom)
os.register_at_fork(after_in_child=_KEYS.forget)


class Relay(CallLegs):
    """One call: the caller's leg, the agent's leg, and what passes between them."""

    def __init__(
        self,
        config: RelayConfig,
        observer_factory: ObserverFactory,
        registry: set[Relay],
        admission: Admission | None = None,
    ) -> None:
        super().__init__(config, observer_factory, registry, admission)
        self.caller = Leg(self, CALLER_TO_AGENT)
        # A fragmented message whose first frame went to the other side, per direction:
        # only its continuations follow it (one begun before the agent answered, or
        # while the other side could not take it, is dropped whole).
        self._forwarding = [False, False]
        # The caller's request line, held until it is whole (handshake.RequestLine).
        self._line: RequestLine | None = RequestLine()
        self._http10 = False  # ... and whether it said HTTP/1.0

    # -- leg callbacks -------------------------------------------------------------------

    def leg_made(self, leg: Leg) -> None:
        if leg is self.caller:
            # Registered only now: over TLS the protocol exists from the accept, but a
            # failed TLS handshake never calls connection_made (nor connection_lost).
            self._register()
            self._arm_idle()
            timeout = self.config.handshake_timeout_s
            self._timers.append(self.loop.call_later(timeout, self._request_deadline))
        else:
            self.agent = leg

    def data(self, leg: Leg, data: bytes) -> None:
        # (Bytes are not activity: only a whole message with media is, see _deliver.)
        t_ns = leg.rx_ns  # the read's arrival at the host (legs.Leg)
        mode = leg.mode
        if mode is LegMode.FRAMES:
            self._frames(leg, data, t_ns)
        elif mode is LegMode.HEAD:
            line = self._line
            if leg is self.caller and line is not None:
                data = line.feed(data)
                if not data:
                    return
                self._line, self._http10 = None, line.http10
            self._head(leg, data, t_ns)
        else:
            self._feed(leg, data, t_ns)

    def _feed(self, leg: Leg, data: bytes, t_ns: int) -> None:
        """Bytes through the leg's websockets protocol, and what comes out acted on."""
        protocol = self.server if leg is self.caller else self.client
        if protocol is None:
            return
        protocol.receive_data(data)
        events = protocol.events_received()
        if leg.rx_bound_ns and (len(events) > 1 or not (leg.rx_exact and leg.rx_end)):
            self.arrivals.note_bounded(t_ns, leg.rx_bound_ns, leg.rx_read_ns)  # (see _frames)
        if leg is self.caller:
            self._caller_events(events, t_ns)
            self._flush_caller()
        else:
            self._agent_events(events, t_ns)
            self._flush_agent()

    # -- reading a leg -------------------------------------------------------------------
    #
    # A leg's handshake head goes through websockets' protocol and not one byte after
    # it; from there the leg's FrameCutter (frames.py) cuts the stream and the relay
    # routes each cut: a whole valid data frame is spliced to the other leg (a caller's
    # under a fresh masking key, RFC 6455 5.3), then measured; any other frame goes
    # through the protocol whole; once the protocol stops parsing frames, the rest of
    # the leg goes through it as it comes. Why this is safe and what it saves: the
    # package docstring and docs/architecture.md, "Reading a leg".

    def _protocol(self, leg: Leg) -> ServerProtocol | ClientProtocol | None:
        return self.server if leg is self.caller else self.client

    @staticmethod
    def _parsing(protocol: ServerProtocol | ClientProtocol) -> bool:
        """Whether the protocol still reads frames as they come (the caller's while the
        agent has not answered yet too), so that the leg's frames may be cut for it."""
        state = protocol.state
        return state is State.OPEN or (state is State.CONNECTING and not protocol.eof_sent)

    def _head(self, leg: Leg, data: bytes, t_ns: int) -> None:
        """A read while the leg's handshake head is not yet whole."""
        protocol = self._protocol(leg)
        if protocol is None:
            return
        seen = leg.tail + data
        at = seen.find(b"\r\n\r\n")
        if at < 0:
            leg.tail = seen[-3:]
            self._feed(leg, data, t_ns)
            return
        cut = at + 4 - len(leg.tail)
        leg.tail = b""
        self._feed(leg, data[:cut], t_ns)
        rest = data[cut:]
        # The agent's leg is cut only once its 101 made it OPEN (a refusal's body is no
        # frame); the caller's from its request on, while the agent has yet to answer.
        opened = protocol.state is State.OPEN or leg is self.caller
        if (
            opened
            and self._parsing(protocol)
            and protocol.handshake_exc is None
            and not protocol.available_extensions
        ):
            leg.mode = LegMode.FRAMES
            leg.cutter = FrameCutter.for_leg(self.config, from_client=leg is self.caller)
            if rest:
                self._frames(leg, rest, t_ns)
        else:
            leg.mode = LegMode.PROTOCOL
            if rest:
                self._feed(leg, rest, t_ns)

    def _frames(self, leg: Leg, data: bytes, t_ns: int) -> None:
        """A read once the leg's frames are cut: each cut routed."""
        protocol = self._protocol(leg)
        cutter = leg.cutter
        if protocol is None or cutter is None:
            return
        cuts = cutter.feed(data)
        # Only a message that ends the read carries the read's stamp exactly (stamped.py):
        # one that queued behind others arrived up to rx_bound_ns before it.
        last = len(cuts) - 1 if leg.rx_exact and leg.rx_end and not cutter.pending else -1
        bound = leg.rx_bound_ns
        for i, cut in enumerate(cuts):
            if i != last and bound:
                self.arrivals.note_bounded(t_ns, bound, leg.rx_read_ns)
            if type(cut) is Splice:
                self._splice(leg, cut, t_ns)
            elif type(cut) is Handover:
                self._feed(leg, cut.data, t_ns)
                if not self._parsing(protocol):
                    after = cuts[cuts.index(cut) + 1 :]
                    rest = b"".join([c.data for c in after]) + cutter.pending
                    self._leave_frames(leg, rest, t_ns)
                    return
            elif type(cut) is Failure:
                self._fail(leg, protocol, cut, t_ns)
                return

    def _leave_frames(self, leg: Leg, rest: bytes, t_ns: int) -> None:
        """The rest of the leg goes through the protocol as it comes."""
        leg.mode = LegMode.PROTOCOL
        leg.cutter = None
        if rest:
            self._feed(leg, rest, t_ns)

    def _fail(
        self, leg: Leg, protocol: ServerProtocol | ClientProtocol, failure: Failure, t_ns: int
    ) -> None:
        """A frame's header broke the protocol: the leg's protocol fails the connection
        with the cutter's code (as it would have on that frame), and reads no more."""
        leg.mode = LegMode.PROTOCOL
        leg.cutter = None
        protocol.fail(failure.code, failure.reason)
        if leg is self.caller:
            self._caller_events([], t_ns)
            self._flush_caller()
        else:
            self._agent_events([], t_ns)
            self._flush_agent()

    def _splice(self, leg: Leg, cut: Splice, t_ns: int) -> None:
        """A whole data frame to the other leg (re-masked if it is the caller's), then
        measured."""
        direction = leg.direction
        if direction is CALLER_TO_AGENT:
            client = self.client
            if client is None or client.state is not State.OPEN or self._agent_gone:
                self.undelivered += 1  # the other side is not open: not forwarded, not measured
                return
            out = self.agent
        else:
            if self.server.state is not State.OPEN or self._caller_gone:
                self.undelivered += 1
                return
            out = self.caller
        transport = out.transport if out is not None else None
        if direction is CALLER_TO_AGENT:  # (with a key of our own: frames.masked_anew)
            data, payload = masked_anew(cut, _KEYS.take())
        else:
            data = cut.data
            payload = None
        if transport is not None and not transport.is_closing():
            transport.write(data)
            self.forwarded[direction].add(time.monotonic_ns() - t_ns)
        if self.observer is None:
            self._last_activity = time.monotonic()
            return
        if payload is None:
            payload = data[cut.head :]
        self._frag_text[direction] = cut.text
        self._deliver(direction, payload, t_ns)

    def eof(self, leg: Leg) -> None:
        if leg.mode is LegMode.FRAMES and leg.cutter is not None:
            # A frame cut short by the end of the stream: the protocol sees it, as before.
            self._leave_frames(leg, leg.cutter.pending, time.monotonic_ns())
        if leg is self.caller:
            self.server.receive_eof()
            self._flush_caller()
        elif self.client is not None:
            self.client.receive_eof()
            self._flush_agent()

    def lost(self, leg: Leg) -> None:
        t_ns = time.monotonic_ns()
        # Reading from the other leg may have been paused for this one: resume it, so that
        # the close handshake on that leg can complete.
        other = self.agent if leg is self.caller else self.caller
        if other is not None:
            other.backpressured(False)
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
                if client.state is State.CONNECTING or client.handshake_exc is not None:
                    self._refuse(
                        502,
                        "agent closed the connection during the handshake",
                        EndCause.UPSTREAM_UNREACHABLE,
                    )
                else:
                    self._set_end(EndInfo(EndCause.AGENT_VANISHED, initiator="agent"))
                    self._close_caller(CloseCode.BAD_GATEWAY, "agent connection lost")
        self._maybe_finish(t_ns)

    def backpressure(self, leg: Leg, paused: bool) -> None:
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
        if other is not None:
            other.backpressured(paused)

    def _stalled(self, leg: Leg) -> None:
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
        self._check_failed(True)
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
        if request.path in HEALTH_PATHS and "Upgrade" not in request.headers:
            self._answer_health(request.path)
            return
        rejection = handshake_rejection(request)
        if rejection is None and self._http10:
            rejection = http_version_rejection()
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

    def _answer_health(self, path: str) -> None:
        # Readiness says whether this process would admit a caller now; liveness only
        # that it answers.
        admission = self._admission
        refusal = None
        if path != LIVE_PATH and admission is not None:
            refusal = admission.refusal()
        self._set_end(EndInfo(EndCause.HEALTH_CHECK, initiator="caller"))
        self.server.send_response(health_response(refusal))
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

    async def _connect_upstream(self, request: Request) -> None:
        cfg = self.config
        uri = cfg.parsed
        offered = offered_subprotocols(request)
        client = ClientProtocol(uri, subprotocols=offered or None, max_size=cfg.max_message_bytes)
        self.client = client
        out = client.connect()
        out.path = cfg.upstream_resource(request.path)
        pass_request_headers(request, out, uri)
        if self.observer is not None:
            try:
                add_own_headers(out, self.observer.upstream_headers(request))
            except Exception:
                self._observer_failed()
        leg = Leg(self, AGENT_TO_CALLER)
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
            # "Connection refused", not asyncio's "Connect call failed (...)"; a name that
            # does not resolve keeps its resolver's words (negative errno).
            why = os.strerror(exc.errno) if exc.errno and exc.errno > 0 else exc.strerror
            reason = f"agent unreachable: {why or exc}"
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

    # -- agent side ----------------------------------------------------------------------

    def _agent_events(self, events: list[Request | Frame | Response], t_ns: int) -> None:
        client = self.client
        assert client is not None
        for ev in events:
            if isinstance(ev, Response):
                self._on_response(ev, t_ns)
            elif isinstance(ev, Frame):
                self._forward(ev, AGENT_TO_CALLER, t_ns)
        self._check_failed(False)

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
        pass_response_headers(response.headers, accept)
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
            if not dst_ok or (opcode is Opcode.CONT and not self._forwarding[direction]):
                # The other side is not open (yet, or any more), or was when the message
                # began: nothing is forwarded, so nothing is measured either (a flooding
                # peer must not be read into memory for the close timeout, see _stalled).
                # It is counted, once a message.
                self._frags[direction].clear()
                self._forwarding[direction] = False
                if frame.fin:
                    self.undelivered += 1
                return
            self._forwarding[direction] = not frame.fin
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
            self.forwarded[direction].add(time.monotonic_ns() - t_ns)
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
        self._deliver(direction, data, t_ns)

    def _deliver(self, direction: Direction, data: bytes, t_ns: int) -> None:
        """A whole message, forwarded: to the observer, as text if it came as text."""
        observer = self.observer
        if observer is None:
            self._last_activity = time.monotonic()
            return
        if self._over_rate(direction, len(data), t_ns):
            return  # forwarded, not measured (counted)
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
