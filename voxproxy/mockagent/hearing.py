"""What the mock agent "heard": imperfect transcripts keyed by the recording the caller said.

The mock agent has no speech recognizer. When it reports transcripts it recognizes
*which fixture recording* a caller turn was, from the audio alone, and reports the
text configured for that recording (or the recording's own text when none is
configured). Nothing tells it which clip comes next: no hook, no side channel.

Recognition compares loudness envelopes: the turn's audio between its speech onset
and offset (as the agent's own VAD found them) becomes a 10 ms log-energy envelope,
which is correlated, at small lags (±150 ms), with the envelope of each caller clip's
true speech; the correlation is scaled by the overlap (so durations must agree). The
best clip wins when it scores at least :data:`MIN_SCORE` and beats the best other
clip by :data:`MIN_MARGIN`; otherwise the turn is unrecognized and no transcript is
sent (a wrong text would be worse than none). Measured on every caller clip with
±50 ms edge errors, at 8 and 16 kHz, with babble noise at 10 dB SNR, the right clip
scored 0.69-0.91 and the best other clip at most 0.42.

A clip whose text has one sentence per speech segment (a pause between sentences,
as in ``caller_topic_change``) can also be recognized part by part: when the agent's
VAD cuts the utterance at that pause, each part is heard as its own sentences (of
the configured text when it has as many sentences, else of the clip's own text).
A cut anywhere else (under noise the VAD may split "Yes, please.") is not
recognized, and nothing is reported for it: the load run then scores that turn as
unheard. That is a limit of this mock, not of the scoring.

:data:`DEFAULT_HYPOTHESES` is the built-in set: it drops a negation, confuses a
digit, mishears a name (the acronym IBAN; no caller clip holds a person's name) and,
for two clips, differs from the reference only in ways the default normalization
policy forgives (accents, a contraction), which should score as no error at all.
"""

from __future__ import annotations

import functools
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml

from voxproxy.clips import load_clips
from voxproxy.core.analysis.vad import Spurt
from voxproxy.core.errors import ConfigError
from voxproxy.core.events import Pcm
from voxproxy.core.timebase import NS_PER_S

FRAME_S = 0.01
MAX_LAG_FRAMES = 15
MIN_OVERLAP = 0.5
MIN_SCORE = 0.6
MIN_MARGIN = 0.05
FLOOR_DB = 45.0  # envelope floor below its peak: silence and noise compare as flat
KEEP_NS = 60 * NS_PER_S  # caller audio kept at most (the longest turn it can recognize)

DEFAULT_HYPOTHESES: dict[str, str] = {
    # A dropped negation: "don't send it" heard as "do send it".
    "caller_no_dont": "No, wait, do send it.",
    # One digit confused (1 for 7 in the last group), grouped as a recognizer writes it.
    "caller_order_number": "My order number is 4719 2836 5072.",
    # A name missed: the acronym IBAN heard as two words.
    "caller_iban": "My eye ban is ES91 2100 0418 4502 0005 1332.",
    # Differences the default policy forgives: a contraction, and missing accents.
    "caller_where_is_order": "Hi, I'd like to know where my order is.",
    "caller_es_pedido": "Hola, quiero saber donde esta mi pedido.",
}


def load_hypotheses(path: str | Path) -> dict[str, str]:
    """A YAML or JSON mapping of caller clip name -> what the agent hears for it."""
    try:
        data: Any = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read the hypotheses: {exc}") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ConfigError(f"{path}: hypotheses are a mapping of clip name -> text")
    clips = load_clips()
    unknown = [k for k in data if k not in clips]
    if unknown:
        raise ConfigError(f"{path}: no fixture clip named {', '.join(map(repr, unknown))}")
    return dict(data)


def envelope(pcm: npt.NDArray[Any], rate: int) -> npt.NDArray[np.float64]:
    """10 ms log-energy frames (dB), floored :data:`FLOOR_DB` below the peak."""
    f = max(1, round(rate * FRAME_S))
    n = pcm.size // f
    if n == 0:
        return np.zeros(0)
    x = pcm[: n * f].astype(np.float64).reshape(n, f)
    e = 10 * np.log10(np.mean(x**2, axis=1) + 1.0)
    floored: npt.NDArray[np.float64] = np.maximum(e, e.max() - FLOOR_DB)
    return floored


def _z(e: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    out: npt.NDArray[np.float64] = (e - e.mean()) / (e.std() + 1e-9)
    return out


def similarity(heard: npt.NDArray[np.float64], ref: npt.NDArray[np.float64]) -> float:
    """Best overlap-scaled correlation of two envelopes at lags within ±150 ms."""
    la, lb = heard.size, ref.size
    longest = max(la, lb)
    best = -1.0
    for lag in range(-MAX_LAG_FRAMES, MAX_LAG_FRAMES + 1):
        x, y = (heard[lag:], ref) if lag >= 0 else (heard, ref[-lag:])
        m = min(x.size, y.size)
        if m < 2 or m < MIN_OVERLAP * longest:
            continue
        r = float(np.mean(_z(x[:m]) * _z(y[:m]))) * m / longest
        best = max(best, r)
    return best


_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    return [t for t in _SENTENCE.split(text.strip()) if t]


@dataclass(frozen=True, slots=True)
class _Reference:
    clip: str
    first: int  # the clip's speech segments first..last (inclusive) that this part covers
    last: int
    whole: bool
    envelope: npt.NDArray[np.float64]

    @property
    def label(self) -> str:
        return self.clip if self.whole else f"{self.clip}[{self.first}:{self.last + 1}]"


@functools.cache
def _references() -> tuple[_Reference, ...]:
    """Every caller clip's true speech; and, for a clip with as many sentences as speech
    segments (a pause between sentences), every run of its segments on its own."""
    out = []
    for c in load_clips().values():
        if c.role != "caller" or c.kind != "speech" or not c.segments_ms:
            continue
        n = len(c.segments_ms)
        parts = (
            [(i, j) for i in range(n) for j in range(i, n)]
            if n > 1 and len(sentences(c.text)) == n
            else [(0, n - 1)]
        )
        for i, j in parts:
            a = round(c.segments_ms[i][0] * c.sample_rate_hz / 1000)
            b = round(c.segments_ms[j][1] * c.sample_rate_hz / 1000)
            env = envelope(c.pcm[a:b], c.sample_rate_hz)
            out.append(_Reference(c.name, i, j, (i, j) == (0, n - 1), env))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Heard:
    clip: str | None  # None: not recognized
    score: float
    text: str | None  # what the agent reports (None: nothing)


class Hearing:
    """One call's ear: keeps the caller's audio and names the clip of each turn."""

    def __init__(self, hypotheses: Mapping[str, str]) -> None:
        self.hypotheses = dict(hypotheses)
        self._chunks: deque[tuple[int, Pcm, int]] = deque()  # (start ns, samples, rate)

    def push(self, pcm: Pcm, t_start_ns: int, rate: int) -> None:
        self._chunks.append((t_start_ns, pcm, rate))
        while self._chunks and t_start_ns - self._chunks[0][0] > KEEP_NS:
            self._chunks.popleft()

    def _audio(self, onset_ns: int, offset_ns: int) -> tuple[Pcm, int]:
        parts: list[Pcm] = []
        rate = 0
        for t, pcm, r in self._chunks:
            end = t + pcm.size * NS_PER_S // r
            if end <= onset_ns or t >= offset_ns:
                continue
            a = max(0, (onset_ns - t) * r // NS_PER_S)
            b = min(pcm.size, (offset_ns - t) * r // NS_PER_S)
            if b > a:
                parts.append(pcm[a:b])
                rate = r
        if not parts:
            return np.zeros(0, dtype=np.int16), 16000
        return np.concatenate(parts), rate

    def hear(self, spurt: Spurt) -> Heard:
        pcm, rate = self._audio(spurt.onset_ns, spurt.offset_ns)
        while self._chunks and self._chunks[0][0] < spurt.onset_ns - NS_PER_S:
            self._chunks.popleft()  # this turn is over: older audio is not needed again
        heard = envelope(pcm, rate)
        if heard.size < 5:
            return Heard(None, 0.0, None)
        scores = sorted(
            ((similarity(heard, r.envelope), k) for k, r in enumerate(_references())),
            reverse=True,
        )
        best, k = scores[0]
        ref = _references()[k]
        # The runner-up that matters is another clip (not another part of the same one).
        second = next((s for s, i in scores[1:] if _references()[i].clip != ref.clip), -1.0)
        if best < MIN_SCORE or best - second < MIN_MARGIN:
            return Heard(None, round(best, 3), None)
        return Heard(ref.label, round(best, 3), self._text(ref))

    def _text(self, ref: _Reference) -> str:
        said = load_clips()[ref.clip].text
        text = self.hypotheses.get(ref.clip, said)
        if ref.whole:
            return text
        # Part of a clip: the same sentences of the hypothesis when it has one per
        # segment, else of the clip's own text (heard right).
        parts = sentences(text)
        if len(parts) != len(sentences(said)):
            parts = sentences(said)
        return " ".join(parts[ref.first : ref.last + 1])
