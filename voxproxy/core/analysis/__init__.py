"""Pure per-direction analysis: speech detection (``vad``, with ``edges``, ``floor``,
``timeline``, ``voicing`` and ``vadconfig``), the agent's playout
timeline (``playout``), and the speech edges of clean clips (``truth``, the ground
truth the tests and benchmarks score against).

Part of the measurement core. May import: from outside voxproxy only the core's
allow-list (numpy, webrtcvad, the standard library's maths and data modules: no clock,
file or randomness), and from voxproxy only the core
(``events``, ``errors``, ``timebase``, ``audio``). Enforced by tests/test_layers.py.
"""
