"""How a relayed call ended, as a transport saw it: the one list of call endings.

Both transports (``websocket`` and ``webrtc``) end a call with one of these causes;
each uses those its protocol can have. The proxy turns a cause into the receipt's
``terminal`` with :func:`voxproxy.core.receipt.terminal_of`: a cause's value is the
terminal of the same name, and the causes that never make a receipt (a bad handshake,
a call refused over capacity, a health check) are not terminals.
"""

from __future__ import annotations

import enum


class EndCause(enum.StrEnum):
    """How a relayed call ended."""

    CALLER_CLOSED = "caller_closed"  # a close frame, WHIP DELETE, or the peer connection closed
    AGENT_CLOSED = "agent_closed"
    CALLER_VANISHED = "caller_vanished"  # the connection (ICE/DTLS) dropped without a close
    AGENT_VANISHED = "agent_vanished"
    UPSTREAM_REFUSED = "upstream_refused"  # the agent answered the handshake/offer with an error
    UPSTREAM_UNREACHABLE = "upstream_unreachable"  # no connection (or media path) to the agent
    UPSTREAM_TIMEOUT = "upstream_timeout"
    IDLE_TIMEOUT = "idle_timeout"
    PROXY_SHUTDOWN = "proxy_shutdown"
    PROXY_ERROR = "proxy_error"
    # websocket only
    MESSAGE_TOO_BIG = "message_too_big"
    PROTOCOL_ERROR = "protocol_error"  # a peer broke RFC 6455: its connection was failed
    BAD_REQUEST = "bad_request"  # the caller's handshake was not a valid websocket request
    OVER_CAPACITY = "over_capacity"  # refused with 503: max_calls calls were in progress
    HEALTH_CHECK = "health_check"  # a plain GET of HEALTH_PATH, answered 200: not a call
    # webrtc only
    BAD_OFFER = "bad_offer"  # the caller's offer was malformed or had no audio
    ICE_FAILED = "ice_failed"  # the caller's media path never connected


# Causes that end a connection before there is a call to measure: never a receipt.
NOT_A_CALL = frozenset({EndCause.BAD_REQUEST, EndCause.OVER_CAPACITY, EndCause.HEALTH_CHECK})
