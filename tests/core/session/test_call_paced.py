"""Paced (WebRTC) measurement on a scripted timeline: ``CallSession.on_audio`` with
agent audio audible on arrival, against the truth of scripted calls.

The plans are the websocket ones sent in real time (``paced``), 20 ms frames with
up to 2 ms of jitter; there is no flush on a paced transport, so an agent that
reacts to a barge-in simply stops sending. The second test sends every frame
through the WebRTC codec path (48 kHz, Opus, decoded to 16 kHz as the relay
does), with the agent sending nothing between answers (so every answer follows
a pause in its packets).
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from support.groundtruth import Errors, random_plan, score
from support.scripted import CallPlan, ScriptedCall, render
from support.sessiontime import advance

from voxproxy.core.audio.pcm import bytes_to_pcm
from voxproxy.core.events import AGENT_TO_CALLER, Audio, Direction
from voxproxy.core.receipt import CloseInfo, Receipt
from voxproxy.core.session import CallSession, SessionConfig
from voxproxy.transports.webrtc import (
    AudioEncoder,
    MeasuredStream,
    RtpIn,
    default_codec,
)
from voxproxy.transports.webrtc.codecs import _lowpass

PACED = SessionConfig(transport="webrtc", agent_playout="arrival")


def paced_plan(rng: random.Random) -> CallPlan:
    """A paced raw plan whose barge-in reactions simply stop the audio (no flush)."""
    plan = random_plan(rng, "raw", "paced")
    turns = tuple(
        replace(t, barge=replace(t.barge, reaction="cease"))
        if t.barge is not None and t.barge.reaction == "flush"
        else t
        for t in plan.turns
    )
    return replace(plan, turns=turns)


class _Upsampler:
    """16 kHz -> 48 kHz (zero-stuffing and the relay's own low-pass), chunk by chunk,
    so that the encoder gets 48 kHz frames as a browser's or an aiortc sender's does."""

    def __init__(self) -> None:
        self.h = _lowpass(3) * 3
        self.tail = np.zeros(self.h.size - 1)

    def __call__(self, pcm16: np.ndarray) -> np.ndarray:
        z = np.zeros(pcm16.size * 3)
        z[::3] = pcm16
        x = np.concatenate((self.tail, z))
        y = np.convolve(x, self.h, mode="valid")
        self.tail = x[-(self.h.size - 1) :]
        return np.clip(np.rint(y), -32768, 32767).astype(np.int16)


class _OpusPath:
    """One direction through the WebRTC codec path: 48 kHz Opus -> what the relay measures."""

    def __init__(self) -> None:
        self.codec = default_codec("opus")
        self.up = _Upsampler()
        self.enc = AudioEncoder(self.codec)
        self.heard = MeasuredStream()

    def __call__(self, pcm16: np.ndarray, t_ns: int) -> np.ndarray:
        out = [
            self.heard(RtpIn(p, 0, 0, False, t_ns, self.codec))
            for p in self.enc.encode(self.up(pcm16), 48000)
        ]
        assert self.heard.rate_hz in (0, 16000)
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int16)


def measure_paced(call: ScriptedCall, opus: bool = False) -> Receipt:
    session = CallSession(_NoDecoder(), 0, secret=b"test", link_id="paced", config=PACED)
    paths = (_OpusPath(), _OpusPath()) if opus else None
    for t, d, payload in call.messages:
        if isinstance(payload, str):
            continue  # the raw wire's start message and flushes: not on a paced transport
        pcm = bytes_to_pcm(payload)
        if paths is not None:
            pcm = paths[d](pcm, t)
        session.on_audio(Audio(d, pcm, 16000, t), wire_bytes=len(payload))
        advance(session, t)
    return session.close(call.end_ns, "caller_closed", CloseInfo(initiator="caller"))


class _NoDecoder:
    name = "webrtc"

    def decode(self, direction: Direction, payload: bytes | str, t_ns: int) -> list[object]:
        del direction, payload, t_ns
        return []


def _run(seed: int, calls: int, opus: bool) -> Errors:
    rng = random.Random(seed)
    errors = Errors([], [], [])
    for k in range(calls):
        call = render(paced_plan(rng))
        receipt = measure_paced(call, opus)
        assert receipt.transport == "webrtc"
        assert receipt.traffic.agent_audio_dropped_ms == 0.0  # nothing is queued, so none drops
        score(call, receipt, errors, f"paced/{k}")
    return errors


@pytest.mark.slow
def test_paced_audio_on_arrival_matches_ground_truth() -> None:
    errors = _run(seed=7, calls=24, opus=False)
    assert not errors.problems, errors.problems
    assert len(errors.ambiguous) <= 0.05 * max(len(errors.ttfs), 1), errors.ambiguous
    errors.within("paced fake clock")  # issue 13's bounds


@pytest.mark.slow
def test_paced_audio_through_opus_matches_ground_truth() -> None:
    errors = _run(seed=11, calls=6, opus=True)
    assert not errors.problems, errors.problems
    assert len(errors.ambiguous) <= 0.05 * max(len(errors.ttfs), 1), errors.ambiguous
    # Opus moves every edge by its look-ahead (about 7.5 ms with the filters, which cancels
    # in both figures) and soft onsets and endings by up to about 20 ms more.
    errors.within("paced fake clock through Opus", ttfs=(25.0, 40.0), stop=(25.0, 40.0))


def test_agent_audio_is_heard_on_arrival_not_queued() -> None:
    """Paced chunks that arrive early are not pushed back behind a playout cursor."""
    session = CallSession(_NoDecoder(), 0, secret=b"t", link_id="x", config=PACED)
    tone = (np.sin(np.arange(320) * 2 * np.pi * 200 / 16000) * 8000).astype(np.int16)
    t = 1_000_000_000
    # A 60 ms hiccup: three chunks arrive at once, then the stream goes on in time.
    times = [t + k * 20_000_000 for k in range(10)]
    times[3:6] = [times[5]] * 3
    for at in times:
        session.on_audio(Audio(AGENT_TO_CALLER, tone, 16000, at))
        advance(session, at)
    assert session._playout is None  # no playout model on a paced transport
    assert session.hearing.arrival_end_ns == times[-1] + 20_000_000
