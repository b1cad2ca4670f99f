"""One call, measured: dialect -> analysis -> turns -> receipt. Sans-I/O.

A :class:`CallSession` is handed copies of the call's messages with their
arrival times and returns a :class:`~voxproxy.receipts.Receipt` when the call
ends. It reads no clock, opens no socket and never raises on what a peer sent:
bad messages become anomalies, and an internal error is counted
(``measurement_error``) rather than allowed to reach the forwarding plane.

Data flow per message::

    decoder.decode() -> Audio(caller) -> Converter -> SpeechDetector(caller)
                     -> Audio(agent)  -> Converter -> Playout -> (as time passes)
                                                               SpeechDetector(agent)
                     -> Flush / MarkSent / MarkEcho / StreamStart / Anomaly ...
    spurts + flushes -- merged in time order below a watermark --> TurnMachine

The modules: ``call`` (:class:`CallSession`: ingest, pump, watermark, close),
``config`` (:class:`SessionConfig`, the limits), ``marks`` (agent marks and their
echoes, audio items and truncates), ``evidence`` (the spans behind each edge: when a
figure is withheld, its uncertainty), ``stages`` (a realtime server's stage marks per
turn) and ``receipt`` (the receipt, built from a closed session).

Part of the measurement core. May import: from outside voxproxy only the core's
allow-list (numpy, the standard library's maths and data modules: no clock, file or
randomness), and from voxproxy only the core. Enforced by
tests/test_layers.py.
"""

from voxproxy.core.session.call import CallSession
from voxproxy.core.session.config import (
    CALLER_AHEAD_TOLERANCE_MS,
    MAX_MEASUREMENT_ERRORS,
    MAX_TOOL_EVENTS,
    SessionConfig,
)
from voxproxy.core.session.evidence import FIGURE_BASE_MS
from voxproxy.core.session.marks import MAX_MARK_NAME_CHARS, MAX_PENDING_MARKS

__all__ = [
    "CALLER_AHEAD_TOLERANCE_MS",
    "FIGURE_BASE_MS",
    "MAX_MARK_NAME_CHARS",
    "MAX_MEASUREMENT_ERRORS",
    "MAX_PENDING_MARKS",
    "MAX_TOOL_EVENTS",
    "CallSession",
    "SessionConfig",
]
