"""What the WebRTC mock agent logs of what it sent (``voxproxy/simcall/webrtc.py``): a
short key per payload that tells payloads apart, and a call log that keeps its own
lists beside the websocket call log's."""

from __future__ import annotations

import os

from voxproxy.simcall.log import CallLog
from voxproxy.simcall.webrtc import SentChunk, WebRtcCallLog, payload_key


def test_a_payload_s_key_is_short_the_same_for_the_same_bytes_and_tells_others_apart() -> None:
    payloads = [b"", b"\x00", b"\x00\x00", *(os.urandom(80) for _ in range(200))]
    keys = [payload_key(p) for p in payloads]
    assert all(len(k) == 12 for k in keys)
    assert len(set(keys)) == len(set(payloads))
    assert payload_key(bytes(payloads[5])) == keys[5]


def test_a_webrtc_call_log_is_a_call_log_with_lists_of_its_own() -> None:
    a = WebRtcCallLog(index=0, path="/whip", headers={}, subprotocol=None)
    b = WebRtcCallLog(index=1, path="/api/offer", headers={}, subprotocol=None, signaling="pipecat")
    assert isinstance(a, CallLog) and a.signaling == "whip" and b.signaling == "pipecat"
    a.chunks.append(SentChunk(response=1, clip_pos=0, n=960, key=payload_key(b"x"), sent_ns=5))
    a.channel_messages.append(("oai-events", "{}"))
    assert b.chunks == [] and b.channel_messages == []
    assert a.samples_sent == 0 and a.connected_ns is None and a.caller_packets == 0
