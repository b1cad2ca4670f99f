"""Replaying a capture: its records handed to a new session, in order, at their times.

The session is set up as the proxy's was (the header's dialect, decoder options,
settings, start, clock anchor and link id), then given each record as the live one was:
messages (``on_message``, shed where the live one shed), decoded audio (``on_audio``),
events, the agent's answer, the anomalies and errors the proxy noted, and the close,
where its questions to the proxy (how late the loop's clock readings near an edge were;
WebRTC: how late the caller may have heard the agent) get the answers the live one got.
The measurement core reads no clock, so the receipt is the live one, figure for figure,
with ``source: capture``.

The keyed hashes in a receipt (its call id, the hashes of tool arguments a wire
carried) need the proxy's secret (``voxproxy analyze --secret``): the header says
whether the one given is it (``key_check``). Without it the call id is still the live
one (the capture's last record names it), the hashes of tool arguments differ.

:func:`register` lets ``voxproxy analyze`` read captures
(:func:`voxproxy.recordings.batch.register_source`).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from voxproxy.captures.format import (
    AGENT,
    DISABLED,
    SHED,
    SUFFIX,
    TEXT,
    CaptureError,
    CaptureFile,
    Kind,
    event_of,
    key_check,
    sniff,
)
from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import Decoder
from voxproxy.core.dialects.channels import ChannelDecoder
from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT, AnomalyKind, Audio
from voxproxy.core.receipt import CloseInfo, Receipt
from voxproxy.core.session import CallSession
from voxproxy.recordings.batch import Job, Options, SourceKind, register_source, source_suffixes


def replay(path: str | Path, secret: bytes) -> Receipt:
    """The receipt of the call captured in ``path`` (``source: capture``). Raises
    :class:`CaptureError` (one line) for a file that is not a whole capture."""
    with CaptureFile(path) as f:
        return _replay(f, secret)


def _replay(f: CaptureFile, secret: bytes) -> Receipt:
    header, name = f.header, f.name
    if header.transport not in ("websocket", "webrtc"):
        raise CaptureError(f"{name}: a capture of transport {header.transport!r}, unknown here")
    options = header.dialect_options(secret)
    channels: ChannelDecoder | None = None
    decoder: Decoder
    if header.transport == "webrtc":
        decoder = channels = ChannelDecoder(header.dialect, options)
    else:
        try:
            decoder = make_decoder(header.dialect, options)
        except Exception as exc:
            raise CaptureError(f"{name}: dialect {header.dialect!r}: {exc}") from None
    answers = _Answers(name)
    asked = header.questions
    session = CallSession(
        decoder,
        header.start_ns,
        secret=secret,
        link_id=header.link_id,
        config=header.session_config(),
        anchor=header.anchor,
        clock_lag=answers.clock_lag if "clock_lag" in asked else None,
        downstream=answers.downstream if "downstream" in asked else None,
    )
    closed: dict[str, Any] | None = None
    end_ns = 0
    call: str | None = None
    added: dict[str, Any] = {}
    for r in f.records():
        kind, flags, t_ns, payload = r.kind, r.flags, r.t_ns, r.payload
        if flags & DISABLED:
            session.measurement_disabled = True
        direction = AGENT_TO_CALLER if flags & AGENT else CALLER_TO_AGENT
        if kind == Kind.MESSAGE:
            message = payload.decode() if flags & TEXT else payload
            session.on_message(direction, message, t_ns, shed=bool(flags & SHED))
        elif kind == Kind.AUDIO:
            rate = int.from_bytes(payload[:4], "little")
            wire_bytes = int.from_bytes(payload[4:8], "little")
            pcm = np.frombuffer(payload, "<i2", offset=8).astype(np.int16)
            session.on_audio(Audio(direction, pcm, rate, t_ns), wire_bytes=wire_bytes)
        elif kind == Kind.EVENT:
            session.on_event(event_of(payload))
        elif kind == Kind.UPSTREAM:
            session.on_upstream_connected(t_ns)
        elif kind == Kind.ANOMALY:
            noted = orjson.loads(payload)
            session.note_anomaly(AnomalyKind(noted["kind"]), int(noted["count"]))
        elif kind == Kind.UNMEASURED:
            messages, wire_bytes = struct.unpack("<QQ", payload)
            session.count_unmeasured(direction, messages, wire_bytes)
        elif kind == Kind.ERROR:
            session.note_measurement_error()
        elif kind == Kind.LABEL and channels is not None:
            channels.label = payload.decode()
        elif kind == Kind.ANSWER:
            answers.note(orjson.loads(payload))
        elif kind == Kind.CLOSE:  # closed once the answers that follow are read
            closed, end_ns = orjson.loads(payload), t_ns
        elif kind == Kind.END:
            end = orjson.loads(payload)
            call, added = str(end["call"]), dict(end.get("added") or {})
        else:
            raise CaptureError(f"{name}: damaged capture (a record of kind {kind})")
    if closed is None or call is None:
        raise CaptureError(f"{name}: damaged capture (the call's close is missing)")
    close = CloseInfo(**closed["close"])
    receipt = session.close(end_ns, closed["terminal"], close, dialect=closed["dialect"])
    update: dict[str, Any] = {**added, "source": "capture"}
    if key_check(secret) != header.key_check:
        update["call"] = call  # not the proxy's secret: the call id the live receipt had
    if added:  # (figures of the live proxy's own, its forwarding delays: as they were)
        merged = {**orjson.loads(receipt.model_dump_json(by_alias=True)), **update}
        return Receipt.model_validate(merged)
    return receipt.model_copy(update=update)


class _Answers:
    """The proxy's answers to the session's questions, as the capture recorded them."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._given: dict[tuple[str, tuple[int, ...]], Any] = {}

    def note(self, answer: dict[str, Any]) -> None:
        self._given[(answer["q"], tuple(answer["args"]))] = answer["value"]

    def _answer(self, question: str, *args: int) -> Any:
        try:
            return self._given[(question, args)]
        except KeyError:
            raise CaptureError(
                f"{self._name}: the replay asked {question}{args}, which the live call was "
                "never asked (a capture of another version of the measurement)"
            ) from None

    def clock_lag(self, start_ns: int, end_ns: int) -> int:
        return int(self._answer("clock_lag", start_ns, end_ns))

    def downstream(self, t_ns: int) -> float:
        return float(self._answer("downstream", t_ns))


def measure_capture(job: Job, options: Options) -> tuple[Receipt, float]:
    """The batch's measurer for a capture: its receipt and the call's length in seconds."""
    receipt = replay(job.paths[0], options.secret)
    return receipt, receipt.duration_ms / 1000.0


CAPTURES = SourceKind("capture", sniff, (SUFFIX,), measure_capture)


def register() -> None:
    """``voxproxy analyze`` reads captures (a folder is searched for ``.vxcap`` too)."""
    if SUFFIX not in source_suffixes():
        register_source(CAPTURES)
