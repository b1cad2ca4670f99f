"""The measurement core: sans-I/O, handed timestamps, reading no clock.

Everything a figure is made of lives here, and nothing else does: the vocabulary the
layers speak (``events``, ``direction``, ``timebase``, ``ids``, ``errors``, ``audio``),
the dialects' decoders (``dialects``), the speech analysis (``analysis``), a call's
session and its batch entry (``session``), turns and tool effects (``turns``,
``effects``) and the receipt it closes into (``receipt``). The shells (transports, the
proxy, the load generator, the recordings reader) stamp every message with its arrival
time and hand it in; randomness and files come in from them too.

May import: from outside voxproxy only the core's allow-list (numpy, scipy.signal,
webrtcvad, pydantic, orjson, the standard library's maths and data modules: no clock,
file, socket or randomness), and from voxproxy only the core itself; its vocabulary
(``audio``, ``direction``, ``errors``, ``events``, ``ids``, ``timebase``) imports nothing
else of the core. Enforced by tests/test_layers.py.
"""
