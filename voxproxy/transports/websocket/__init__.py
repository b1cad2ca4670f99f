"""The websocket forwarding plane: a relay built on websockets' sans-I/O protocols.

Each call is two asyncio protocols (the caller's connection and ours to the
agent) joined by a :class:`Relay`. Each leg's handshake goes through that leg's
:class:`websockets.server.ServerProtocol` or :class:`websockets.client.ClientProtocol`.
After it the relay cuts the leg's stream into frames itself: a whole data frame (text
or binary, unfragmented, well formed) is written to the other leg as the very bytes
that came, but for a caller's masking key: the relay, the agent's client, masks each
frame to the agent with a fresh unpredictable key of its own (RFC 6455 5.3, 10.3: a
caller must not choose the bytes on the proxy's wire); every other frame goes through the
protocol, and every data frame that comes out of it is written to the other leg at
once, with its opcode and FIN bit; a frame whose header breaks the protocol fails the
leg at its header (1002, or 1009 over the size limit, as websockets would), without
waiting for the payload it declares. So messages arrive unchanged and in order
(fragmentation included). Pings are answered per hop; close codes and reasons are
carried across. No task runs per connection once the call is up, and the common
message never enters websockets' parser, which makes the relay alone cost about a third
less CPU a message than one passing every frame through the protocols
(docs/performance.md, "The forwarding plane cuts its own frames").

Only after a message has been forwarded does the relay hand a copy to its
:class:`CallObserver`, which measures; an observer that raises is counted and
ignored, never allowed to touch the call.

The caller's handshake request is checked completely first (RFC 6455 4.2.1:
``GET``, HTTP/1.1, ``Upgrade``/``Connection``, a 16-byte key, version 13): a
request that is not a valid websocket handshake is answered at once with
websockets' own 4xx/505, with no admission, no agent connection and no receipt.
A plain ``GET`` (no ``Upgrade``) of a health path is answered by the proxy itself
(:mod:`voxproxy.health`): ``/healthz`` and ``/readyz`` (readiness, a load balancer's
health check) ``200 ok`` while a caller would be admitted, else ``503`` with the
reason on one line (at capacity, overloaded); ``/livez`` (liveness) ``200 ok`` while
the process answers. A valid handshake is answered only once the agent has answered
ours, so the subprotocol the agent picked and its refusals pass through: a refusal
is mirrored with the agent's own HTTP status, an unreachable agent is a 502 and a
silent one a 504.

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
forwarded nor measured (only counted, :attr:`EndInfo.undelivered`), so a flooding
agent behind a dropped caller costs no memory during the close timeout.

Every way a leg fails ends the call (``legs``, "How a call ends"): a peer's protocol
error (websockets' protocol fails its leg) closes the other side too (the caller with
1014, the agent with the caller's failure code), and once a close frame went on a
leg, its peer has ``close_timeout_s`` to close its TCP connection before it is
aborted, so a peer that errs or closes but keeps its socket open cannot hold the
call, its admission slot and its receipt.

Calls share the event loop fairly: a leg hands the relay a big read (a peer ahead of
the proxy) a slice at a time within a budget per turn of the loop, its reading paused
until the next turn, so that every other call's reads go in between (``leg.Leg``).
And a direction carrying more than ``max_messages_per_s`` messages in a second is a
flood, not a workload: what is beyond is forwarded, counted in the traffic and as
:attr:`EndInfo.over_rate`, and not measured.

``idle_timeout_s`` closes a call (1001 both ways) after that long without
media: only a complete message counts, and once the call's wire has carried
audio, only a message with audio (the observer says which). Pings, pongs and a
frame that never ends keep nothing alive. A message may come in at most
:data:`MAX_FRAGMENTS` frames; more close the call with 1009, as a message over
``max_message_bytes`` does.

The modules: ``relay`` (:class:`Relay`: the legs' callbacks, the handshake both ways,
routing and measuring each frame), ``frames`` (the frame cutter, on bytes alone),
``leg`` (one connection: its reads, kernel-stamped where it can, its fair share of the
loop, its pauses), ``legs`` (a call's state and end: writes, closes, the idle timer, the
report to the observer), ``arrivals`` (what a call's arrival stamps are worth; its
forwarding delays), ``handshake`` (the HTTP pieces: hop-by-hop headers, the request check,
the health answer), ``config`` (:class:`RelayConfig`, :class:`Admission`), ``observer``
(:class:`CallObserver`, :class:`EndCause`, :class:`EndInfo`) and ``server``
(:class:`RelayServer`: accept, stop).
"""

from voxproxy.health import HEALTH_PATH, HEALTH_PATHS, LIVE_PATH, READY_PATH
from voxproxy.transports.ends import EndCause
from voxproxy.transports.websocket.config import (
    MAX_FRAGMENTS,
    WRITE_HIGH_WATER,
    Admission,
    RelayConfig,
)
from voxproxy.transports.websocket.leg import log_failure
from voxproxy.transports.websocket.observer import (
    CallObserver,
    EndInfo,
    ObserverFactory,
)
from voxproxy.transports.websocket.relay import Relay
from voxproxy.transports.websocket.server import RelayServer

__all__ = [
    "HEALTH_PATH",
    "HEALTH_PATHS",
    "LIVE_PATH",
    "MAX_FRAGMENTS",
    "READY_PATH",
    "WRITE_HIGH_WATER",
    "Admission",
    "CallObserver",
    "EndCause",
    "EndInfo",
    "ObserverFactory",
    "Relay",
    "RelayConfig",
    "RelayServer",
    "log_failure",
]
