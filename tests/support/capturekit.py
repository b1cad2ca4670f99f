"""Captures for the tests: a header, a scripted call fed to a session with a capture
tapped in, and the files read back."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from support.scripted import CallPlan, ScriptedCall, order_status_turns, render
from voxproxy.captures.format import CaptureFile, CaptureHeader, Record
from voxproxy.captures.writer import CallCapture, CaptureSettings, CaptureWriter
from voxproxy.clock import LagMonitor
from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.events import AGENT_TO_CALLER, AnomalyKind, StageMark, ToolEvent
from voxproxy.core.receipt import CloseInfo, Receipt
from voxproxy.core.session import CallSession, SessionConfig
from voxproxy.core.timebase import NS_PER_MS, EpochAnchor

SECRET = b"capture-test-secret"
START_NS = 5_000_000_000


def header(
    *,
    dialect: str = "twilio",
    transport: str = "websocket",
    config: SessionConfig | None = None,
    options: DialectOptions | None = None,
    link_id: str = "link-1",
    questions: tuple[str, ...] = ("clock_lag",),
) -> CaptureHeader:
    return CaptureHeader.of(
        transport=transport,
        dialect=dialect,
        options=options or DialectOptions(),
        config=config or SessionConfig(),
        start_ns=START_NS,
        anchor=EpochAnchor(mono_ns=START_NS - 7, wall_ns=1_800_000_000_000_000_000),
        link_id=link_id,
        secret=SECRET,
        version="test",
        questions=questions,
    )


def scripted_twilio(seed: int = 0) -> ScriptedCall:
    """Two turns on Twilio's wire, the caller talking over the second answer."""
    return render(
        CallPlan(
            dialect="twilio",
            send_mode="burst",
            turns=order_status_turns(600.0, 800.0, 700.0),
            seed=seed,
        )
    )


@dataclass
class Captured:
    receipt: Receipt
    capture: CallCapture
    call: ScriptedCall


def capture_call(
    writer: CaptureWriter,
    call: ScriptedCall,
    *,
    events: bool = True,
    lags: list[tuple[int, int]] | None = None,
) -> Captured:
    """``call`` fed to a session as the proxy feeds one (from START_NS), captured; the
    shell's part too: the agent's answer, event API events, the event loop's ``lags``
    (``(t_ns, lag_ns)`` readings: the session asks how late its clock readings were)."""
    monitor = LagMonitor()
    for t, lag in lags or []:
        monitor.record(t, lag)
    capture = writer.open_call(header())
    session = CallSession(
        make_decoder("twilio", DialectOptions(secret=SECRET)),
        START_NS,
        secret=SECRET,
        link_id="link-1",
        anchor=EpochAnchor(mono_ns=START_NS - 7, wall_ns=1_800_000_000_000_000_000),
        clock_lag=capture.answers("clock_lag", monitor.max_between),
    )
    session.tap = capture
    session.on_upstream_connected(START_NS + 40 * NS_PER_MS)
    for i, (t_ns, direction, message) in enumerate(call.messages):
        session.on_message(direction, message, START_NS + t_ns)
        if events and i == 10:
            session.on_event(ToolEvent("tool.started", START_NS + t_ns, tool="lookup"))
            session.on_event(StageMark("llm", START_NS + t_ns + 1, detail="ok"))
    end_ns = START_NS + call.end_ns
    if events:  # what a shell notes as the call closes
        session.note_anomaly(AnomalyKind.UNDELIVERED, 2)
        session.count_unmeasured(AGENT_TO_CALLER, 3, 120)
    receipt = session.close(end_ns, "caller_closed", CloseInfo(initiator="caller"))
    capture.finish(receipt.call)
    return Captured(receipt, capture, call)


def read_all(path: str | Path) -> tuple[CaptureHeader, list[Record]]:
    with CaptureFile(path) as f:
        return f.header, list(f.records())


def writer_in(directory: Path, **settings: object) -> CaptureWriter:
    return CaptureWriter(CaptureSettings(directory, **settings))  # type: ignore[arg-type]
