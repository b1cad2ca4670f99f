"""Replaying caller audio: scripted real-time callers, scenarios, results and reports.

A scripted caller is an independent peer of whatever agent it calls: the load
generator never imports the mock agent. What both sides must agree on (task scripts,
the agent's log of what it did) is in :mod:`voxproxy.simcall`; running mock agents
behind proxies is :mod:`voxproxy.harness`'s.

May import: the standard library, websockets, aiohttp, numpy, and from voxproxy the
core, the shared pieces (``clock``, ``extras`` ...), ``simcall``, ``receipts``,
``transcripts``, ``transports``, ``clips``. Never ``mockagent``, ``harness``, ``proxy``,
``cli`` or ``commands`` (enforced by tests/test_layers.py).
"""
