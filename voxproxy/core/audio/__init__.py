"""Pure sample math: G.711, PCM conversions, resampling for VAD, levels.

Part of the measurement core (its vocabulary). May import: from outside voxproxy only
the core's allow-list (numpy, scipy.signal, the standard library's maths and data
modules: no clock, file or randomness), and from voxproxy only ``events``,
``direction``, ``errors`` and ``timebase``. Enforced by tests/test_layers.py.
"""
