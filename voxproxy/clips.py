"""The committed clips and their truth: the speech and noise clips under
``fixtures/audio`` (:func:`load_clips`) and the generalization corpus under
``fixtures/corpus`` (:func:`load_corpus`: other synthesizers, voices, languages
and levels, and synthetic signals, made by ``tools/make_corpus.py``).

The directory is ``$VOXPROXY_FIXTURES`` when set (a directory laid out like the
repository's ``fixtures/``), else the one inside the package: ``voxproxy/_fixtures``,
which in a checkout links to ``fixtures/`` and in the wheel holds what commands read
at run time (``audio``, ``scenarios``, ``testbench``; not the corpus). Clips are mono
16-bit WAV files (:func:`read_wav`, :func:`write_wav`): the core is handed samples.

It ships because commands run on it: the scripted callers of ``voxproxy load`` and
``voxproxy demo`` say clips, the mock agent (``voxproxy mock-agent``) answers with them,
``voxproxy scenarios`` lists them.
"""

from __future__ import annotations

import functools
import json
import os
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voxproxy.core.audio.pcm import bytes_to_pcm, pcm_to_bytes
from voxproxy.core.errors import FixtureError
from voxproxy.core.events import Pcm


def read_wav(path: str | Path, downmix: bool = False) -> tuple[Pcm, int]:
    """Read a mono 16-bit WAV file. Returns ``(samples, sample_rate_hz)``.

    ``downmix``: also take a 16-bit file of several channels, as their mean."""
    try:
        with wave.open(str(path), "rb") as w:
            channels = w.getnchannels()
            if (channels != 1 and not downmix) or w.getsampwidth() != 2:
                raise FixtureError(
                    f"{path}: need {'' if downmix else 'mono '}16-bit PCM, got {channels} "
                    f"channel(s) of {8 * w.getsampwidth()} bit"
                )
            rate = w.getframerate()
            data = w.readframes(w.getnframes())
    except (OSError, wave.Error, EOFError) as exc:
        raise FixtureError(f"{path}: cannot read WAV: {exc}") from exc
    pcm = bytes_to_pcm(data)
    if channels > 1:  # interleaved frames: the mean of each frame's samples
        frames = pcm[: pcm.size // channels * channels].reshape(-1, channels)
        mono: Pcm = np.rint(frames.astype(np.float64).mean(axis=1)).astype(np.int16)
        return mono, rate
    return pcm.copy(), rate


def write_wav(path: str | Path, pcm: Pcm, sample_rate_hz: int) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate_hz)
        w.writeframes(pcm_to_bytes(pcm))


def fixtures_dir() -> Path:
    env = os.environ.get("VOXPROXY_FIXTURES")
    if env:
        return Path(env)
    packaged = Path(__file__).resolve().parent / "_fixtures"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[1] / "fixtures"  # a checkout without symlinks


@dataclass(frozen=True, slots=True)
class Clip:
    """A clip and its true speech edges (ms from the clip's first sample)."""

    name: str
    role: str
    kind: str
    text: str
    pcm: Pcm
    sample_rate_hz: int
    segments_ms: tuple[tuple[float, float], ...]
    # Set for the corpus (load_corpus); the defaults stand for "not recorded".
    synthesizer: str = ""
    voice: str = ""
    language: str = ""
    sex: str = ""
    level_dbfs: float | None = None  # ITU-T P.56 active level of the stored clip
    trimmed: bool = False  # starts and ends on speech, no silence around it

    @property
    def duration_ms(self) -> float:
        return 1000.0 * self.pcm.size / self.sample_rate_hz

    @property
    def onset_ms(self) -> float:
        return self.segments_ms[0][0]

    @property
    def offset_ms(self) -> float:
        return self.segments_ms[-1][1]


@functools.cache
def load_clips(directory: str | None = None) -> dict[str, Clip]:
    base = Path(directory) if directory else fixtures_dir() / "audio"
    manifest_path = base / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as exc:
        raise FixtureError(f"{manifest_path}: cannot read the fixture manifest: {exc}") from exc
    clips: dict[str, Clip] = {}
    for name, entry in manifest["clips"].items():
        pcm, rate = read_wav(base / entry["file"])
        segments = tuple((float(a), float(b)) for a, b in entry.get("segments_ms", []))
        clips[name] = Clip(
            name=name,
            role=entry["role"],
            kind=entry["kind"],
            text=entry.get("text", ""),
            pcm=pcm,
            sample_rate_hz=rate,
            segments_ms=segments,
        )
    return clips


@functools.cache
def load_corpus(directory: str | None = None) -> dict[str, Clip]:
    """The generalization corpus (``fixtures/corpus``), by clip name, in manifest order."""
    base = Path(directory) if directory else fixtures_dir() / "corpus"
    manifest_path = base / "manifest.json"
    if not manifest_path.is_file():
        raise FixtureError(
            f"{manifest_path}: the corpus is missing; it is committed under fixtures/corpus "
            "(set VOXPROXY_FIXTURES to a fixtures directory that has it, or regenerate it "
            "with `make corpus`)"
        )
    try:
        manifest = json.loads(manifest_path.read_text())
        rate = int(manifest["sample_rate_hz"])
        entries = manifest["clips"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FixtureError(f"{manifest_path}: cannot read the corpus manifest: {exc}") from exc
    corpus: dict[str, Clip] = {}
    for name, entry in entries.items():
        try:
            pcm, file_rate = read_wav(base / entry["file"])
            if file_rate != rate:
                raise FixtureError(f"{entry['file']}: {file_rate} Hz, the manifest says {rate}")
            level = entry.get("level_dbfs")
            corpus[name] = Clip(
                name=name,
                role=entry.get("role", ""),
                kind=entry["kind"],
                text=entry.get("text") or "",
                pcm=pcm,
                sample_rate_hz=file_rate,
                segments_ms=tuple((float(a), float(b)) for a, b in entry["segments_ms"]),
                synthesizer=entry.get("synthesizer") or "",
                voice=entry.get("voice") or "",
                language=entry.get("language") or "",
                sex=entry.get("sex") or "",
                level_dbfs=None if level is None else float(level),
                trimmed=bool(entry.get("trimmed", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise FixtureError(f"{manifest_path}: clip {name!r}: bad entry: {exc!r}") from exc
    return corpus


def clip(name: str) -> Clip:
    clips = load_clips()
    try:
        return clips[name]
    except KeyError:
        raise FixtureError(f"no fixture clip named {name!r}; have: {', '.join(clips)}") from None
