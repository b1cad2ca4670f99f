"""What the WebRTC mock agent logs of what it sent, for the caller to match with what
arrived (:func:`voxproxy.loadgen.webrtc.webrtc_turn_truths`).

Clips are sent at 48 kHz, so each Opus frame holds exactly one 20 ms slice of a clip;
every payload sent is logged with the clip position it carries and a short key.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from voxproxy.simcall.log import CallLog

CLIP_RATE_HZ = 48000


def payload_key(payload: bytes) -> bytes:
    """A short key for a payload, to match what was sent with what arrived."""
    return hashlib.blake2b(payload, digest_size=12).digest()


@dataclass(slots=True)
class SentChunk:
    """One payload of an answer: which response, which clip samples, when."""

    response: int  # ResponseLog.index
    clip_pos: int  # the clip sample (48 kHz) at the start of the payload
    n: int
    key: bytes  # payload_key(payload)
    sent_ns: int


@dataclass(slots=True)
class WebRtcCallLog(CallLog):
    """A :class:`CallLog` plus every answer payload sent and the data channel traffic."""

    chunks: list[SentChunk] = field(default_factory=list)
    channel_messages: list[tuple[str, str | bytes]] = field(default_factory=list)
    signaling: str = "whip"
    connected_ns: int | None = None
    caller_packets: int = 0
