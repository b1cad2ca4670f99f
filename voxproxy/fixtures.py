"""The committed speech and noise clips under ``fixtures/audio`` and their truth.

The directory is found from ``$VOXPROXY_FIXTURES`` or next to the package (an
editable install or a checkout).
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path

from voxproxy.audio.pcm import read_wav
from voxproxy.errors import FixtureError
from voxproxy.events import Pcm


def fixtures_dir() -> Path:
    env = os.environ.get("VOXPROXY_FIXTURES")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1] / "fixtures"


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


def clip(name: str) -> Clip:
    clips = load_clips()
    try:
        return clips[name]
    except KeyError:
        raise FixtureError(f"no fixture clip named {name!r}; have: {', '.join(clips)}") from None
