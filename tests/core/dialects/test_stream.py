"""voxproxy.core.dialects._stream: the builder side of the JSON media-stream wires (the
counters and layout of one stream's messages), on small wires declared here."""

from __future__ import annotations

import json

from voxproxy.core.dialects._stream import MarkWire, StreamWire


class TextSeq(MarkWire):
    seq_key = "sequenceNumber"
    seq_as_text = True
    id_key = "streamSid"


class NumberSeq(StreamWire):
    seq_key = "sequence_number"
    id_key = "stream_id"


class Indented(StreamWire):
    compact = False


def test_the_layout_places_sequence_id_and_fields_after_the_event() -> None:
    wire = NumberSeq("S1")
    text = wire.message("media", {"media": {"chunk": 1}}, at="sif")
    assert list(json.loads(text)) == ["event", "sequence_number", "stream_id", "media"]
    assert list(json.loads(wire.message("x", {"a": 1}, at="fi"))) == ["event", "a", "stream_id"]
    assert list(json.loads(wire.message("x", {"a": 1}, at="isf"))) == [
        "event",
        "stream_id",
        "sequence_number",
        "a",
    ]


def test_the_sequence_counts_from_one_over_the_messages_that_carry_it() -> None:
    wire = NumberSeq("S1")
    seqs = [
        json.loads(wire.message("m", at=at)).get("sequence_number")
        for at in ("sif", "fi", "sf", "f", "isf")
    ]
    assert seqs == [1, None, 2, None, 3]
    text = TextSeq("MZ1").message("start")
    assert json.loads(text)["sequenceNumber"] == "1"  # as text, on the wires that say so


def test_a_wire_without_a_sequence_or_a_stream_id_leaves_them_out() -> None:
    assert json.loads(StreamWire(None).message("stop", {"a": 1})) == {"event": "stop", "a": 1}
    assert json.loads(NumberSeq(None).message("stop")) == {"event": "stop", "sequence_number": 1}


def test_compact_text_unless_the_wire_sends_json_dumps_spacing() -> None:
    assert NumberSeq("S").message("e") == '{"event":"e","sequence_number":1,"stream_id":"S"}'
    assert Indented(None).message("e", {"a": 1}) == '{"event": "e", "a": 1}'


def test_media_chunks_count_from_one_with_the_ms_sent_before_each() -> None:
    wire = StreamWire("S")
    assert [wire.next_chunk(20) for _ in range(3)] == [(1, 0), (2, 20), (3, 40)]
    assert wire.next_chunk(160) == (4, 60)
    assert wire.next_chunk(20) == (5, 220)


def test_the_twilio_vocabulary_media_mark_and_clear() -> None:
    wire = TextSeq("MZ1")
    media = json.loads(wire.agent_media(b"\x00\xff"))
    assert media == {
        "event": "media",
        "sequenceNumber": "1",
        "streamSid": "MZ1",
        "media": {"payload": "AP8="},
    }
    assert json.loads(wire.mark("m1"))["mark"] == {"name": "m1"}
    clear = json.loads(wire.clear())
    assert clear == {"event": "clear", "sequenceNumber": "3", "streamSid": "MZ1"}
