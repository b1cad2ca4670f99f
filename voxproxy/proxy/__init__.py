"""The proxy layer: a transport's relay joined to one measured call per connection.

* ``websocket``: :class:`Proxy` (the websocket relay + a ``CallSession`` per call), the
  receipt outlet every proxy shares (sinks, verdict, telemetry, the journal of open
  calls) and :func:`~voxproxy.proxy.websocket.recover_crashed`;
* ``webrtc``: the same for the WebRTC relay (needs the ``webrtc`` extra);
* ``measuring``: measurement after forwarding, within a budget per loop turn, queued
  or shed past it;
* ``eventapi`` and ``livecalls``: the HTTP event API (tool, state and outcome events)
  and the live calls it finds by any id the agent knows;
* ``workers``: ``voxproxy proxy --workers N`` (N processes on one port, one proxy);
  ``supervisor``, its parent (replaces a worker that dies); ``front``, its one
  ``/metrics``, event API and health; ``listenclaim``, the checks that keep a second
  proxy off a port a proxy serves.

:mod:`voxproxy.server` (``ServeConfig``, ``ProxyServer``, ``serve()``) runs either proxy.

May import everything below it: the core, ``receipts``, ``telemetry``, ``transports``,
``httpserve``, ``fdwatch``, ``clock`` (and ``server``, for ``workers``). Nothing below
imports it (enforced by tests/test_layers.py).
"""

from voxproxy.proxy.websocket import DEFAULT_MAX_LOOP_LAG_MS, Proxy, ProxyConfig, ReceiptSink

__all__ = ["DEFAULT_MAX_LOOP_LAG_MS", "Proxy", "ProxyConfig", "ReceiptSink"]
