"""What the rest of voxproxy talks to (:class:`Telemetry`, which does nothing, and the
times and settings it is handed), and what the environment asks of it; no
OpenTelemetry here. :mod:`voxproxy.telemetry` re-exports it all; the OpenTelemetry-backed
implementation (:mod:`voxproxy.telemetry.otel`) builds on it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from voxproxy.core.receipt import Receipt
    from voxproxy.core.timebase import EpochAnchor

TRACE_HEADERS = ("traceparent", "tracestate")
"""The W3C trace-context headers read from the caller's handshake and written to ours."""


@dataclass(frozen=True, slots=True)
class FlushTime:
    """A flush on the proxy's monotonic clock, with the turn it fell in."""

    turn: int
    t_ns: int
    cut_audible: bool


@dataclass(frozen=True, slots=True)
class CallTimes:
    """The absolute times of one call that the receipt holds only relative to its start.

    Monotonic nanoseconds; ``anchor`` (the proxy's one epoch anchor) converts them to
    wall-clock time for the spans.
    """

    anchor: EpochAnchor
    start_ns: int  # the caller's connection was accepted (the receipt's time zero)
    end_ns: int
    flushes: Sequence[FlushTime] = ()


class CallTrace:
    """The trace of one call, opened at call start and written when the call ends.

    ``headers`` go into the proxy's own handshake to the agent. Implementations
    subclass it; the base carries no trace.
    """

    __slots__ = ("headers",)

    def __init__(self, headers: Sequence[tuple[str, str]] = ()) -> None:
        self.headers: list[tuple[str, str]] = list(headers)


@dataclass(frozen=True, slots=True)
class TelemetryConfig:
    """What to turn on. Exporters read the standard ``OTEL_*`` environment variables."""

    otlp: bool = False  # export traces and metrics over OTLP (voxproxy proxy --otel)
    metrics_listen: tuple[str, int] | None = None  # serve Prometheus /metrics here
    service_name: str = "voxproxy"  # unless OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES say
    shutdown_timeout_s: float = 5.0  # longest wait for the last spans on shutdown
    tool_names: frozenset[str] | None = None
    """The declared vocabulary of tool names (``--event-names``): each is a
    ``gen_ai.tool.name`` label value of its own; undeclared ones are bounded
    (:mod:`voxproxy.telemetry.metrics`)."""
    experimental_gen_ai: bool | None = None
    """The GenAI names that exist only in open proposals; None: on when
    ``OTEL_SEMCONV_STABILITY_OPT_IN`` lists ``gen_ai_latest_experimental``."""


class Telemetry:
    """No telemetry: every hook is a no-op. The default."""

    tracing = False
    metrics_port: int | None = None
    # Why the process would refuse a caller now, or None: what /metrics' port answers on
    # its readiness paths (voxproxy.health). Set before start; unset, ready while it answers.
    ready: Callable[[], str | None] | None = None

    def call_opened(self) -> None:
        """A call started (the caller's handshake arrived)."""

    def call_closed(self) -> None:
        """A call ended, receipt or not."""

    def start_call(
        self,
        anchor: EpochAnchor,
        start_ns: int,
        carrier: Mapping[str, str],
        *,
        link_id: str | None = None,
        upstream: str | None = None,
    ) -> CallTrace | None:
        """Open the trace of a call that started at ``start_ns`` (monotonic, converted
        through ``anchor``); ``carrier`` holds the caller's ``traceparent`` and
        ``tracestate`` (lower-case names) if its handshake carried them. ``link_id`` is
        the id the agent receives in ``X-Voxproxy-Call``; ``upstream`` the agent's URL
        (only its scheme, host and port are kept)."""
        del anchor, start_ns, carrier, link_id, upstream
        return None

    def on_receipt(self, receipt: Receipt, trace: CallTrace | None, times: CallTimes) -> None:
        """The call's receipt: write its spans (after the fact), record its metrics, send
        it (and its verdict) as log records."""
        del receipt, trace, times

    def dropped_spans(self) -> int:
        """Spans that could not be exported (collector down, queue full, shutdown)."""
        return 0

    async def start(self) -> None:
        """Start what listens (the Prometheus endpoint)."""

    async def aclose(self) -> None:
        """Export what is pending (bounded by ``shutdown_timeout_s``) and stop."""


NULL_TELEMETRY = Telemetry()


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def sdk_disabled(environ: Mapping[str, str] | None = None) -> bool:
    """``OTEL_SDK_DISABLED`` turns every signal off."""
    env = os.environ if environ is None else environ
    return _truthy(env.get("OTEL_SDK_DISABLED"))


def experimental_requested(environ: Mapping[str, str] | None = None) -> bool:
    """``OTEL_SEMCONV_STABILITY_OPT_IN`` asks for the latest experimental GenAI names."""
    env = os.environ if environ is None else environ
    raw = env.get("OTEL_SEMCONV_STABILITY_OPT_IN", "")
    return "gen_ai_latest_experimental" in {v.strip() for v in raw.split(",")}


def otlp_requested(environ: Mapping[str, str] | None = None) -> bool:
    """An OTLP endpoint is configured in the environment (which turns export on)."""
    env = os.environ if environ is None else environ
    return any(
        env.get(name)
        for name in (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
        )
    )
