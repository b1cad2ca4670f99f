"""The instruments recorded from a receipt, read back from an in-memory metric reader."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from support.receipt_samples import sample_receipt

from voxproxy.telemetry import attributes as A
from voxproxy.telemetry.metrics import Instruments

Points = dict[tuple[str, str], list[Any]]
Units = dict[tuple[str, str], str]


def _collect(legacy: bool = False, receipts: Any = None) -> tuple[Points, Units]:
    """(scope, instrument) -> its data points, and its unit, after recording ``receipts``."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    instruments = Instruments(provider.get_meter("voxproxy"))
    if legacy:
        instruments.add_legacy(provider.get_meter("voxproxy.legacy_ms"))
    instruments.call_opened()
    for r in receipts if receipts is not None else [sample_receipt()]:
        instruments.record(r)
    instruments.call_closed()
    data = reader.get_metrics_data()
    assert data is not None
    out: dict[tuple[str, str], list[Any]] = {}
    units: dict[tuple[str, str], str] = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out[(sm.scope.name, m.name)] = list(m.data.data_points)
                units[(sm.scope.name, m.name)] = m.unit or ""
    provider.shutdown()
    return out, units


def _one(points: list[Any]) -> Any:
    (p,) = points
    return p


def test_latencies_are_histograms_in_seconds_with_voice_buckets() -> None:
    got, units = _collect()
    r = sample_receipt()
    ttfs = _one(got[("voxproxy", "voxproxy.turn.ttfs")])
    answered = [t.ttfs_ms for t in r.turns if t.ttfs_ms is not None]
    assert ttfs.count == len(answered) == 2
    assert abs(ttfs.sum - sum(answered) / 1000.0) < 1e-9  # 0.5 s + 0.9 s
    assert dict(ttfs.attributes) == {"voxproxy.dialect": "twilio"}
    assert units[("voxproxy", "voxproxy.turn.ttfs")] == "s"
    assert tuple(ttfs.explicit_bounds) == A.LATENCY_BUCKETS_S
    assert {0.3, 1.2} <= set(ttfs.explicit_bounds) and max(ttfs.explicit_bounds) == 10.0
    stop = _one(got[("voxproxy", "voxproxy.barge_in.stop_latency")])
    assert (stop.count, stop.sum) == (1, 0.25)
    assert units[("voxproxy", "voxproxy.barge_in.stop_latency")] == "s"
    call = _one(got[("voxproxy", "voxproxy.call.duration")])
    assert call.count == 1 and abs(call.sum - r.duration_ms / 1000.0) < 1e-9
    assert dict(call.attributes) == {"voxproxy.dialect": "twilio", "voxproxy.terminal": "completed"}
    # Namespaced labels on the counters.
    calls = _one(got[("voxproxy", "voxproxy.calls")])
    assert dict(calls.attributes) == {
        "voxproxy.verdict": "tool_effect_failed",
        "voxproxy.terminal": "completed",
    }
    assert _one(got[("voxproxy", "voxproxy.call.active")]).value == 0
    kinds = {
        p.attributes["voxproxy.anomaly.kind"]: p.value
        for p in got[("voxproxy", "voxproxy.anomalies")]
    }
    assert kinds == {"malformed": 2, "unknown_event": 1}
    # Nothing of the release before without the switch.
    assert not any(scope == "voxproxy.legacy_ms" for scope, _ in got)
    assert ("voxproxy", "voxproxy.tool.latency") not in got


def test_tool_calls_are_gen_ai_execute_tool_duration() -> None:
    got, units = _collect()
    assert units[("voxproxy", "gen_ai.execute_tool.duration")] == "s"
    points = {
        tuple(sorted(p.attributes.items())): p
        for p in got[("voxproxy", "gen_ai.execute_tool.duration")]
    }
    # The finished call (400 ms) and the timed-out one (1 s, error.type); the cancelled
    # retry has no measured duration and is not recorded.
    ok = points[(("gen_ai.tool.name", "lookup_order"),)]
    timeout = points[(("error.type", "timeout"), ("gen_ai.tool.name", "lookup_order"))]
    assert (ok.count, ok.sum) == (1, 0.4)
    assert (timeout.count, timeout.sum) == (1, 1.0)
    assert len(points) == 2
    assert tuple(ok.explicit_bounds) == A.TOOL_BUCKETS_S


def test_talk_over_turns_are_counted_not_dropped() -> None:
    r = sample_receipt()
    over = r.turns[0].model_copy(update={"ttfs_ms": -400.0})
    got, _ = _collect(receipts=[r.model_copy(update={"turns": [over, *r.turns[1:]]})])
    ttfs = _one(got[("voxproxy", "voxproxy.turn.ttfs")])
    assert ttfs.count == 1 and ttfs.sum == 0.9  # only the non-negative one
    talk = _one(got[("voxproxy", "voxproxy.turn.talk_over")])
    assert talk.value == 1 and dict(talk.attributes) == {"voxproxy.dialect": "twilio"}


def test_a_failed_call_has_error_type_on_its_duration() -> None:
    r = sample_receipt(terminal="upstream_unreachable", turns=[], tools=[], events=[], effects=None)
    got, _ = _collect(receipts=[r])
    call = _one(got[("voxproxy", "voxproxy.call.duration")])
    assert call.attributes["error.type"] == "upstream_unreachable"


def test_the_legacy_switch_adds_the_milliseconds_metrics() -> None:
    got, units = _collect(legacy=True)
    ttfs_ms = _one(got[("voxproxy.legacy_ms", "voxproxy.turn.ttfs")])
    ttfs_s = _one(got[("voxproxy", "voxproxy.turn.ttfs")])
    assert units[("voxproxy.legacy_ms", "voxproxy.turn.ttfs")] == "ms"
    assert ttfs_ms.count == ttfs_s.count == 2
    assert abs(ttfs_ms.sum - 1000.0 * ttfs_s.sum) < 1e-6
    assert dict(ttfs_ms.attributes) == {"dialect": "twilio"}  # the old bare label
    assert max(ttfs_ms.explicit_bounds) == 5000.0
    tool = got[("voxproxy.legacy_ms", "voxproxy.tool.latency")]
    assert {p.attributes["status"]: p.sum for p in tool} == {"ok": 400.0, "timeout": 1000.0}
    assert _one(got[("voxproxy.legacy_ms", "voxproxy.calls.active")]).value == 0
    assert _one(got[("voxproxy.legacy_ms", "voxproxy.barge_in.stop_latency")]).sum == 250.0
