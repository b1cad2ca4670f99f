"""The asyncio shells that move the bytes: the forwarding plane.

``websocket`` relays WebSocket calls (on websockets' sans-I/O protocol); ``webrtc``
relays WebRTC calls (on aiortc). They stamp each message on arrival and hand copies to
an observer; they never wait on measurement.

May import: the standard library, websockets, aiortc/aioice/av, aiohttp, numpy, and
from voxproxy the core (``events``, ``timebase``, ``audio``), ``errors``,
``httpserve`` and ``fdwatch``. Never ``proxy``, ``session``, ``receipts``,
``telemetry``, ``loadgen`` or ``mockagent``: those sit above (enforced by
tests/test_layers.py).
"""
