"""voxproxy.telemetry.base: what the environment asks of telemetry (read from a handed-in
mapping, never the process's own), and the no-op telemetry every hook of which does
nothing and raises nothing."""

from __future__ import annotations

import pytest

from voxproxy.core.timebase import EpochAnchor
from voxproxy.telemetry.base import (
    NULL_TELEMETRY,
    TRACE_HEADERS,
    CallTimes,
    CallTrace,
    experimental_requested,
    otlp_requested,
    sdk_disabled,
)


@pytest.mark.parametrize("value", ["true", "TRUE", " 1 ", "yes", "on"])
def test_the_sdk_is_disabled_by_any_true_spelling(value: str) -> None:
    assert sdk_disabled({"OTEL_SDK_DISABLED": value})


@pytest.mark.parametrize("value", ["", "false", "0", "no", "disabled"])
def test_the_sdk_is_not_disabled_by_anything_else(value: str) -> None:
    assert not sdk_disabled({"OTEL_SDK_DISABLED": value})
    assert not sdk_disabled({})


def test_the_experimental_names_are_one_entry_of_a_comma_separated_list() -> None:
    key = "OTEL_SEMCONV_STABILITY_OPT_IN"
    assert experimental_requested({key: "http, gen_ai_latest_experimental "})
    assert experimental_requested({key: "gen_ai_latest_experimental"})
    assert not experimental_requested({key: "gen_ai_latest_experimental_v2,http"})
    assert not experimental_requested({key: ""}) and not experimental_requested({})


@pytest.mark.parametrize(
    "name",
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
    ],
)
def test_any_otlp_endpoint_asks_for_export(name: str) -> None:
    assert otlp_requested({name: "http://127.0.0.1:4318"})
    assert not otlp_requested({name: ""})


def test_no_endpoint_asks_for_no_export() -> None:
    assert not otlp_requested({"OTEL_EXPORTER_OTLP_HEADERS": "a=b", "OTEL_SERVICE_NAME": "x"})


async def test_the_null_telemetry_does_nothing() -> None:
    t = NULL_TELEMETRY
    assert not t.tracing and t.metrics_port is None and t.ready is None
    t.call_opened()
    t.call_closed()
    anchor = EpochAnchor(mono_ns=0, wall_ns=0)
    assert t.start_call(anchor, 0, {"traceparent": "00-x-y-01"}, link_id="l") is None
    t.on_receipt(None, None, CallTimes(anchor, 0, 1))  # type: ignore[arg-type]
    assert t.dropped_spans() == 0
    await t.start()
    await t.aclose()


def test_a_call_trace_keeps_its_own_copy_of_the_headers() -> None:
    given = [("traceparent", "00-a-b-01")]
    trace = CallTrace(given)
    given.append(("tracestate", "x=1"))
    assert trace.headers == [("traceparent", "00-a-b-01")]
    assert CallTrace().headers == []
    assert TRACE_HEADERS == ("traceparent", "tracestate")  # W3C trace context's two
