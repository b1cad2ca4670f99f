"""The proxy layer: a transport's relay joined to one measured call per connection.

* ``lifecycle``: what both proxies share, whatever carries the call: a measured call's
  life (link id, trace, journal entry, end, receipt), the receipt outlet (sinks,
  verdict, telemetry, the journal of open calls), :func:`~.lifecycle.recover_crashed`
  and admission on the loop's lag;
* ``websocket``: :class:`Proxy` (the websocket relay + a ``CallSession`` per call);
* ``webrtc``: the same for the WebRTC relay (needs the ``webrtc`` extra);
* ``measuring``: measurement after forwarding, within a budget per loop turn, queued
  or shed past it;
* ``eventapi`` and ``livecalls``: the HTTP event API (tool, state and outcome events)
  and the live calls it finds by any id the agent knows;
* ``workers``: :func:`~.workers.serve`, and ``voxproxy proxy --workers N`` (N processes
  on one port, one proxy; ``journals``: their crash journals);
  ``supervisor``, its parent (replaces a worker that dies); ``front``, its one
  ``/metrics``, event API and health; ``listenclaim``, the checks that keep a second
  proxy off a port a proxy serves.

:mod:`voxproxy.proxy.server` (``ServeConfig``, ``ProxyServer``) runs either proxy in this
process; ``workers.serve()`` runs it here or in N workers.

May import everything below it: the core, ``receipts``, ``telemetry``, ``transports``,
``captures``, ``httpserve``, ``fdwatch``, ``clock`` (and ``server``, for ``workers``). Nothing below
imports it (enforced by tests/test_layers.py).
"""

from voxproxy.proxy.lifecycle import DEFAULT_MAX_LOOP_LAG_MS, ReceiptSink
from voxproxy.proxy.websocket import Proxy, ProxyConfig

__all__ = ["DEFAULT_MAX_LOOP_LAG_MS", "Proxy", "ProxyConfig", "ReceiptSink"]
