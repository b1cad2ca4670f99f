"""Pure per-direction analysis: speech detection (``vad``, with ``edges``, ``floor``,
``timeline``, ``voicing`` and ``vadconfig``), the agent's playout
timeline (``playout``), and the speech edges of clean clips (``truth``, the ground
truth the tests and benchmarks score against).

Part of the measurement core. May import: the standard library (no asyncio, socket,
time, os, random, threads), numpy, webrtcvad, and from voxproxy only the core
(``events``, ``errors``, ``timebase``, ``audio``). Enforced by tests/test_layers.py.
"""
