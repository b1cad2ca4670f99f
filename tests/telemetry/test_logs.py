"""Receipts as OpenTelemetry log records (``voxproxy/telemetry/logs.py``), built from a
receipt alone: the receipt record, then the verdict's evaluation event with its score."""

from __future__ import annotations

import pytest
from support.receipt_samples import sample_receipt

from voxproxy.core.receipt import Receipt, VerdictRecord
from voxproxy.telemetry import attributes as A
from voxproxy.telemetry.logs import receipt_records
from voxproxy.telemetry.spans import call_attributes


def _judged(**verdict: object) -> Receipt:
    return sample_receipt().model_copy(update={"verdict": VerdictRecord.model_validate(verdict)})


def test_the_receipt_record_is_the_receipt_with_the_call_span_s_attributes() -> None:
    receipt = sample_receipt().model_copy(update={"verdict": None})
    (record,) = receipt_records(receipt, "link-1")
    assert record.event_name == A.EVENT_RECEIPT == "voxproxy.call.receipt"
    assert record.body == receipt.model_dump(mode="json", by_alias=True)
    assert record.attributes == call_attributes(receipt, "link-1")
    assert Receipt.model_validate(record.body) == receipt  # the body reads back whole


@pytest.mark.parametrize(
    ("verdict", "score"),
    [
        ("pass", 1.0),
        ("barge_in_failed", 0.0),
        ("unreachable", 0.0),
        ("insufficient_evidence", None),
    ],
)
def test_the_verdict_s_score_is_one_for_a_pass_zero_for_a_failure_none_without_evidence(
    verdict: str, score: float | None
) -> None:
    receipt = _judged(verdict=verdict, gate="interruption")
    _, evaluation = receipt_records(receipt)
    assert evaluation.event_name == "gen_ai.evaluation.result" and evaluation.body is None
    attrs = evaluation.attributes
    assert attrs[A.GEN_AI_EVALUATION_NAME] == "voxproxy.verdict"
    assert attrs[A.GEN_AI_EVALUATION_SCORE_LABEL] == verdict
    assert attrs.get(A.GEN_AI_EVALUATION_SCORE_VALUE) == score
    assert (A.GEN_AI_EVALUATION_SCORE_VALUE in attrs) is (score is not None)
    assert attrs[A.CALL_ID] == receipt.call and attrs[A.DIALECT] == receipt.dialect


def test_the_explanation_is_the_reason_else_the_cause_else_the_gate() -> None:
    def explained(**verdict: object) -> object:
        _, evaluation = receipt_records(_judged(verdict="tool_effect_failed", **verdict))
        return evaluation.attributes.get(A.GEN_AI_EVALUATION_EXPLANATION)

    full = {"reason": "the write never landed", "cause": "stale_write", "gate": "tool_effect"}
    assert explained(**full) == "the write never landed"
    assert explained(cause="stale_write", gate="tool_effect") == "stale_write"
    assert explained(gate="tool_effect") == "tool_effect"
    assert explained() is None


def test_the_gate_and_the_link_id_are_there_only_when_known() -> None:
    _, bare = receipt_records(_judged(verdict="pass"))
    assert A.VERDICT_GATE not in bare.attributes
    assert A.GEN_AI_CONVERSATION_ID not in bare.attributes
    _, linked = receipt_records(_judged(verdict="slow_first_response", gate="turn_timing"), "l-9")
    assert linked.attributes[A.VERDICT_GATE] == "turn_timing"
    assert linked.attributes[A.GEN_AI_CONVERSATION_ID] == "l-9"
