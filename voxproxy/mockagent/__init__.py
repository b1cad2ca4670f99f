"""A reference websocket voice agent with switchable timing, barge-in and faults.

It answers each caller turn (as its own VAD hears it) with a fixture clip after
a configured delay, paced in real time or in bursts, and logs every message and
response so tests can compare what the proxy measured with what really happened.
"""

from voxproxy.mockagent.config import MockAgentConfig, default_responses
from voxproxy.mockagent.log import CallLog, ResponseLog
from voxproxy.mockagent.server import MockAgent, run_cli

__all__ = ["CallLog", "MockAgent", "MockAgentConfig", "ResponseLog", "default_responses", "run_cli"]
