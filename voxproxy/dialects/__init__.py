"""Pure wire codecs, one module per wire.

Each decoder turns one websocket message (text or binary) into normalized
events (:mod:`voxproxy.events`). Decoders never raise on bad input from a
peer: they return :class:`~voxproxy.events.Anomaly` events instead. Wire names
stay verbatim inside each module.
"""

from voxproxy.dialects.base import DIALECTS, Decoder, make_decoder

__all__ = ["DIALECTS", "Decoder", "make_decoder"]
