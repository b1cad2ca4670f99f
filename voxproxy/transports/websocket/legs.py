"""A call's two connections and its end, beneath the :class:`~.relay.Relay`.

:class:`Leg` is one TCP connection (an asyncio protocol that hands everything to
its relay). :class:`CallLegs` holds a call's state and what ends it: writing what
websockets' protocols have to send to each leg, closing and aborting the legs, a
refusal at the handshake, the idle timer, and reporting the end to the observer
once both sockets are gone. The relay adds what passes between the legs.

How a call ends, whichever leg fails first: the call is over once both sockets are
gone, so every way a leg fails must lead there, with the other side told.

* A close frame from a peer goes to the other side (:meth:`Relay._forward`); a
  protocol error of a peer (websockets' protocol fails the leg: 1002, 1007, 1009) tells
  the other side too (:meth:`CallLegs._check_failed`): the caller gets 1014 (bad
  gateway) for an agent's error, the agent the code the caller's error was failed with.
* Once a close frame was sent on a leg, by the relay or by the leg's protocol, the
  leg's peer has ``close_timeout_s`` to close its TCP connection
  (:meth:`CallLegs._close_deadline`); then it is aborted. Without this an agent that
  erred or closed but kept its socket open held the call, its admission slot and its
  receipt for as long as it liked (a client waits for the server to close TCP first,
  RFC 6455 7.1.1).
* A leg that vanishes (EOF, reset) closes the other side (``lost``); a peer that
  reads nothing is dropped after ``stall_timeout_s``; a failed handshake to the agent
  answers the caller with an HTTP error.
* A message that cannot be forwarded because the other leg is not open (still in its
  handshake, closing, gone) is counted (:attr:`CallLegs.undelivered`; the receipt's
  anomaly ``undelivered``).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from websockets.client import ClientProtocol
from websockets.datastructures import Headers
from websockets.frames import CloseCode
from websockets.http11 import Request
from websockets.protocol import SEND_EOF, State
from websockets.server import ServerProtocol
from websockets.typing import Subprotocol

from voxproxy.core.events import Direction
from voxproxy.transports.ends import EndCause
from voxproxy.transports.websocket.arrivals import ArrivalLog, ForwardDelays
from voxproxy.transports.websocket.config import Admission, RelayConfig
from voxproxy.transports.websocket.handshake import pass_response_headers
from voxproxy.transports.websocket.leg import (
    RATE,
    Leg,
    log,
    log_failure,
)
from voxproxy.transports.websocket.observer import (
    CallObserver,
    EndInfo,
    ObserverFactory,
)

_UNSENDABLE_CODES = frozenset({1005, 1006, 1015})
_PEER = ("caller", "agent")


class CallLegs:
    """One call's state, its two legs, and its end (the :class:`Relay` forwards)."""

    caller: Leg  # the caller's connection, made by the relay (its callbacks are there)

    def __init__(
        self,
        config: RelayConfig,
        observer_factory: ObserverFactory,
        registry: set[Any],  # the server's calls in progress (its Relay objects)
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
        self.agent: Leg | None = None
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
        # Messages that could not be forwarded: the other leg was not open.
        self.undelivered = 0
        # How much each message's arrival stamp is worth, and the proxy's forwarding delays
        # per direction (arrivals.py): handed to the observer with the end.
        self.arrivals = ArrivalLog()
        self.forwarded = (ForwardDelays(), ForwardDelays())
        self._close_sent = [False, False]  # a close went on the leg (caller, agent): seen
        self._deadlines = [False, False]  # the leg's close deadline is armed
        # Messages over config.max_messages_per_s in a direction's second: not measured.
        self.over_rate = [0, 0]  # per direction: messages
        self.over_rate_bytes = [0, 0]
        self._rate_start = [self.t_start_ns, self.t_start_ns]  # the direction's second
        self._rate_count = [0, 0]  # messages in it

    def _register(self) -> None:
        """The call counts among its server's calls from now until its end."""
        self._registry.add(self)

    def _subprotocol_selector(
        self,
    ) -> Callable[[ServerProtocol, Sequence[Subprotocol]], Subprotocol | None]:
        relay = weakref.ref(self)  # the protocol must not keep its relay alive (see _release)

        def select(protocol: ServerProtocol, offered: Sequence[Subprotocol]) -> Subprotocol | None:
            del protocol, offered
            found = relay()
            return None if found is None else found._agent_subprotocol  # the agent's choice

        return select

    def _observer_failed(self) -> None:
        self.observer_errors += 1
        if self.observer_errors == 1:
            log_failure("measurement failed; the call goes on")

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
                detail=f"{text} (the caller was answered HTTP {status})",
            )
        )
        if self.server.state is State.CONNECTING and not self._caller_gone:
            response = self.server.reject(status, text + "\n")
            if headers is not None:
                pass_response_headers(headers, response, content_type=False)
            self.server.send_response(response)
            self._flush_caller()
        self._maybe_finish(time.monotonic_ns())

    # -- closing -------------------------------------------------------------------------

    def _close_agent(self, code: int, reason: str) -> None:
        client = self.client
        if client is None or self.agent is None or self._agent_gone:
            if self._connect_task is not None and not self._connect_task.done():
                self._connect_task.cancel()
            return
        if client.state is State.OPEN:
            self._close_sent[1] = True
            self._send_close(client, code, reason, self._flush_agent)
        elif client.state is State.CONNECTING:
            self._abort_agent()

    def _close_caller(self, code: int, reason: str) -> None:
        server = self.server
        if self._caller_gone:
            return
        if server.state is State.OPEN:
            self._close_sent[0] = True
            self._send_close(server, code, reason, self._flush_caller)
        elif server.state is State.CONNECTING:
            self._refuse(502, reason or "agent failed", EndCause.PROXY_ERROR)

    def _send_close(
        self,
        protocol: ServerProtocol | ClientProtocol,
        code: int,
        reason: str,
        flush: Callable[[], None],
    ) -> None:
        """Send a close frame on an open leg (a code that may not be sent goes as none);
        the flush arms the leg's close deadline."""
        if code in _UNSENDABLE_CODES:
            protocol.send_close()
        else:
            protocol.send_close(code, reason)
        flush()

    def _close_deadline(self, side: int) -> None:
        """A close frame went on the leg (``side`` 0: the caller's, 1: the agent's): its
        peer has ``close_timeout_s`` to close the TCP connection, then it is aborted."""
        if self._deadlines[side] or self._ended:
            return
        self._deadlines[side] = True
        abort = self._abort_caller if side == 0 else self._abort_agent
        self._timers.append(self.loop.call_later(self.config.close_timeout_s, abort))

    def _over_rate(self, direction: Direction, size: int, t_ns: int) -> bool:
        """Whether a forwarded message is beyond ``max_messages_per_s`` in its direction
        (counted from the first message of each second): then it is not measured, only
        counted (:attr:`over_rate`), and the leg it came on is read no more until the
        second is over (what the read in hand still holds is forwarded all the same).
        Real-time audio is 50 or 100 messages a second and an agent's burst a few
        hundred; tens of thousands is a flood, not a workload: read and measured as it
        came, it would take the core every other call needs (and make the proxy refuse
        new callers as overloaded)."""
        limit = self.config.max_messages_per_s
        if limit is None:
            return False
        start = self._rate_start[direction]
        if t_ns - start >= 1_000_000_000:
            self._rate_start[direction] = t_ns
            self._rate_count[direction] = 1
            return False
        count = self._rate_count[direction] = self._rate_count[direction] + 1
        if count <= limit:
            return False
        if count == limit + 1:  # once a second: the leg waits for the next one
            leg = self.caller if direction == 0 else self.agent
            if leg is not None:
                leg.hold(RATE)
                wait_s = max(0.0, (start + 1_000_000_000 - time.monotonic_ns()) / 1e9)
                self._timers.append(self.loop.call_later(wait_s, leg.release, RATE))
            if not self.over_rate[direction]:
                log.warning(
                    "the %s sends over %d messages a second: those beyond are forwarded, "
                    "not measured (anomaly messages_over_rate), and it is read no faster",
                    _PEER[direction],
                    limit,
                )
        self.over_rate[direction] += 1
        self.over_rate_bytes[direction] += size
        return True

    def _check_failed(self, from_caller: bool) -> None:
        """After a leg's bytes went through its protocol: if the protocol failed the
        leg (it sent a close frame that neither the relay nor the peer asked for: a
        protocol error, a message too big), the call ends, and the other side is told."""
        side = 0 if from_caller else 1
        protocol = self.server if from_caller else self.client
        if protocol is None or self._close_sent[side]:
            return
        sent = protocol.close_sent
        if sent is None or protocol.close_rcvd is not None:
            return
        self._close_sent[side] = True
        code = sent.code
        too_big = code == CloseCode.MESSAGE_TOO_BIG
        cause = EndCause.MESSAGE_TOO_BIG if too_big else EndCause.PROTOCOL_ERROR
        what = "message too big" if too_big else "protocol error"
        log.info("the %s's connection failed (%s, %d): call closed", _PEER[side], what, code)
        if from_caller:
            self._set_end(EndInfo(cause, caller_code=code, initiator="caller"))
            self._close_agent(code, f"caller {what}")
        else:
            self._set_end(EndInfo(cause, agent_code=code, initiator="agent"))
            told = code if too_big else CloseCode.BAD_GATEWAY
            self._close_caller(told, f"agent {what}")

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
        if self.server.close_sent is not None:
            self._close_deadline(0)

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
        if client.close_sent is not None:
            self._close_deadline(1)

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
        last = self._last_activity
        if self.observer is not None:
            last = max(last, self.observer.last_media_s)  # (media measured after forwarding)
        idle = time.monotonic() - last
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
        info.undelivered = self.undelivered
        info.over_rate = (self.over_rate[0], self.over_rate[1])
        info.over_rate_bytes = (self.over_rate_bytes[0], self.over_rate_bytes[1])
        info.arrivals = self.arrivals
        info.forwarding = self.forwarded
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
