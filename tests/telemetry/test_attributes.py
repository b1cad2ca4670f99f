"""voxproxy.telemetry.attributes: the names of spans, attributes, events and metrics.

The module is a table, so what is tested is what the table promises: every name sits in
the ``voxproxy.`` namespace or in a semantic convention's, two different things never share
a name (a collision would merge two attributes on a span or two series in Prometheus), the
name prefixes read right when a name is appended, and the histogram buckets are ordered and
put a boundary on each default verdict threshold.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

import pytest

import voxproxy.telemetry.attributes as A
from voxproxy.receipts.policy import Policy

# Values that are not names (an operation name, the opt-in switch) and the prefixes that
# become a name only once a stage, tool or event kind is appended.
_NOT_NAMES = {"OP_EXECUTE_TOOL", "OP_INVOKE_AGENT", "EXPERIMENTAL_OPT_IN"}
_PREFIXES = {"SPAN_STAGE_PREFIX", "SPAN_TOOL_PREFIX", "EVENT_TOOL_PREFIX"}
# Namespaces of the OpenTelemetry semantic conventions the module reuses.
_CONVENTIONS = ("gen_ai.", "error.", "server.", "url.")
# Kinds of constant that may repeat another's name on purpose: a metric's label key is the
# span attribute's key, a metric counts what the attribute of the same name counts, and an
# evaluation (a finding) is named for the tool flag it reports.
_ALIAS_KINDS = ("LABEL_", "METRIC_", "EVALUATION_")


def _names() -> dict[str, str]:
    return {
        k: v
        for k, v in vars(A).items()
        if k.isupper() and isinstance(v, str) and k not in _NOT_NAMES | _PREFIXES
    }


def test_the_table_is_read_whole() -> None:
    names = _names()
    assert {"CALL_ID", "SPAN_CALL", "METRIC_TTFS", "LABEL_VERDICT"} <= names.keys()
    assert len(names) > 100


def test_every_name_is_in_voxproxys_namespace_or_a_conventions() -> None:
    outside = {
        k: v
        for k, v in _names().items()
        if not v.startswith(("voxproxy.", *_CONVENTIONS)) and v != A.SPAN_TOOL_PREFIX.strip()
    }
    assert outside == {}


def test_names_are_dotted_lower_case_without_spaces() -> None:
    bad = {k: v for k, v in _names().items() if v != v.strip().lower() or " " in v}
    assert bad == {}


def test_two_different_things_never_share_a_name() -> None:
    by_value: dict[str, list[str]] = defaultdict(list)
    for key, value in _names().items():
        if not key.startswith(_ALIAS_KINDS):
            by_value[value].append(key)
    assert {v: ks for v, ks in by_value.items() if len(ks) > 1} == {}


@pytest.mark.parametrize("kind", _ALIAS_KINDS)
def test_within_one_kind_every_name_is_distinct(kind: str) -> None:
    values = [v for k, v in _names().items() if k.startswith(kind)]
    assert len(values) == len(set(values)) > 1


def test_every_metric_label_is_a_namespaced_key() -> None:
    labels = {k: v for k, v in _names().items() if k.startswith("LABEL_")}
    assert all(v.startswith("voxproxy.") for v in labels.values()), labels


@pytest.mark.parametrize("prefix", sorted(_PREFIXES))
def test_a_prefix_ends_with_one_space_so_the_appended_name_reads_apart(prefix: str) -> None:
    value = getattr(A, prefix)
    assert value.endswith(" ") and not value.endswith("  ")
    assert " " not in value.strip()


def test_the_tool_span_prefix_is_the_conventions_operation() -> None:
    # gen-ai-spans.md names an execute_tool span "execute_tool {gen_ai.tool.name}".
    assert A.SPAN_TOOL_PREFIX == A.OP_EXECUTE_TOOL + " "


@pytest.mark.parametrize("buckets", ["LATENCY_BUCKETS_S", "TOOL_BUCKETS_S", "CALL_BUCKETS_S"])
def test_bucket_boundaries_rise_strictly(buckets: str) -> None:
    values = getattr(A, buckets)
    assert len(values) > 5
    assert all(a < b for a, b in pairwise(values))
    assert values[0] >= 0


def test_the_tool_buckets_double_from_ten_milliseconds() -> None:
    # gen-ai-metrics.md's advice for gen_ai.execute_tool.duration: 0.01 s doubling.
    assert A.TOOL_BUCKETS_S[0] == 0.01
    for a, b in pairwise(A.TOOL_BUCKETS_S):
        assert b == pytest.approx(2 * a)


def test_the_latency_buckets_have_a_boundary_on_each_default_threshold() -> None:
    # A histogram can tell "over the threshold" from "under" only at a boundary.
    policy = Policy()
    for threshold_ms in (policy.max_first_response_ms, policy.max_interrupt_stop_ms):
        assert threshold_ms / 1000 in A.LATENCY_BUCKETS_S
    assert A.CALL_BUCKETS_S[-1] >= 3600.0  # an hour-long call lands in a bucket
