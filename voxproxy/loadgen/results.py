"""Judging a load run: per call and per turn, the caller's truth, the proxy's figures,
their difference, and the scenario's expectations; then the summary across calls."""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from voxproxy.core.receipt import Receipt, TurnRecord
from voxproxy.core.timebase import NS_PER_MS
from voxproxy.loadgen.caller import CallRecord
from voxproxy.loadgen.scenario import Scenario, StepSpec
from voxproxy.loadgen.truth import TurnTruth, caller_view_truths, turn_truths
from voxproxy.simcall.log import CallLog
from voxproxy.transcripts.loadrun import score_call, summarize_calls
from voxproxy.transcripts.score import Scoring

MATCH_TOLERANCE_MS = 250.0  # a receipt turn belongs to a caller utterance within this
YIELD_WINDOW_MS = 1500.0  # a flush this soon after a noise means the agent yielded to it


@dataclass
class CallOutcome:
    scenario: Scenario
    index: int
    call_id: str
    dialect: str
    record: CallRecord
    receipt: Receipt | None = None
    agent_log: CallLog | None = None


def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / NS_PER_MS, 1)


def _rel(record: CallRecord, ns: int | None) -> float | None:
    return None if ns is None else round((ns - record.t0_ns) / NS_PER_MS, 1)


def _align(record: CallRecord, receipt: Receipt | None) -> float | None:
    """Receipt time (ms from the proxy's call start) minus caller time (ms from t0)."""
    if receipt is None or not record.speech:
        return None
    first = next((t for t in receipt.turns if t.caller_onset_ms is not None), None)
    if first is None or first.caller_onset_ms is None:
        return None
    return first.caller_onset_ms - (record.speech[0].onset_ns - record.t0_ns) / NS_PER_MS


def _matching_turn(
    receipt: Receipt | None, onset_rel_ms: float, shift: float | None, barge: bool = False
) -> TurnRecord | None:
    if receipt is None or shift is None:
        return None
    target = onset_rel_ms + shift
    for t in receipt.turns:
        onset = t.barge_in.onset_ms if (barge and t.barge_in is not None) else t.caller_onset_ms
        if onset is not None and abs(onset - target) <= MATCH_TOLERANCE_MS:
            return t
    return None


def _check(expect: Any, name: str, ok: bool, detail: str, failures: list[str]) -> None:
    if not ok:
        failures.append(f"{name}: {detail}")


def evaluate(o: CallOutcome, scoring: Scoring | None = None) -> dict[str, Any]:
    """One call's entry of results.json. ``scoring``: how transcripts are scored
    (None: the default normalization policy and term list)."""
    rec = o.record
    truths = turn_truths(rec, o.agent_log) if o.agent_log is not None else caller_view_truths(rec)
    truth_source = "agent_log" if o.agent_log is not None else "caller_vad"
    shift = _align(rec, o.receipt)
    speech_steps = [s for s in o.scenario.steps if s.say is not None or s.barge_in is not None]
    noise_steps = [s for s in o.scenario.steps if s.interject is not None]
    turns_out: list[dict[str, Any]] = []
    failures: list[str] = []
    for i, (truth, step) in enumerate(zip(truths, speech_steps, strict=False)):
        turns_out.append(_turn_entry(i, truth, step, rec, o.receipt, shift, failures))
    transcripts_unmatched = _transcripts(rec, turns_out, scoring)
    noises = [
        _noise_entry(i, n, step, rec, o.receipt, shift, o.agent_log, failures)
        for i, (n, step) in enumerate(zip(rec.noises, noise_steps, strict=False))
    ]
    silences = _silence_entries(o, failures)
    ttfs = [t["truth"]["ttfs_ms"] for t in turns_out if t["truth"]["ttfs_ms"] is not None]
    no_response = sum(1 for t in turns_out if t["truth"]["ttfs_ms"] is None)
    call_expect = o.scenario.expect
    if call_expect is not None:
        if call_expect.ttfs_ms_p95_max is not None and ttfs:
            p95 = float(np.percentile(ttfs, 95))
            _check(
                call_expect,
                "call ttfs_ms_p95_max",
                p95 <= call_expect.ttfs_ms_p95_max,
                f"p95 {p95:.0f} ms > {call_expect.ttfs_ms_p95_max:.0f} ms",
                failures,
            )
        if call_expect.max_no_response is not None:
            _check(
                call_expect,
                "call max_no_response",
                no_response <= call_expect.max_no_response,
                f"{no_response} turn(s) without a response",
                failures,
            )
        if call_expect.max_anomalies is not None and o.receipt is not None:
            n = sum(o.receipt.anomalies.values())
            _check(
                call_expect,
                "call max_anomalies",
                n <= call_expect.max_anomalies,
                f"{n} anomalies",
                failures,
            )
    if rec.error:
        failures.append(f"call failed: {rec.error}")
    return {
        "scenario": o.scenario.name,
        "index": o.index,
        "dialect": o.dialect,
        "call": o.receipt.call if o.receipt is not None else None,
        "error": rec.error,
        "truth_source": truth_source,
        "turns": turns_out,
        "noises": noises,
        "silences": silences,
        "no_response": no_response,
        "transcripts_unmatched": transcripts_unmatched,
        "receipt": None
        if o.receipt is None
        else {
            "terminal": o.receipt.terminal,
            "verdict": o.receipt.verdict.verdict if o.receipt.verdict is not None else None,
            "anomalies": o.receipt.anomalies,
            "caller_noise_events": o.receipt.summary.caller_noise_events,
            "dialect": o.receipt.dialect,
            "wire_looks_like": o.receipt.wire_looks_like,
            "yielded_without_caller_speech": o.receipt.summary.yielded_without_caller_speech,
        },
        "pacing_lag_ms_p99": round(float(np.percentile(rec.pacing_lag_ns, 99)) / NS_PER_MS, 2)
        if rec.pacing_lag_ns
        else None,
        "failures": failures,
        "passed": not failures,
    }


def _transcripts(rec: CallRecord, turns_out: list[dict[str, Any]], scoring: Scoring | None) -> int:
    """Each turn's ``transcript``: what the agent reported it heard, scored against the
    clip's text (voxproxy.transcripts.loadrun). Returns the user transcripts that
    matched no turn."""
    speech = [(s.onset_ns, s.offset_ns, s.text) for s in rec.speech[: len(turns_out)]]
    entries, unmatched = score_call(speech, rec.transcripts, rec.t0_ns, scoring)
    for turn, entry in zip(turns_out, entries, strict=True):
        turn["transcript"] = entry
    return unmatched


def _turn_entry(
    i: int,
    truth: TurnTruth,
    step: StepSpec,
    rec: CallRecord,
    receipt: Receipt | None,
    shift: float | None,
    failures: list[str],
) -> dict[str, Any]:
    onset_rel = (truth.caller_onset_ns - rec.t0_ns) / NS_PER_MS
    turn = _matching_turn(receipt, onset_rel, shift, barge=truth.barge_in)
    t_ttfs = _ms(truth.ttfs_ns)
    t_stop = _ms(truth.stop_latency_ns)
    p_ttfs = turn.ttfs_ms if turn is not None else None
    b = turn.barge_in if turn is not None else None
    p_stop = b.stop_latency_ms if b is not None else None
    entry: dict[str, Any] = {
        "turn": i,
        "clip": truth.caller_clip,
        "barge_in": truth.barge_in,
        "truth": {
            "caller_onset_ms": _rel(rec, truth.caller_onset_ns),
            "caller_offset_ms": _rel(rec, truth.caller_offset_ns),
            "ttfs_ms": t_ttfs,
            "stop_latency_ms": t_stop,
        },
        # The step's thresholds (drawn on the report's timeline).
        "limits": {
            "ttfs_ms_max": step.expect.ttfs_ms_max if step.expect is not None else None,
            "stop_latency_ms_max": step.expect.stop_latency_ms_max
            if step.expect is not None
            else None,
        },
        "proxy": None
        if turn is None
        else {
            "ttfs_ms": p_ttfs,
            "reason": turn.reason,
            "stop_latency_ms": p_stop,
            "outcome": b.outcome if b is not None else None,
            "evidence": b.evidence if b is not None else None,
        },
        "diff": {
            "ttfs_ms": None if p_ttfs is None or t_ttfs is None else round(p_ttfs - t_ttfs, 1),
            "stop_latency_ms": None
            if p_stop is None or t_stop is None
            else round(p_stop - t_stop, 1),
        },
    }
    e = step.expect
    label = f"turn {i} ({truth.caller_clip})"
    if e is not None:
        if e.response is not None:
            got = t_ttfs is not None
            _check(
                e,
                f"{label} response",
                got == e.response,
                "no response" if e.response else "the agent answered",
                failures,
            )
        if e.ttfs_ms_max is not None and t_ttfs is not None:
            _check(
                e,
                f"{label} ttfs_ms_max",
                t_ttfs <= e.ttfs_ms_max,
                f"{t_ttfs:.0f} ms > {e.ttfs_ms_max:.0f} ms",
                failures,
            )
        if e.stop_latency_ms_max is not None:
            _check(
                e,
                f"{label} stop_latency_ms_max",
                t_stop is not None and t_stop <= e.stop_latency_ms_max,
                "no stop"
                if t_stop is None
                else f"{t_stop:.0f} ms > {e.stop_latency_ms_max:.0f} ms",
                failures,
            )
        if e.outcome is not None:
            outcome = None if t_stop is None else ("stopped" if t_stop <= 2000 else "not_stopped")
            _check(
                e,
                f"{label} outcome",
                outcome == e.outcome,
                f"{outcome or 'no agent audio'} (expected {e.outcome})",
                failures,
            )
    return entry


def _noise_entry(
    i: int,
    noise: Any,
    step: StepSpec,
    rec: CallRecord,
    receipt: Receipt | None,
    shift: float | None,
    log: CallLog | None,
    failures: list[str],
) -> dict[str, Any]:
    onset_rel = (noise.onset_ns - rec.t0_ns) / NS_PER_MS
    window = YIELD_WINDOW_MS * NS_PER_MS
    flushed = any(noise.onset_ns <= f <= noise.onset_ns + window for f in rec.flushes)
    if log is not None:
        yielded = any(
            r.interrupted_ns is not None
            and noise.onset_ns - 100 * NS_PER_MS <= r.interrupted_ns <= noise.onset_ns + window
            and r.stopped_ns is not None
            for r in log.responses
        )
    else:
        yielded = flushed
    proxy_barge = _matching_turn(receipt, onset_rel, shift, barge=True)
    proxy_counted_speech = proxy_barge is not None and proxy_barge.barge_in is not None
    judged = None
    if receipt is not None:
        # Correct: no barge-in made of the noise, and a yield to it is flagged as one
        # without caller speech.
        judged = not proxy_counted_speech and (
            not flushed or receipt.summary.yielded_without_caller_speech > 0
        )
    e = step.expect
    if e is not None and e.agent_keeps_talking is not None:
        _check(
            e,
            f"noise {i} ({noise.clip}) agent_keeps_talking",
            (not yielded) == e.agent_keeps_talking,
            "the agent yielded to a noise" if yielded else "the agent kept talking",
            failures,
        )
    return {
        "noise": i,
        "clip": noise.clip,
        "onset_ms": _rel(rec, noise.onset_ns),
        "agent_yielded": yielded,
        "flush_seen": flushed,
        "proxy_counted_as_barge_in": proxy_counted_speech,
        "proxy_judged_correctly": judged,
    }


def _silence_entries(o: CallOutcome, failures: list[str]) -> list[dict[str, Any]]:
    rec = o.record
    steps = [s for s in o.scenario.steps if s.silence is not None]
    windows = [(a, b) for action, a, b in rec.steps if action == "Silence"]
    out = []
    for i, (step, (a, b)) in enumerate(zip(steps, windows, strict=False)):
        spoke = [s for s, _e in rec.agent_spurts if a <= s < b]
        after = _ms(spoke[0] - a) if spoke else None
        e = step.expect
        if e is not None and e.agent_speaks is not None:
            _check(
                e,
                f"silence {i} agent_speaks",
                bool(spoke) == e.agent_speaks,
                f"the agent spoke after {after:.0f} ms of silence"
                if spoke and after is not None
                else "the agent stayed silent",
                failures,
            )
        out.append({"silence": i, "ms": step.silence, "agent_spoke_after_ms": after})
    return out


def _stats(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "p50": None, "p90": None, "p95": None, "p99": None, "max": None}
    a = np.array(values, dtype=np.float64)
    return {
        "n": int(a.size),
        "p50": round(float(np.percentile(a, 50)), 1),
        "p90": round(float(np.percentile(a, 90)), 1),
        "p95": round(float(np.percentile(a, 95)), 1),
        "p99": round(float(np.percentile(a, 99)), 1),
        "max": round(float(a.max()), 1),
    }


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """summary.json: distributions and counts, per scenario and over the whole run."""
    groups: dict[str, list[dict[str, Any]]] = {"all": results}
    for r in results:
        groups.setdefault(r["scenario"], []).append(r)
    out: dict[str, Any] = {}
    for name, rs in groups.items():
        turns = [t for r in rs for t in r["turns"]]
        ttfs = [t["truth"]["ttfs_ms"] for t in turns if t["truth"]["ttfs_ms"] is not None]
        stops = [
            t["truth"]["stop_latency_ms"]
            for t in turns
            if t["barge_in"] and t["truth"]["stop_latency_ms"] is not None
        ]
        ttfs_err = [abs(t["diff"]["ttfs_ms"]) for t in turns if t["diff"]["ttfs_ms"] is not None]
        stop_err = [
            abs(t["diff"]["stop_latency_ms"])
            for t in turns
            if t["diff"]["stop_latency_ms"] is not None
        ]
        barges = [t for t in turns if t["barge_in"]]
        noises = [n for r in rs for n in r["noises"]]
        silences = [s for r in rs for s in r["silences"]]
        out[name] = {
            "calls": len(rs),
            "failed_calls": sum(1 for r in rs if not r["passed"]),
            "errors": sum(1 for r in rs if r["error"]),
            "error_causes": dict(
                Counter(error_cause(r["error"]) for r in rs if r["error"]).most_common()
            ),
            "dialect_mismatches": dict(
                Counter(
                    f"{r['receipt']['wire_looks_like']} {r['receipt']['dialect']}"
                    for r in rs
                    if (r.get("receipt") or {}).get("wire_looks_like")
                ).most_common()
            ),
            "turns": len(turns),
            "ttfs_ms": _stats(ttfs),
            "stop_latency_ms": _stats(stops),
            "proxy_ttfs_abs_error_ms": _stats(ttfs_err),
            "proxy_stop_abs_error_ms": _stats(stop_err),
            "barge_ins": {
                "total": len(barges),
                "stopped": sum(
                    1
                    for t in barges
                    if t["truth"]["stop_latency_ms"] is not None
                    and t["truth"]["stop_latency_ms"] <= 2000
                ),
                "not_stopped": sum(
                    1
                    for t in barges
                    if t["truth"]["stop_latency_ms"] is None or t["truth"]["stop_latency_ms"] > 2000
                ),
            },
            "missed_responses": sum(r["no_response"] for r in rs),
            "reprompts": sum(1 for s in silences if s["agent_spoke_after_ms"] is not None),
            "false_barge_ins": sum(1 for n in noises if n["agent_yielded"]),
            "noise_misjudged_by_proxy": sum(
                1 for n in noises if n["proxy_judged_correctly"] is False
            ),
            "expectation_failures": sum(len(r["failures"]) for r in rs),
            "transcripts": summarize_calls(rs),
            **_pacing(rs),
        }
    return out


_ERRNO = re.compile(r"\[Errno (\d+)\]")


def error_cause(error: str) -> str:
    """Why a call failed, in the words every call it hit shares (no addresses, no ids):
    ``connection refused``, ``HTTP 502 from the target: agent unreachable: ...``."""
    kind, _, text = error.partition(": ")
    if kind == "InvalidStatus":
        return text  # the target's status and the first words of its answer
    errno = _ERRNO.search(text)
    if errno is not None:
        return os.strerror(int(errno.group(1))).lower()
    return error[:200]


def problem_lines(summary: dict[str, Any]) -> list[str]:
    """What went wrong with the run itself, first: calls that never got through (counted
    per cause) and a wire the target's voxproxy did not expect."""
    a = summary.get("all", {})
    lines = []
    causes: dict[str, int] = a.get("error_causes") or {}
    if causes:
        n = sum(causes.values())
        lines.append(
            f"{n} of {a['calls']} call{'s' if a['calls'] != 1 else ''} failed: "
            + "; ".join(f"{cause} (×{count})" for cause, count in causes.items())
        )
    for pair, count in (a.get("dialect_mismatches") or {}).items():
        spoke, expected = pair.split(" ", 1)
        lines.append(
            f"{count} call{'s' if count != 1 else ''} spoke {spoke}, but the target's voxproxy "
            f"expects {expected}: nothing of {'them' if count != 1 else 'it'} was measured "
            f"(run load with --dialect {expected}, or the proxy with --dialect auto)"
        )
    return lines


# The load generator keeps its callers' frames within this of their deadlines (p99) on a
# core it has to itself; beyond, its callers' clocks, and so their truth, are late.
PACING_LAG_LIMIT_MS = 5.0


def overload_warning(summary: dict[str, Any]) -> str | None:
    """One line for the summary and the report when the generator fell behind."""
    a = summary.get("all", {})
    if not a.get("generator_overloaded"):
        return None
    return (
        f"warning: the load generator fell behind its own clock (pacing lag p99 "
        f"{a['pacing_lag_ms_p99']:.1f} ms > {PACING_LAG_LIMIT_MS:g} ms): its callers sent "
        "late, so their truth is suspect; run fewer calls per core, or more --workers"
    )


def _pacing(rs: list[dict[str, Any]]) -> dict[str, Any]:
    lags = [r["pacing_lag_ms_p99"] for r in rs if r.get("pacing_lag_ms_p99") is not None]
    worst = max(lags) if lags else None
    return {
        "pacing_lag_ms_p99": worst,
        "generator_overloaded": worst is not None and worst > PACING_LAG_LIMIT_MS,
    }
