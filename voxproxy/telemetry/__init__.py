"""Traces, metrics and receipt log records: the proxy's only door to OpenTelemetry.

The rest of voxproxy talks to a :class:`Telemetry` object and never imports
OpenTelemetry. The default, :class:`Telemetry` itself, does nothing; the
OpenTelemetry-backed implementation (:mod:`voxproxy.telemetry.otel`) is
imported only when :func:`make_telemetry` is asked for traces or metrics.

What a call goes through::

    CallContext.__init__      -> telemetry.call_opened()              (active calls + 1)
    upstream_headers(request) -> telemetry.start_call(anchor, start_ns, carrier,
                                                      link_id=..., upstream=...)
                                 (continues the caller's traceparent, or starts a trace;
                                  opens the CLIENT span of the agent's leg and returns
                                  the headers that carry its context into our handshake)
    on_end                    -> telemetry.call_closed()
                                 telemetry.on_receipt(receipt, trace, times)
                                 (spans written after the fact from measured times,
                                  metrics recorded, the receipt and its verdict sent
                                  as OTLP log records)

Nothing here runs per message, and nothing here may raise into the proxy.

May import: the standard library, OpenTelemetry (only this folder does), and from
voxproxy ``receipts``, ``timebase``, ``httpserve``, and ``events`` and ``ids`` (the
enumerations and the name rule that bound metric labels). Never a transport, the proxy,
the load generator or the mock agent (enforced by tests/test_layers.py).
"""

from __future__ import annotations

import logging
import os

from voxproxy.telemetry.base import (
    NULL_TELEMETRY,
    TRACE_HEADERS,
    CallTimes,
    CallTrace,
    FlushTime,
    Telemetry,
    TelemetryConfig,
    experimental_requested,
    otlp_requested,
    sdk_disabled,
)

log = logging.getLogger("voxproxy.telemetry")


def make_telemetry(config: TelemetryConfig) -> Telemetry:
    """The telemetry ``config`` asks for, or :data:`NULL_TELEMETRY`.

    Receipts arrive already judged (the proxy gives each its verdict once), so
    spans and the calls counter carry the verdict. ``OTEL_SDK_DISABLED=true``
    turns everything off.
    """
    env = os.environ
    if not config.otlp and config.metrics_listen is None:
        return NULL_TELEMETRY
    if sdk_disabled(env):
        log.warning("OTEL_SDK_DISABLED is set: no traces, no metrics, no /metrics endpoint")
        return NULL_TELEMETRY
    from voxproxy.telemetry.otel import OtelTelemetry

    return OtelTelemetry(config, env)


__all__ = [
    "NULL_TELEMETRY",
    "TRACE_HEADERS",
    "CallTimes",
    "CallTrace",
    "FlushTime",
    "Telemetry",
    "TelemetryConfig",
    "experimental_requested",
    "make_telemetry",
    "otlp_requested",
    "sdk_disabled",
]
