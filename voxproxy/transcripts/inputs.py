"""Reference and hypothesis files: plain text, or SegLST with speakers and times.

SegLST is the JSON that the CHiME challenges and MeetEval use: a list of segments
``{"session_id", "speaker", "start_time", "end_time", "words"}``. With speakers on
both sides, speaker attribution is scored with MeetEval's cpWER (tcpWER, with a
collar, when every segment has times) against plain WER over the same normalized
words; their difference is the attribution gap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voxproxy.core.errors import ConfigError
from voxproxy.transcripts.score import Scoring
from voxproxy.transcripts.scorecard import Attribution
from voxproxy.transcripts.terms import split_markup


@dataclass(frozen=True)
class Segment:
    session_id: str
    speaker: str | None
    start_time: float | None
    end_time: float | None
    words: str


@dataclass(frozen=True)
class Transcript:
    """A file's content: segments (one, speakerless, for plain text)."""

    source: str
    segments: tuple[Segment, ...]
    seglst: bool

    @property
    def has_speakers(self) -> bool:
        return self.seglst and all(s.speaker is not None for s in self.segments)

    @property
    def has_times(self) -> bool:
        return self.seglst and all(
            s.start_time is not None and s.end_time is not None for s in self.segments
        )

    def sessions(self) -> list[str]:
        return sorted({s.session_id for s in self.segments})

    def text(self, session: str | None = None) -> str:
        """The session's words in time order (file order when there are no times)."""
        segs = [s for s in self.segments if session is None or s.session_id == session]
        if self.has_times:
            segs.sort(key=lambda s: (s.start_time or 0.0, s.end_time or 0.0))
        return " ".join(s.words for s in segs)


def read_transcript(path: str | Path) -> Transcript:
    """A ``.json`` file is SegLST; anything else is plain UTF-8 text (one session)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read: {exc}") from None
    if p.suffix.lower() != ".json":
        return Transcript(str(p), (Segment("default", None, None, None, text),), seglst=False)
    try:
        data: Any = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{p}: not valid JSON: {exc}") from None
    if not isinstance(data, list):
        raise ConfigError(f"{p}: SegLST is a JSON list of segments")
    segments = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("words"), str):
            raise ConfigError(f"{p}: segment {i}: needs at least a text field 'words'")
        segments.append(
            Segment(
                session_id=str(item.get("session_id", "default")),
                speaker=None if item.get("speaker") is None else str(item["speaker"]),
                start_time=_time(p, i, item.get("start_time")),
                end_time=_time(p, i, item.get("end_time")),
                words=item["words"],
            )
        )
    return Transcript(str(p), tuple(segments), seglst=True)


def _time(p: Path, i: int, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(f"{p}: segment {i}: a time must be a number of seconds")
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"{p}: segment {i}: a time must be a number of seconds") from None


def attribution(
    ref: Transcript, hyp: Transcript, scoring: Scoring, language: str, collar_s: float = 5.0
) -> Attribution | None:
    """cpWER (or tcpWER) against WER over the same normalized words, via MeetEval.
    None when either side lacks speaker labels."""
    if not (ref.has_speakers and hyp.has_speakers):
        return None
    from meeteval.io import SegLST
    from meeteval.wer import cpwer, siso_word_error_rate, tcpwer

    norm = scoring.normalizer

    def seglst(t: Transcript) -> Any:
        return SegLST(
            [
                {
                    "session_id": s.session_id,
                    "speaker": s.speaker,
                    "start_time": s.start_time if s.start_time is not None else float(i),
                    "end_time": s.end_time if s.end_time is not None else float(i) + 1.0,
                    "words": " ".join(norm.tokens(split_markup(s.words)[0], language)),
                }
                for i, s in enumerate(t.segments)
            ]
        )

    r, h = seglst(ref), seglst(hyp)
    timed = ref.has_times and hyp.has_times
    per_session = tcpwer(r, h, collar=collar_s) if timed else cpwer(r, h)
    cp_errors = sum(e.errors for e in per_session.values())
    length = sum(e.length for e in per_session.values())
    plain_errors = 0
    for session in ref.sessions():
        ref_words = " ".join(norm.tokens(split_markup(ref.text(session))[0], language))
        hyp_words = " ".join(norm.tokens(split_markup(hyp.text(session))[0], language))
        plain_errors += siso_word_error_rate(ref_words, hyp_words).errors
    if not length:
        return None
    return Attribution(
        metric="tcpWER" if timed else "cpWER",
        wer=plain_errors / length,
        cp_wer=cp_errors / length,
        reference_speakers=len({s.speaker for s in ref.segments}),
        hypothesis_speakers=len({s.speaker for s in hyp.segments}),
        collar_s=collar_s if timed else None,
    )
