"""The relay's settings (:class:`RelayConfig`) and its admission of calls."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from websockets.uri import WebSocketURI, parse_uri

WRITE_HIGH_WATER = 512 * 1024
MAX_FRAGMENTS = 4096  # frames of one message; more close the call with 1009 (message too big)
# The longest request line the relay holds back to read its HTTP version (websockets'
# own limit on a request line is 8 KiB: a longer one fails there).
MAX_REQUEST_LINE = 8192


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
    # Messages a second in one direction that are measured; those beyond are forwarded
    # only, and counted (anomaly messages_over_rate): a flood, not a workload (real-time
    # audio is 50-100 a second; a load generator's bursts at 50x real time, 2,500).
    max_messages_per_s: int | None = 10_000
    # Stamp arrivals with the kernel's receive time where a leg allows (transports.stamped);
    # off: every read is stamped when the loop ran it.
    kernel_stamps: bool = True
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

    def refusal(self) -> str | None:
        """Why a caller arriving now would be refused, or None: what :meth:`admit` would
        decide, without counting anything (the health paths' readiness)."""
        if self._full():
            return self._full_reason()
        why = self.overloaded() if self.overloaded is not None else None
        return None if why is None else f"overloaded ({why})"

    def admit(self) -> bool:
        if self._full():
            self.refused += 1
            self.reason = self._full_reason()
            return False
        why = self.overloaded() if self.overloaded is not None else None
        if why is not None:
            self.refused += 1
            self.refused_overloaded += 1
            self.reason = f"overloaded ({why})"
            return False
        self.active += 1
        return True

    def _full(self) -> bool:
        return self.limit is not None and self.active >= self.limit

    def _full_reason(self) -> str:
        return f"at capacity ({self.limit} calls in progress)"

    def release(self) -> None:
        self.active -= 1
