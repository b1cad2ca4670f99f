"""The instruments recorded from a receipt, read back from an in-memory metric reader."""

from __future__ import annotations

import itertools
import string
from collections import Counter
from typing import Any

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support.receipt_samples import sample_receipt

from voxproxy.core.events import AnomalyKind
from voxproxy.core.receipt import TERMINALS, Receipt
from voxproxy.receipts.verdict import VERDICTS
from voxproxy.telemetry import attributes as A
from voxproxy.telemetry.metrics import MAX_TOOL_NAME_LABELS, OTHER, TOOL_ERRORS, Instruments

Points = dict[tuple[str, str], list[Any]]
Units = dict[tuple[str, str], str]


def _collect(receipts: Any = None) -> tuple[Points, Units]:
    """(scope, instrument) -> its data points, and its unit, after recording ``receipts``."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    instruments = Instruments(provider.get_meter("voxproxy"))
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
    # One meter, and nothing of the milliseconds instruments of 0.1.
    assert {scope for scope, _ in got} == {"voxproxy"}
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


# -- label values: bounded, and never the wire's text --------------------------------------

HOSTILE = (
    "lookup_4111111111111111",  # a card number
    "mail:jane.doe@example.com",
    "call_+14155550123",
    "q" * 300,  # name-shaped, but long
    "réserver_table",
    "予約する",
    "lookup\norder",
    'x"} injected_total 1',
)
"""Label values a caller could make a receipt carry: none may reach /metrics."""


def _exposition(receipts: list[Receipt], **options: Any) -> str:
    """What ``/metrics`` serves after ``receipts`` were recorded (Prometheus text)."""
    registry = CollectorRegistry(auto_describe=True)
    reader = PrometheusMetricReader(registry=registry, scope_info_enabled=False)
    provider = MeterProvider(metric_readers=[reader])
    instruments = Instruments(provider.get_meter("voxproxy"), **options)
    for r in receipts:
        instruments.record(r)
    text = generate_latest(registry).decode("utf-8")
    provider.shutdown()
    return text


def _series(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def _label_values(text: str, label: str) -> Counter[str]:
    """How many samples carry each value of ``label`` (parsed, so escapes are undone)."""
    out: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if label in sample.labels:
                out[sample.labels[label]] += 1
    return out


def _tool(i: int, name: str, status: str | None = "ok") -> dict[str, Any]:
    return {
        "operation_id": f"op_{i:016x}",
        "tool": name,
        "attempt": 1,
        "turn": None,
        "started_ms": 1000.0,
        "finished_ms": 1100.0 + i,
        "latency_ms": 100.0 + i,
        "status": status,
        "cancelled": False,
        "idempotent": False,
        "stale_write": False,
        "unsafe_retry": False,
    }


def _with_tools(names: list[str], status: str = "ok", **changes: Any) -> Receipt:
    tools = [_tool(i, name, status) for i, name in enumerate(names)]
    return sample_receipt(tools=tools, events=[], effects=None, **changes)


TOOL_LABEL = "gen_ai_tool_name"
FIVE_HUNDRED = [f"tool_{a}{b}" for a, b in itertools.product(string.ascii_lowercase, repeat=2)][
    :500
]
"""500 distinct names of the shape a receipt keeps (letters and ``_``): the issue's case,
with names that pass the receipts' rule, so that only the metrics' bound can hold them."""


def test_five_hundred_tool_names_make_a_bounded_number_of_series() -> None:
    # Four calls, each with the 500 names, each ending its tools another way (ok and the
    # three error types): every (name, error.type) pair would be a histogram of its own.
    statuses = ["ok", *sorted(TOOL_ERRORS)]
    calls = [_with_tools(FIVE_HUNDRED, status) for status in statuses]
    text = _exposition(calls)
    baseline = _exposition([_with_tools([], status) for status in statuses])
    per_histogram = len(A.TOOL_BUCKETS_S) + 3  # the buckets, +Inf, _sum and _count
    added = len(_series(text)) - len(_series(baseline))
    assert 0 < added <= (MAX_TOOL_NAME_LABELS + 1) * len(statuses) * per_histogram
    # Each (tool name, error type) pair is one histogram: a bounded set of names.
    names = _label_values(text, TOOL_LABEL)
    assert set(names) == {*FIVE_HUNDRED[:MAX_TOOL_NAME_LABELS], OTHER}
    # Nothing is lost: the names past the bound are counted under _OTHER.
    counts = {
        s.labels[TOOL_LABEL]: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "gen_ai_execute_tool_duration_seconds_count"
        and s.labels.get("error_type") == "timeout"
    }
    assert counts[OTHER] == 500 - MAX_TOOL_NAME_LABELS
    assert sum(counts.values()) == 500


def test_hostile_label_values_never_reach_the_exposition() -> None:
    r = _with_tools(list(HOSTILE))
    turn = r.turns[1]
    assert turn.barge_in is not None
    barged = turn.model_copy(
        update={"barge_in": turn.barge_in.model_copy(update={"outcome": HOSTILE[1]})}
    )
    assert r.verdict is not None
    # model_copy does not validate: every label's source field holds a hostile value.
    hostile = r.model_copy(
        update={
            "dialect": HOSTILE[0],
            "terminal": HOSTILE[2],
            "verdict": r.verdict.model_copy(update={"verdict": HOSTILE[3]}),
            "anomalies": {h: 1 for h in HOSTILE},
            "turns": [r.turns[0], barged, *r.turns[2:]],
        }
    )
    text = _exposition([hostile])
    for h in HOSTILE:
        assert h not in text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for label, value in sample.labels.items():
                assert not any(h in value for h in HOSTILE), (sample.name, label, value)
    # The calls are still counted, under _OTHER.
    assert _label_values(text, TOOL_LABEL)[OTHER] > 0
    assert set(_label_values(text, "voxproxy_dialect")) == {OTHER}
    assert set(_label_values(text, "voxproxy_anomaly_kind")) == {OTHER}
    assert set(_label_values(text, "voxproxy_barge_in_outcome")) == {OTHER}


def test_a_declared_tool_name_passes_unchanged_and_others_fall_to_other() -> None:
    declared = frozenset({"get_weather_v2", "book_table"})
    # The bound on undeclared names is spent first; declared names still pass.
    crowd = _with_tools(FIVE_HUNDRED[: MAX_TOOL_NAME_LABELS + 5])
    r = _with_tools(["get_weather_v2", "book_table", "get_weather_v3", "n_0123456789abcdef"])
    text = _exposition([crowd, r], tool_names=declared)
    names = _label_values(text, TOOL_LABEL)
    assert {"get_weather_v2", "book_table"} <= set(names)
    assert "get_weather_v3" not in names  # not declared, not name-shaped (a digit)
    assert "n_0123456789abcdef" not in names  # a receipt's keyed hash: a series per hash
    assert len(names) == len(declared) + MAX_TOOL_NAME_LABELS + 1


def test_every_known_value_of_the_enumerated_labels_passes() -> None:
    # Hostile values first, so that whatever room there is for unknown ones is spent.
    noise = [sample_receipt(dialect=h, anomalies={h: 1}, verdict={"verdict": h}) for h in HOSTILE]
    known = [
        sample_receipt(
            dialect=dialect,
            terminal=terminal,
            verdict={"verdict": verdict},
            anomalies={kind: 1 for kind in [*AnomalyKind, "dialect_mismatch"]},
        )
        for dialect, terminal, verdict in zip(
            itertools.cycle(["twilio", "openai-realtime", "raw", "auto", "undetected"]),
            sorted(TERMINALS),
            itertools.cycle(VERDICTS),
            strict=False,
        )
    ]
    text = _exposition([*noise, *known])
    assert set(_label_values(text, "voxproxy_terminal")) == TERMINALS
    assert set(_label_values(text, "voxproxy_verdict")) == {*VERDICTS, OTHER}
    kinds = set(_label_values(text, "voxproxy_anomaly_kind"))
    assert kinds == {*AnomalyKind, "dialect_mismatch", OTHER}
    dialects = set(_label_values(text, "voxproxy_dialect"))
    assert {"twilio", "openai-realtime", "raw", "auto", "undetected"} <= dialects
