"""Pure sample math: G.711, PCM conversions, resampling for VAD, levels.

Part of the measurement core. May import: the standard library (no asyncio, socket,
time, os, random, threads), numpy, and from voxproxy only ``events``, ``direction``,
``errors`` and ``timebase``. Enforced by tests/test_layers.py.
"""
