"""Pure wire codecs, one module per wire.

Each decoder turns one websocket message (text or binary) into normalized
events (:mod:`voxproxy.core.events`). Decoders never raise on bad input from a
peer: they return :class:`~voxproxy.core.events.Anomaly` events instead. Wire names
stay verbatim inside each module. The ``*CallerWire``/``*AgentWire`` classes beside
the decoders build messages for the load generator, the mock agent and tests; the
proxy never builds a message. The JSON media-stream wires of the Twilio shape share a
decoder base (``_telco.MediaStreamDecoder``) and a builder base (``_stream.StreamWire``).

Part of the measurement core. May import: from outside voxproxy only the core's
allow-list (numpy, orjson, the standard library's data modules: no clock, file or
randomness; the secret a wire's hashes use is handed in), and from voxproxy only the core
(``events``, ``errors``, ``ids``, ``timebase``, ``audio``). Enforced by
tests/test_layers.py.
"""

from voxproxy.core.dialects.base import Decoder
from voxproxy.core.dialects.registry import DIALECTS, make_decoder

__all__ = ["DIALECTS", "Decoder", "make_decoder"]
