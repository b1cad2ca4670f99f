"""The capture format: a header that gives back the proxy's settings, records that give
back their times and payloads, and files that are not whole captures told in one line."""

from __future__ import annotations

import io
import struct
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
from support.capturekit import START_NS, header, read_all

from voxproxy.captures.format import (
    MAGIC,
    PREFIX,
    RECORD,
    CaptureError,
    CaptureFile,
    Kind,
    event_bytes,
    event_of,
    key_check,
    read_header,
    sniff,
)
from voxproxy.core.analysis.vad import VadConfig
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.events import StageMark, ToolEvent
from voxproxy.core.session import SessionConfig
from voxproxy.core.turns import TurnConfig


def _file(
    tmp_path: Path, records: list[tuple[int, int, int, bytes]], name: str = "c.vxcap"
) -> Path:
    """A capture of ``records`` (kind, flags, dt, payload) after the test header."""
    body = b"".join(RECORD.pack(k, f, dt, len(p)) + p for k, f, dt, p in records)
    path = tmp_path / name
    path.write_bytes(header().to_bytes() + zlib.compress(body))
    return path


END = (int(Kind.END), 0, 0, b'{"call":"c_1"}')


def test_the_header_gives_back_the_session_settings_and_decoder_options() -> None:
    config = SessionConfig(
        vad=VadConfig(mode=2, merge_gap_ms=250.0),
        turns=TurnConfig(response_timeout_ms=5000.0),
        downstream_offset_ms=35.0,
        max_uncertainty_ms=80.0,
    )
    options = DialectOptions(sample_rate_hz=8000, agent_sample_rate_hz=24000, names=frozenset("ba"))
    h = header(dialect="raw", config=config, options=options)
    back = read_header(io.BytesIO(h.to_bytes()), "x")
    assert back == h
    assert back.session_config() == config
    got = back.dialect_options(b"k")
    assert got == replace(options, secret=b"k")
    assert back.anchor == h.anchor and back.start_ns == START_NS
    assert back.key_check == key_check(b"capture-test-secret") != key_check(b"other")


def test_records_give_back_their_times_kinds_flags_and_payloads(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        [
            (int(Kind.MESSAGE), 2, 20_000_000, b'{"event":"media"}'),
            (int(Kind.MESSAGE), 1, -3_000, b"\x00\x01\xff"),  # an earlier stamp: signed
            (int(Kind.ERROR), 0, 0, b""),
            END,
        ],
    )
    head, records = read_all(path)
    got = [(r.kind, r.flags, r.t_ns, r.payload) for r in records]
    assert got == [
        (Kind.MESSAGE, 2, START_NS + 20_000_000, b'{"event":"media"}'),
        (Kind.MESSAGE, 1, START_NS + 19_997_000, b"\x00\x01\xff"),
        (Kind.ERROR, 0, START_NS + 19_997_000, b""),
        (Kind.END, 0, START_NS + 19_997_000, b'{"call":"c_1"}'),
    ]
    assert head == header()


def test_events_of_the_event_api_round_trip() -> None:
    tool = ToolEvent("tool.finished", 12, operation_id="o_1", tool="lookup", status="ok")
    stage = StageMark("llm_first_token", 13, at_ns=11, detail="x")
    assert event_of(event_bytes(tool)) == tool
    assert event_of(event_bytes(stage)) == stage


def _read(path: Path) -> None:
    read_all(path)


@pytest.mark.parametrize("keep", [0.3, 0.6, 0.9, 0.99])
def test_a_cut_file_is_a_truncated_capture(tmp_path: Path, keep: float) -> None:
    whole = _file(tmp_path, [(int(Kind.MESSAGE), 0, 1, bytes(range(256)) * 64), END])
    _read(whole)  # whole: reads
    data = whole.read_bytes()
    cut = tmp_path / "cut.vxcap"
    cut.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(CaptureError, match=r"cut\.vxcap: truncated capture"):
        _read(cut)


def test_a_capture_without_its_end_record_is_truncated(tmp_path: Path) -> None:
    path = _file(tmp_path, [(int(Kind.MESSAGE), 0, 1, b"x")])
    with pytest.raises(CaptureError, match="truncated capture"):
        _read(path)


def test_damage_is_found(tmp_path: Path) -> None:
    path = _file(tmp_path, [(int(Kind.MESSAGE), 0, 1, bytes(range(256)) * 16), END])
    data = bytearray(path.read_bytes())
    data[-30] ^= 0x55
    path.write_bytes(bytes(data))
    with pytest.raises(CaptureError, match=r"damaged capture|truncated capture"):
        _read(path)


def test_files_that_are_no_captures_say_so_in_one_line(tmp_path: Path) -> None:
    text = tmp_path / "notes.vxcap"
    text.write_text("hello\n")
    empty = tmp_path / "empty.vxcap"
    empty.write_bytes(b"")
    for path in (text, empty):
        with pytest.raises(CaptureError, match="not a voxproxy capture"):
            CaptureFile(path)
    future = tmp_path / "future.vxcap"
    future.write_bytes(PREFIX.pack(MAGIC, 9, 1, 2) + b"{}")
    with pytest.raises(CaptureError, match="capture version 9; this voxproxy reads 1"):
        CaptureFile(future)
    headless = tmp_path / "headless.vxcap"
    headless.write_bytes(header().to_bytes()[:30])
    with pytest.raises(CaptureError, match="its header is cut"):
        CaptureFile(headless)
    with pytest.raises(CaptureError, match=r"missing\.vxcap: No such file"):
        CaptureFile(tmp_path / "missing.vxcap")


def test_sniff_knows_a_capture_by_its_first_bytes() -> None:
    assert sniff(header().to_bytes()[:16])
    assert not sniff(b"RIFF\x00\x00\x00\x00WAVEfmt ")
    assert not sniff(b"")


def test_a_record_is_fourteen_bytes_of_header() -> None:
    assert RECORD.size == 14 and struct.calcsize("<BBqI") == 14
