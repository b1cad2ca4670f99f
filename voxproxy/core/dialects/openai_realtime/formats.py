"""The Realtime API's audio formats: GA and beta names, sample rate, bytes per ms."""

from __future__ import annotations

from dataclasses import dataclass

from voxproxy.core.audio.g711 import pcm_to_alaw, pcm_to_ulaw
from voxproxy.core.audio.pcm import pcm_to_bytes
from voxproxy.core.events import (
    Pcm,
)


@dataclass(frozen=True, slots=True)
class AudioFormat:
    """One of the Realtime audio formats, by its GA and beta names."""

    encoding: str  # voxproxy's name: pcm_s16le, ulaw or alaw
    sample_rate_hz: int
    ga: str
    beta: str

    def encode(self, pcm: Pcm) -> bytes:
        if self.encoding == "ulaw":
            return pcm_to_ulaw(pcm)
        if self.encoding == "alaw":
            return pcm_to_alaw(pcm)
        return pcm_to_bytes(pcm)

    def ga_object(self) -> dict[str, object]:
        if self.encoding == "pcm_s16le":
            return {"type": self.ga, "rate": self.sample_rate_hz}
        return {"type": self.ga}


PCM16 = AudioFormat("pcm_s16le", 24000, "audio/pcm", "pcm16")


PCMU = AudioFormat("ulaw", 8000, "audio/pcmu", "g711_ulaw")


PCMA = AudioFormat("alaw", 8000, "audio/pcma", "g711_alaw")


FORMATS = (PCM16, PCMU, PCMA)


_BY_NAME = {name: f for f in FORMATS for name in (f.ga, f.beta)}


def parse_format(value: object) -> AudioFormat | None:
    """A GA format object (``{"type": "audio/pcm", "rate": 24000}``) or a beta name."""
    if isinstance(value, str):
        return _BY_NAME.get(value)
    if not isinstance(value, dict):
        return None
    fmt = _BY_NAME.get(value.get("type"))  # type: ignore[arg-type]
    if fmt is not PCM16:
        return fmt
    rate = value.get("rate")
    if rate is None or rate == PCM16.sample_rate_hz:
        return PCM16
    # GA documents 24 kHz only; take another plausible rate at its word.
    if isinstance(rate, int) and not isinstance(rate, bool) and 8000 <= rate <= 48000:
        return AudioFormat("pcm_s16le", rate, PCM16.ga, PCM16.beta)
    return None
