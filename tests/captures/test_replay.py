"""Replaying a capture gives the receipt the live session gave, figure for figure: the
same turns, ttfs, stops, uncertainties and reasons (the loop's lags, shed messages and a
given-up measurement included), on a wire and on a WebRTC call's decoded audio."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from support.capturekit import SECRET, START_NS, capture_call, header, scripted_twilio, writer_in
from support.scripted import BargePlan, TurnPlan, WirePlan, render

from voxproxy.captures.format import CaptureError, CaptureHeader
from voxproxy.captures.replay import replay
from voxproxy.captures.writer import CaptureWriter
from voxproxy.clips import clip
from voxproxy.core.dialects import make_decoder
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.dialects.channels import OAI_EVENTS, ChannelDecoder
from voxproxy.core.events import Audio
from voxproxy.core.receipt import CloseInfo, Receipt
from voxproxy.core.session import CallSession, SessionConfig
from voxproxy.core.timebase import NS_PER_MS, EpochAnchor


def _json(r: Receipt) -> dict[str, object]:
    d: dict[str, object] = orjson.loads(r.model_dump_json(by_alias=True))
    return d


def _same_but_source(live: Receipt, again: Receipt) -> None:
    assert again.source == "capture" and live.source == "proxy"
    a, b = _json(live), _json(again)
    del a["source"], b["source"]
    assert a == b


def test_a_replayed_capture_gives_the_live_receipt(tmp_path: Path) -> None:
    writer = writer_in(tmp_path)
    # The loop 10 ms late every 100 ms (a busy proxy): every uncertainty grows by it.
    lags = [(START_NS + k * 100 * NS_PER_MS, 10 * NS_PER_MS) for k in range(200)]
    done = capture_call(writer, scripted_twilio(), lags=lags)
    writer.close()
    live = done.receipt
    assert live.summary.turns == 2 and live.summary.barge_ins_stopped == 1
    assert live.events and live.anomalies == {"undelivered": 2}
    again = replay(tmp_path / f"{live.call}.vxcap", SECRET)
    _same_but_source(live, again)
    # The lags were read: without them the uncertainties are not the live ones.
    unlagged = capture_call(writer_in(tmp_path / "b"), scripted_twilio()).receipt
    assert [t.ttfs_uncertainty_ms for t in unlagged.turns] != [
        t.ttfs_uncertainty_ms for t in live.turns
    ]


def test_without_the_proxy_s_secret_the_call_id_is_still_the_live_one(tmp_path: Path) -> None:
    writer = writer_in(tmp_path)
    live = capture_call(writer, scripted_twilio()).receipt
    writer.close()
    again = replay(tmp_path / f"{live.call}.vxcap", b"another key")
    _same_but_source(live, again)


def test_shed_messages_and_a_given_up_measurement_replay_as_they_were(tmp_path: Path) -> None:
    writer = writer_in(tmp_path)
    call = scripted_twilio(seed=1)
    session = CallSession(
        make_decoder("twilio", DialectOptions(secret=SECRET)),
        START_NS,
        secret=SECRET,
        link_id="link-1",
        anchor=EpochAnchor(mono_ns=START_NS, wall_ns=1_800_000_000_000_000_000),
    )
    session.tap = capture = writer.open_call(header(questions=()))  # (it asks nothing)
    n = len(call.messages)
    for i, (t_ns, direction, message) in enumerate(call.messages):
        if i == 3 * n // 4:
            session.measurement_disabled = True  # the proxy gave up on it here
        session.on_message(direction, message, START_NS + t_ns, shed=n // 3 < i < n // 2)
    live = session.close(START_NS + call.end_ns, "caller_closed", CloseInfo(initiator="caller"))
    capture.finish(live.call)
    writer.close()
    assert live.measurement_disabled and live.anomalies.get("measurement_shed", 0) > 0
    _same_but_source(live, replay(tmp_path / f"{live.call}.vxcap", SECRET))


def _realtime_call() -> list[tuple[int, int, bytes | str]]:
    return render(
        WirePlan(
            dialect="openai-realtime",
            send_mode="paced",
            turns=(
                TurnPlan(
                    clip("caller_hello"),
                    clip("agent_confirm"),
                    700.0,
                    BargePlan(600.0, 150.0, "flush"),
                ),
                TurnPlan(clip("caller_yes"), clip("agent_reprompt"), 600.0),
            ),
            tool_every=1,
        )
    ).messages  # type: ignore[return-value]


def test_a_webrtc_call_s_decoded_audio_and_data_channels_replay(tmp_path: Path) -> None:
    """A WebRTC call's session gets decoded audio (on_audio) and the data channel's
    messages, some on ``oai-events`` (decoded), some on another channel (not), and asks
    its shell how late the caller may have heard the agent (``downstream``)."""
    writer = CaptureWriter(writer_in(tmp_path).settings)
    options = DialectOptions(secret=SECRET)
    config = SessionConfig(transport="webrtc", agent_playout="arrival")
    decoder = ChannelDecoder("auto", options)
    asks = ("clock_lag", "downstream")
    capture = writer.open_call(
        header(dialect="auto", transport="webrtc", config=config, link_id="l-rtc", questions=asks)
    )
    session = CallSession(
        decoder,
        START_NS,
        secret=SECRET,
        link_id="l-rtc",
        config=config,
        anchor=header().anchor,
        clock_lag=capture.answers("clock_lag", lambda a, b: (b // 1_000_000) % 3 * 1_000_000),
        downstream=capture.answers("downstream", lambda t: 4.0 + t % 7),
    )
    session.tap = capture
    audio_of = make_decoder("openai-realtime", options)
    for t_ns, direction, message in _realtime_call():
        t = START_NS + t_ns
        found = [e for e in audio_of.decode(direction, message, t) if isinstance(e, Audio)]
        if found:  # the media: decoded as the WebRTC relay hands it over
            for a in found:
                session.on_audio(Audio(direction, a.pcm, a.sample_rate_hz, t), wire_bytes=160)
            continue
        decoder.label = OAI_EVENTS
        capture.label(OAI_EVENTS)
        session.on_message(direction, message, t)
        decoder.label = "chat"
        capture.label("chat")
        session.on_message(direction, '{"type":"chat","text":"hello"}', t)
    end = START_NS + 20_000 * NS_PER_MS
    live = session.close(end, "caller_closed", CloseInfo(initiator="caller"), dialect=decoder.name)
    capture.finish(live.call)
    writer.close()
    assert live.transport == "webrtc" and live.dialect == "openai-realtime"
    assert live.summary.turns >= 2 and live.events
    _same_but_source(live, replay(tmp_path / f"{live.call}.vxcap", SECRET))


def test_a_cut_capture_is_not_replayed(tmp_path: Path) -> None:
    writer = writer_in(tmp_path)
    live = capture_call(writer, scripted_twilio()).receipt
    writer.close()
    path = tmp_path / f"{live.call}.vxcap"
    path.write_bytes(path.read_bytes()[:-200])
    with pytest.raises(CaptureError, match="truncated capture"):
        replay(path, SECRET)


def test_a_header_of_an_unknown_transport_or_settings_is_one_line(tmp_path: Path) -> None:
    for bad, says in (
        ({"transport": "carrier-pigeon"}, "transport 'carrier-pigeon'"),
        ({"session": {"vad": {}, "turns": {}, "warp": 9}}, "settings this voxproxy does not read"),
    ):
        fields = {f: getattr(header(), f) for f in CaptureHeader.__slots__}
        fields.update(bad)
        path = tmp_path / "bad.vxcap"
        path.write_bytes(CaptureHeader(**fields).to_bytes())
        with pytest.raises(CaptureError, match=says):
            replay(path, SECRET)
