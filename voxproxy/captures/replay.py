"""Replaying a capture: its records handed to a new session, in order, at their times.

The session is set up as the proxy's was (the header's dialect, decoder options,
settings, start, clock anchor and link id; the event loop's lag readings the live
receipt's uncertainties were read from), then given each record as the live one was:
messages (``on_message``, shed where the live one shed), decoded audio (``on_audio``),
events, the agent's answer, the anomalies and errors the proxy noted, and the close.
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
from voxproxy.clock import LagMonitor
from voxproxy.dialects import make_decoder
from voxproxy.dialects.base import Decoder
from voxproxy.dialects.channels import ChannelDecoder
from voxproxy.events import AGENT_TO_CALLER, CALLER_TO_AGENT, AnomalyKind
from voxproxy.receipts.model import CloseInfo, Receipt
from voxproxy.recordings.batch import Job, Options, SourceKind, register_source, source_suffixes
from voxproxy.session import CallSession


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
    lags = LagMonitor()
    session = CallSession(
        decoder,
        header.start_ns,
        secret=secret,
        link_id=header.link_id,
        config=header.session_config(),
        anchor=header.anchor,
        clock_lag=lags.max_between,
    )
    receipt: Receipt | None = None
    call: str | None = None
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
            session.on_audio(direction, pcm, rate, t_ns, wire_bytes=wire_bytes)
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
        elif kind == Kind.LAG:
            pairs = np.frombuffer(payload, "<i8").reshape(-1, 2)
            for t, lag in pairs.tolist():
                lags.record(t, lag)
        elif kind == Kind.CLOSE:
            closed = orjson.loads(payload)
            receipt = session.close(
                t_ns, closed["terminal"], CloseInfo(**closed["close"]), dialect=closed["dialect"]
            )
        elif kind == Kind.END:
            call = str(orjson.loads(payload)["call"])
        else:
            raise CaptureError(f"{name}: damaged capture (a record of kind {kind})")
    if receipt is None or call is None:
        raise CaptureError(f"{name}: damaged capture (the call's close is missing)")
    update: dict[str, object] = {"source": "capture"}
    if key_check(secret) != header.key_check:
        update["call"] = call  # not the proxy's secret: the call id the live receipt had
    return receipt.model_copy(update=update)


def measure_capture(job: Job, options: Options) -> tuple[Receipt, float]:
    """The batch's measurer for a capture: its receipt and the call's length in seconds."""
    receipt = replay(job.paths[0], options.secret)
    return receipt, receipt.duration_ms / 1000.0


CAPTURES = SourceKind("capture", sniff, (SUFFIX,), measure_capture)


def register() -> None:
    """``voxproxy analyze`` reads captures (a folder is searched for ``.vxcap`` too)."""
    if SUFFIX not in source_suffixes():
        register_source(CAPTURES)
