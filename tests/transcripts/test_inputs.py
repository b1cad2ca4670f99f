"""Reference and hypothesis files: plain text, SegLST, and speaker attribution via MeetEval."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from voxproxy.core.errors import ConfigError
from voxproxy.transcripts import Scoring
from voxproxy.transcripts.inputs import attribution, read_transcript


def seg(speaker: str, start: float, end: float, words: str, session: str = "m1") -> dict[str, Any]:
    return {
        "session_id": session,
        "speaker": speaker,
        "start_time": start,
        "end_time": end,
        "words": words,
    }


REF = [
    seg("priya", 0.0, 3.0, "the Helios migration slips to Q3"),
    seg("omar", 3.5, 6.0, "then we should not sign the contract"),
    seg("priya", 6.5, 8.0, "agreed"),
]


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_right_words_right_speakers(tmp_path: Path, scoring: Scoring) -> None:
    ref = read_transcript(write(tmp_path / "ref.json", REF))
    hyp_segments = [
        seg("spk1", 0.1, 3.0, "the Helios migration slips to Q3"),
        seg("spk2", 3.6, 6.0, "then we should not sign the contract"),
        seg("spk1", 6.4, 8.0, "agreed"),
    ]
    hyp = read_transcript(write(tmp_path / "hyp.json", hyp_segments))
    assert ref.has_speakers and ref.has_times
    a = attribution(ref, hyp, scoring, "en")
    assert a is not None
    assert (a.metric, a.wer, a.cp_wer, a.gap_points) == ("tcpWER", 0.0, 0.0, 0.0)


def test_right_words_wrong_speaker_is_the_attribution_gap(tmp_path: Path, scoring: Scoring) -> None:
    ref = read_transcript(write(tmp_path / "ref.json", REF))
    # Every word right, but Omar's sentence is given to Priya's speaker.
    hyp = read_transcript(
        write(
            tmp_path / "hyp.json",
            [
                seg("spk1", 0.1, 3.0, "the Helios migration slips to Q3"),
                seg("spk1", 3.6, 6.0, "then we should not sign the contract"),
                seg("spk2", 6.4, 8.0, "agreed"),
            ],
        )
    )
    a = attribution(ref, hyp, scoring, "en")
    assert a is not None
    assert a.wer == 0.0
    assert a.cp_wer > 0.5  # seven words (and "agreed") land on the wrong speaker
    assert a.gap_points == pytest.approx(100 * a.cp_wer)
    # Without times, cpWER instead of tcpWER, same verdict.
    untimed = [{k: v for k, v in s.items() if "time" not in k} for s in REF]
    r2 = read_transcript(write(tmp_path / "r2.json", untimed))
    a2 = attribution(r2, hyp, scoring, "en")
    assert a2 is not None and a2.metric == "cpWER" and a2.cp_wer == a.cp_wer


def test_plain_text_has_no_speakers(tmp_path: Path, scoring: Scoring) -> None:
    p = tmp_path / "ref.txt"
    p.write_text("hello there\ngeneral\n")
    t = read_transcript(p)
    assert not t.seglst and not t.has_speakers
    assert t.text() == "hello there\ngeneral\n"
    assert attribution(t, t, scoring, "en") is None


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="a JSON list of segments"):
        read_transcript(write(tmp_path / "a.json", "x"))
    (tmp_path / "b.json").write_text("{oops")
    with pytest.raises(ConfigError, match="not valid JSON"):
        read_transcript(tmp_path / "b.json")
    with pytest.raises(ConfigError, match="segment 0"):
        read_transcript(write(tmp_path / "c.json", [{"speaker": "a"}]))
    with pytest.raises(ConfigError, match="cannot read"):
        read_transcript(tmp_path / "missing.txt")
