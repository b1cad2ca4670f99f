"""``voxproxy analyze``: a folder of recordings, the damaged ones skipped with one line
each, receipts that ``receipts export`` reads, the report, OTLP export."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
from support.otlp_receiver import HttpReceiver
from support.scripted.recording import recording_plans, recording_tracks, render_recording

from voxproxy.cli import main
from voxproxy.clips import load_corpus
from voxproxy.receipts.writer import read_receipts
from voxproxy.recordings.wavfile import wav_bytes


def _speech(role: str) -> list:  # type: ignore[type-arg]
    return [c for c in load_corpus().values() if c.role == role and c.kind == "speech"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three good recordings (8 kHz mu-law with echo, 16 kHz PCM, 8 kHz A-law) and the
    damaged files a real folder holds."""
    root = tmp_path_factory.mktemp("recordings")
    plans = recording_plans(3, 31, _speech("caller"), _speech("agent"), turns=3)
    for k, (rate, enc, echo) in enumerate(
        [(8000, "ulaw", -20.0), (16000, "pcm_s16le", None), (8000, "alaw", None)]
    ):
        tracks = recording_tracks(render_recording(plans[k]), rate, echo_db=echo)
        (root / f"call{k}.wav").write_bytes(wav_bytes(list(tracks), rate, enc))
    good = (root / "call0.wav").read_bytes()
    (root / "truncated.wav").write_bytes(good[: len(good) // 3])
    (root / "empty.wav").write_bytes(b"")
    (root / "notes.wav").write_text("not audio at all\n")
    mono = np.zeros(800, dtype=np.int16)
    (root / "mono.wav").write_bytes(wav_bytes([mono], 8000))
    (root / "three.wav").write_bytes(wav_bytes([mono, mono, mono], 8000))
    return root


def test_a_folder_gives_a_receipt_per_call_and_a_line_per_damaged_file(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out" / "receipts.jsonl"
    args = ["analyze", str(folder), "--receipts", str(out), "--jobs", "2", "--no-progress"]
    status = main([*args, "--secret", "k"])
    captured = capsys.readouterr()
    assert status == 1  # some were skipped
    assert "Traceback" not in captured.err
    skipped = [line for line in captured.err.splitlines() if "skipped" in line and ":" in line]
    names = sorted(line.split("skipped ")[1].split(":")[0].rsplit("/", 1)[-1] for line in skipped)
    assert names == ["empty.wav", "mono.wav", "notes.wav", "three.wav", "truncated.wav"]
    assert "truncated" in captured.err and "empty file" in captured.err
    receipts = list(read_receipts(str(out)))
    assert len(receipts) == 3
    assert all(r.source == "recording" and r.vantage == "listener" for r in receipts)
    assert all(r.verdict is not None and r.policy for r in receipts)
    assert [r.recording.encoding for r in receipts if r.recording] == ["ulaw", "pcm_s16le", "alaw"]
    echo = receipts[0].recording.echo if receipts[0].recording else None
    assert echo is not None and echo.action in ("removed", "withheld")
    assert "3 of 8 recording(s) measured" in captured.out
    report = (out.parent / "report.html").read_text()
    assert report.count("<audio") == 3 and "truncated.wav" in report
    again = main([*args, "--secret", "k"])
    assert again == 1
    assert [r.call for r in read_receipts(str(out))] == [r.call for r in receipts]


def test_receipts_export_reads_them(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "receipts.jsonl"
    assert (
        main(["analyze", str(folder / "call1.wav"), "--receipts", str(out), "--no-progress"]) == 0
    )
    rows = tmp_path / "calls.jsonl"
    assert main(["receipts", "export", "--receipts", str(out), "--out", str(rows)]) == 0
    (row,) = [json.loads(line) for line in rows.read_text().splitlines()]
    assert (row["source"], row["vantage"], row["transport"]) == ("recording", "listener", "offline")
    assert row["turns"] == 3


def test_a_pair_and_the_channels_flag(folder: Path, tmp_path: Path) -> None:
    from voxproxy.recordings.wavfile import read_wav_bytes

    audio = read_wav_bytes((folder / "call1.wav").read_bytes())
    caller, agent = audio.channels
    (tmp_path / "caller.wav").write_bytes(wav_bytes([caller], 16000))
    (tmp_path / "agent.wav").write_bytes(wav_bytes([agent[8000:]], 16000))
    (tmp_path / "swapped.wav").write_bytes(wav_bytes([agent, caller], 16000))
    out = tmp_path / "r.jsonl"
    pair = ["--pair", str(tmp_path / "caller.wav"), str(tmp_path / "agent.wav"), "500"]
    status = main(["analyze", *pair, "--receipts", str(out), "--no-progress", "--report", "none"])
    assert status == 0 and not (tmp_path / "report.html").exists()
    (paired,) = read_receipts(str(out))
    swapped = ["analyze", str(tmp_path / "swapped.wav"), "--channels", "agent,caller"]
    assert main([*swapped, "--receipts", str(out), "--no-progress"]) == 0
    (stereo,) = read_receipts(str(out))
    assert paired.recording is not None and paired.recording.layout == "mono_pair"
    assert [t.ttfs_ms for t in paired.turns] == pytest.approx(
        [t.ttfs_ms for t in stereo.turns], abs=1.0
    )
    assert main(["analyze", "--channels", "left,right", str(folder)]) == 2
    assert main(["analyze", "--receipts", str(out)]) == 2  # nothing to analyse


async def test_otlp_export_sends_each_receipt(folder: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    receiver = await HttpReceiver().start()
    try:
        for name in ("OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_LOGS_EXPORTER"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
        out = tmp_path / "r.jsonl"
        args = ["analyze", str(folder / "call2.wav"), "--receipts", str(out), "--no-progress"]
        assert await asyncio.to_thread(main, [*args, "--otel"]) == 0
        await receiver.wait_for(lambda r: r.named("voxproxy.call") and r.logs)
        (receipt,) = read_receipts(str(out))
        (call,) = receiver.received.named("voxproxy.call")
        assert receipt.call in json.dumps(call.attributes)
        assert call.resource["service.name"] == "voxproxy-analyze"  # apart from the proxy's
    finally:
        await receiver.stop()


def test_captures_in_a_folder_replay_into_their_live_receipts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Captures beside recordings: found by their suffix, replayed across 2 workers into
    the receipts their sessions gave (source: capture), a cut one skipped in one line;
    the report draws their timelines without a player (no audio file to play)."""
    from support.capturekit import SECRET, capture_call, scripted_twilio, writer_in

    caps = tmp_path / "caps"
    writer = writer_in(caps)
    live = [capture_call(writer, scripted_twilio(seed)).receipt for seed in (0, 1)]
    writer.close()
    first = caps / f"{live[0].call}.vxcap"
    (caps / "cut.vxcap").write_bytes(first.read_bytes()[:-100])
    out = tmp_path / "again.jsonl"
    args = ["analyze", str(caps), "--receipts", str(out), "--jobs", "2", "--no-progress"]
    assert main([*args, "--secret", SECRET.decode()]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "skipped" in line]
    assert len(err) == 2 and "cut.vxcap: truncated capture" in err[0]  # (and the summary)

    def order(r: dict[str, object]) -> tuple[str, str]:
        return str(r["call"]), json.dumps(r["turns"])

    again = sorted((json.loads(line) for line in out.read_text().splitlines()), key=order)
    expected = sorted((json.loads(r.model_dump_json(by_alias=True)) for r in live), key=order)
    assert [r.pop("source") for r in again] == ["capture", "capture"]
    for r in again:
        r.pop("verdict"), r.pop("policy")  # (judged here; the live session was not)
    for r in expected:
        r.pop("source"), r.pop("verdict"), r.pop("policy")
    assert again == expected
    report = (tmp_path / "report.html").read_text()
    assert report.count("<section class='call'") == 2 and "<audio" not in report
