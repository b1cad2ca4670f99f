"""Recordings from files: which channel is whom, pairs and their offset, damaged files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voxproxy.recordings.files import (
    RecordingError,
    decode_file,
    parse_channels,
    read_pair,
    read_stereo,
    recordings_in,
)
from voxproxy.recordings.wavfile import wav_bytes


def _pcm(n: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(n) * 3000).astype(np.int16)


def test_left_is_the_caller_unless_the_channels_say_otherwise(tmp_path: Path) -> None:
    left, right = _pcm(1600, 1), _pcm(1600, 2)
    path = tmp_path / "call.wav"
    path.write_bytes(wav_bytes([left, right], 8000, "pcm_s16le"))
    rec = read_stereo(path)
    assert np.array_equal(rec.caller.pcm, left) and np.array_equal(rec.agent.pcm, right)
    swapped = read_stereo(path, parse_channels("agent,caller"))
    assert np.array_equal(swapped.caller.pcm, right) and np.array_equal(swapped.agent.pcm, left)
    assert rec.duration_ns == 200_000_000
    with pytest.raises(ValueError, match="caller,agent"):
        parse_channels("caller,caller")


def test_a_mono_pair_starts_each_side_at_its_offset(tmp_path: Path) -> None:
    caller, agent = _pcm(8000, 3), _pcm(16000, 4)
    (tmp_path / "c.wav").write_bytes(wav_bytes([caller], 8000, "ulaw"))
    (tmp_path / "a.wav").write_bytes(wav_bytes([agent], 16000))
    later = read_pair(tmp_path / "c.wav", tmp_path / "a.wav", 250.0)
    assert (later.caller.start_ns, later.agent.start_ns) == (0, 250_000_000)
    assert later.layout == "mono_pair" and later.offset_ms == 250.0
    assert later.caller.encoding == "ulaw" and later.agent.sample_rate_hz == 16000
    assert later.duration_ns == 1_250_000_000
    earlier = read_pair(tmp_path / "c.wav", tmp_path / "a.wav", -40.0)
    assert (earlier.caller.start_ns, earlier.agent.start_ns) == (40_000_000, 0)


def test_the_wrong_channel_counts_are_refused(tmp_path: Path) -> None:
    mono = tmp_path / "mono.wav"
    mono.write_bytes(wav_bytes([_pcm(100, 5)], 8000))
    with pytest.raises(RecordingError, match=r"1 channel.*as a pair"):
        read_stereo(mono)
    three = tmp_path / "three.wav"
    three.write_bytes(wav_bytes([_pcm(100, 5)] * 3, 8000))
    with pytest.raises(RecordingError, match="3 channel"):
        read_stereo(three)
    stereo = tmp_path / "stereo.wav"
    stereo.write_bytes(wav_bytes([_pcm(100, 5)] * 2, 8000))
    with pytest.raises(RecordingError, match=r"the agent.s file stereo\.wav has 2 channels"):
        read_pair(mono, stereo, 0.0)


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "empty file"), (b"caller id +1 415 555 0123\n", "not a WAV or FLAC")],
)
def test_empty_and_text_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "x.wav"
    path.write_bytes(content)
    with pytest.raises(RecordingError, match=message) as info:
        read_stereo(path)
    assert "415" not in str(info.value)  # what a file holds is never echoed back
    with pytest.raises(RecordingError, match="a directory"):
        decode_file(tmp_path)


def test_flac_reads_through_soundfile(tmp_path: Path) -> None:
    import soundfile

    left, right = _pcm(4000, 6), _pcm(4000, 7)
    path = tmp_path / "call.flac"
    soundfile.write(str(path), np.stack([left, right], axis=1), 16000, subtype="PCM_16")
    rec = read_stereo(path)
    assert rec.container == "flac" and rec.caller.sample_rate_hz == 16000
    assert np.array_equal(rec.caller.pcm, left) and np.array_equal(rec.agent.pcm, right)
    broken = tmp_path / "broken.flac"
    broken.write_bytes(path.read_bytes()[:60])
    with pytest.raises(RecordingError, match="FLAC"):
        read_stereo(broken)


def test_a_folder_gives_its_audio_files_sorted(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    for name in ("b.wav", "a.WAV", "sub/c.flac", "notes.txt", "d.wave"):
        (tmp_path / name).write_bytes(b"x")
    found = [p.relative_to(tmp_path).as_posix() for p in recordings_in([str(tmp_path)])]
    assert found == ["a.WAV", "b.wav", "d.wave", "sub/c.flac"]
    assert recordings_in([str(tmp_path / "notes.txt")]) == [tmp_path / "notes.txt"]
