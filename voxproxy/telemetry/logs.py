"""Receipts as OpenTelemetry log records, so one collector carries traces, metrics and
receipts (and routes them to ClickHouse, Loki, Elastic or a file: no driver here).

Two records per call, both in the call span's context (trace and span id):

* ``voxproxy.call.receipt``: the receipt itself as the body (a map: receipts are
  content-free by construction), the call span's flat attributes as attributes;
* ``gen_ai.evaluation.result`` (GenAI events, ``gen-ai-events.md``) for the verdict,
  when the call has one: ``gen_ai.evaluation.name`` = ``voxproxy.verdict``,
  ``gen_ai.evaluation.score.label`` = the verdict, ``gen_ai.evaluation.score.value``
  1.0 for ``pass``, 0.0 for a failure (none for ``insufficient_evidence``), and
  ``gen_ai.evaluation.explanation`` = the verdict's reason (a sentence voxproxy wrote).

Pure: :func:`receipt_records` builds them; :mod:`voxproxy.telemetry.otel` emits them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry.util.types import AttributeValue

from voxproxy.telemetry import attributes as A
from voxproxy.telemetry.spans import call_attributes

if TYPE_CHECKING:
    from voxproxy.core.receipt import Receipt


@dataclass(frozen=True, slots=True)
class LogRecordData:
    event_name: str
    body: Any
    attributes: dict[str, AttributeValue]


def _score(verdict: str) -> float | None:
    if verdict == "pass":
        return 1.0
    if verdict == "insufficient_evidence":
        return None
    return 0.0


def receipt_records(r: Receipt, link_id: str | None = None) -> list[LogRecordData]:
    """The log records of one call: its receipt, then its verdict (if judged)."""
    attrs = call_attributes(r, link_id)
    out = [
        LogRecordData(
            event_name=A.EVENT_RECEIPT,
            body=r.model_dump(mode="json", by_alias=True),
            attributes=attrs,
        )
    ]
    v = r.verdict
    if v is not None:
        evaluation: dict[str, AttributeValue] = {
            A.GEN_AI_EVALUATION_NAME: A.EVALUATION_VERDICT,
            A.GEN_AI_EVALUATION_SCORE_LABEL: v.verdict,
            A.CALL_ID: r.call,
            A.DIALECT: r.dialect,
        }
        score = _score(v.verdict)
        if score is not None:
            evaluation[A.GEN_AI_EVALUATION_SCORE_VALUE] = score
        explanation = v.reason or v.cause or v.gate
        if explanation:
            evaluation[A.GEN_AI_EVALUATION_EXPLANATION] = explanation
        if v.gate:
            evaluation[A.VERDICT_GATE] = v.gate
        if link_id is not None:
            evaluation[A.GEN_AI_CONVERSATION_ID] = link_id
        out.append(LogRecordData(A.EVENT_EVALUATION, None, evaluation))
    return out
