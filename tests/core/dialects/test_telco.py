"""voxproxy.core.dialects._telco: the decoder shared by the Twilio-shaped JSON wires, on
a small wire declared here (its events, its start, an agent format of its own). Each real
wire's tables: test_telnyx.py, test_plivo.py, test_exotel.py."""

from __future__ import annotations

import base64
import json
from typing import Any, ClassVar

import numpy as np

from voxproxy.core import events as ev
from voxproxy.core.audio.g711 import pcm_to_ulaw, ulaw_to_pcm
from voxproxy.core.dialects._telco import (
    DTMF,
    FLUSH,
    MARK,
    MEDIA,
    QUIET,
    START,
    STOP,
    MediaStreamDecoder,
)

CALLER, AGENT = ev.CALLER_TO_AGENT, ev.AGENT_TO_CALLER
T = 1_000
PCM = np.array([0, 1000, -1000, 4000], dtype=np.int16)


class ToyWire(MediaStreamDecoder):
    """Caller events hi/go/audio/seen/key/bye; agent events play/marked/hush."""

    name = "toy"
    caller_events: ClassVar[dict[str, str]] = {
        "hi": QUIET,
        "go": START,
        "audio": MEDIA,
        "seen": MARK,
        "key": DTMF,
        "bye": STOP,
    }
    agent_events: ClassVar[dict[str, str]] = {"play": MEDIA, "marked": MARK, "hush": FLUSH}

    def on_start(self, start: dict[str, Any], msg: dict[str, Any], t_ns: int) -> list[ev.Event]:
        codec = start.get("codec")
        encoding = (
            {"PCMU": "ulaw", "L16": "pcm_s16le"}.get(codec) if isinstance(codec, str) else None
        )
        self.set_codec(encoding, int(start.get("rate", 8000)))
        return [self.stream_start(start.get("id"), self.sample_rate_hz, encoding, t_ns)]

    def agent_format(self, media: dict[str, Any], t_ns: int) -> tuple[str, int] | ev.Anomaly | None:
        fmt = media.get("format")
        if fmt is None:
            return None
        if fmt == "L16/16000":
            return "pcm_s16le", 16000
        return ev.Anomaly(ev.AnomalyKind.MALFORMED, AGENT, t_ns)


def msg(event: str, **fields: object) -> str:
    return json.dumps({"event": event, **fields})


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_each_event_plays_the_part_its_table_gives_it() -> None:
    d = ToyWire()
    assert d.decode(CALLER, msg("hi"), T) == []
    assert d.decode(CALLER, msg("seen", mark={"name": "m1"}), T) == [ev.MarkEcho("m1", T)]
    assert d.decode(AGENT, msg("marked", mark={"name": "m1"}), T) == [ev.MarkSent("m1", T)]
    assert d.decode(CALLER, msg("key"), T) == [ev.Dtmf(T)]
    assert d.decode(CALLER, msg("bye"), T) == [ev.StreamStop(T)]
    assert d.decode(AGENT, msg("hush"), T) == [ev.Flush(T, "hush")]


def test_an_event_of_the_other_direction_or_none_at_all_is_an_anomaly() -> None:
    d = ToyWire()
    (unknown,) = d.decode(CALLER, msg("hush"), T)  # an agent event from the caller
    assert isinstance(unknown, ev.Anomaly) and unknown.kind is ev.AnomalyKind.UNKNOWN_EVENT
    (no_event,) = d.decode(CALLER, json.dumps({"event": 3}), T)
    assert isinstance(no_event, ev.Anomaly) and no_event.kind is ev.AnomalyKind.MALFORMED
    (binary,) = d.decode(CALLER, b"{}", T)
    assert isinstance(binary, ev.Anomaly) and binary.kind is ev.AnomalyKind.UNEXPECTED_BINARY
    (nameless,) = d.decode(AGENT, msg("marked", mark={"name": 5}), T)
    assert isinstance(nameless, ev.Anomaly) and nameless.kind is ev.AnomalyKind.MALFORMED


def test_caller_media_decodes_at_the_streams_codec_and_rate() -> None:
    d = ToyWire()
    assert d.codec(CALLER) == "ulaw" and d.sample_rate_hz == 8000
    (audio,) = d.decode(CALLER, msg("audio", media={"payload": b64(pcm_to_ulaw(PCM))}), T)
    assert isinstance(audio, ev.Audio) and audio.sample_rate_hz == 8000
    assert np.array_equal(audio.pcm, ulaw_to_pcm(pcm_to_ulaw(PCM)))
    start = d.decode(CALLER, msg("go", start={"codec": "L16", "rate": 16000, "id": "c1"}), T)
    assert start == [ev.StreamStart("c1", 16000, "pcm_s16le", T)]
    (audio,) = d.decode(CALLER, msg("audio", media={"payload": b64(PCM.tobytes())}), T)
    assert audio.sample_rate_hz == 16000 and np.array_equal(audio.pcm, PCM)


def test_a_codec_the_core_cannot_decode_yields_no_audio_and_says_so() -> None:
    d = ToyWire()
    start = d.decode(CALLER, msg("go", start={"codec": "OPUS", "rate": 48000, "id": ""}), T)
    assert start == [ev.StreamStart(None, 48000, None, T)]  # an empty id is no id
    assert d.undecodable and d.codec(CALLER) is None
    assert d.decode(CALLER, msg("audio", media={"payload": b64(b"\x01\x02")}), T) == []


def test_the_agents_own_audio_echoed_on_an_outbound_track_is_not_caller_audio() -> None:
    d = ToyWire()
    payload = b64(pcm_to_ulaw(PCM))
    assert d.decode(CALLER, msg("audio", media={"payload": payload, "track": "outbound"}), T) == []
    for track in ("inbound", "inbound_track"):
        got = d.decode(CALLER, msg("audio", media={"payload": payload, "track": track}), T)
        assert len(got) == 1 and isinstance(got[0], ev.Audio)


def test_agent_media_may_declare_a_format_of_its_own() -> None:
    d = ToyWire()
    (audio,) = d.decode(
        AGENT, msg("play", media={"payload": b64(PCM.tobytes()), "format": "L16/16000"}), T
    )
    assert isinstance(audio, ev.Audio) and audio.sample_rate_hz == 16000
    assert np.array_equal(audio.pcm, PCM)
    (bad,) = d.decode(AGENT, msg("play", media={"payload": "AAAA", "format": "?"}), T)
    assert isinstance(bad, ev.Anomaly) and bad.direction is AGENT
    (plain,) = d.decode(AGENT, msg("play", media={"payload": b64(pcm_to_ulaw(PCM))}), T)
    assert isinstance(plain, ev.Audio) and plain.sample_rate_hz == 8000  # the stream's


def test_malformed_media_and_start_are_anomalies_of_their_kind() -> None:
    d = ToyWire()
    (no_media,) = d.decode(CALLER, msg("audio", media="x"), T)
    assert isinstance(no_media, ev.Anomaly) and no_media.kind is ev.AnomalyKind.MALFORMED
    (bad_b64,) = d.decode(CALLER, msg("audio", media={"payload": "***"}), T)
    assert isinstance(bad_b64, ev.Anomaly) and bad_b64.kind is ev.AnomalyKind.INVALID_BASE64
    (no_start,) = d.decode(CALLER, msg("go", start=[1]), T)
    assert isinstance(no_start, ev.Anomaly) and no_start.kind is ev.AnomalyKind.MALFORMED
