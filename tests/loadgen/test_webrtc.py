"""The WebRTC caller's truth at the proxy's vantage: frames that left late move it."""

from __future__ import annotations

from voxproxy.loadgen.record import NoiseTruth, SpeechTruth
from voxproxy.loadgen.webrtc import move_to_departures

MS = 1_000_000
RATE = 48000
FRAME = 960  # 20 ms
T0 = 5_000 * MS


def _at(pos: int) -> int:
    """The capture instant of stream sample ``pos`` (as the caller records its truth)."""
    return T0 + pos * 1_000_000_000 // RATE


def test_an_edge_in_a_frame_that_left_late_moves_by_that_frame_s_lag() -> None:
    """Frame k (samples [k*960, (k+1)*960)) is due to leave at the end of its interval;
    the proxy places it by its arrival, so an edge inside it is seen as late as it left."""
    pushed = [(k + 1) * FRAME for k in range(10)]  # each frame's end position
    sent = [_at(end) for end in pushed]  # on time ...
    sent[3] += 30 * MS  # ... but frame 3 (the onset's) left 30 ms late
    sent[7] += 12 * MS  # and frame 7 (the offset's) 12 ms late
    speech = [SpeechTruth("c", _at(3 * FRAME + 100), _at(7 * FRAME + 960))]
    noise = [NoiseTruth("n", _at(5 * FRAME), _at(6 * FRAME + 1))]
    assert move_to_departures(speech, noise, pushed, sent, T0, RATE, FRAME)
    assert speech[0].onset_ns == _at(3 * FRAME + 100) + 30 * MS
    # The offset is the end of the last speech sample: the last sample of frame 7.
    assert speech[0].offset_ns == _at(7 * FRAME + 960) + 12 * MS
    assert (noise[0].onset_ns, noise[0].offset_ns) == (_at(5 * FRAME), _at(6 * FRAME + 1))


def test_frames_not_sent_by_the_hang_up_leave_their_edges_where_they_were() -> None:
    pushed = [(k + 1) * FRAME for k in range(4)]
    sent = [_at(end) + 40 * MS for end in pushed[:3]]  # the last still queued
    speech = [SpeechTruth("c", _at(100), _at(3 * FRAME + 10))]
    assert move_to_departures(speech, [], pushed, sent, T0, RATE, FRAME)
    assert (speech[0].onset_ns, speech[0].offset_ns) == (_at(100) + 40 * MS, _at(3 * FRAME + 10))
    # More departures than frames: not this caller's order; nothing moves.
    assert not move_to_departures(speech, [], pushed[:2], sent, T0, RATE, FRAME)
