"""A reference websocket voice agent with switchable timing, barge-in and faults.

It answers each caller turn (as its own VAD hears it) with a fixture clip after
a configured delay, paced in real time or in bursts, and logs every message and
response so tests can compare what the proxy measured with what really happened.

An independent peer of the callers that call it: it never imports the load
generator. May import: the standard library, websockets, aiohttp, numpy, yaml, and
from voxproxy the core, the shared pieces (``clock`` ...), ``simcall``, ``transports``
and ``clips``. Never ``loadgen``,
``harness``, ``proxy``, ``cli`` or ``commands`` (enforced by tests/test_layers.py).
"""

from voxproxy.mockagent.config import MockAgentConfig, default_responses
from voxproxy.mockagent.server import MockAgent, run_cli
from voxproxy.simcall.log import CallLog, ResponseLog

__all__ = ["CallLog", "MockAgent", "MockAgentConfig", "ResponseLog", "default_responses", "run_cli"]
