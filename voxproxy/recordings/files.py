"""A call recording from files: which channel is whom, where each starts. The I/O shell.

Two shapes of recording:

- **one dual-channel file** (WAV or FLAC): by default the left channel is the caller
  and the right the agent (Twilio's dual-channel recordings, Pipecat's
  ``AudioBufferProcessor``); ``channels=("agent", "caller")`` swaps them;
- **a pair of mono files** (LiveKit egress per track, a contact centre's export), the
  agent's first sample playing ``offset_ms`` after the caller's (negative: before).

Any sample rate; the two files of a pair may differ. What goes wrong with a file (empty,
not audio, truncated, a channel count that is no call) is a :class:`RecordingError`
whose message is one line saying what.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from voxproxy.core.errors import FixtureError
from voxproxy.core.events import Pcm
from voxproxy.core.timebase import NS_PER_MS
from voxproxy.recordings.wavfile import WavAudio, WavError, read_wav_bytes

ROLES = ("caller", "agent")
DEFAULT_CHANNELS = ("caller", "agent")
SUFFIXES = (".wav", ".wave", ".flac")


class RecordingError(FixtureError):
    """A recording that cannot be analysed: one line, what is wrong with it."""


@dataclass(frozen=True, slots=True)
class Channel:
    """One side of the call: 16-bit samples at their rate, and where its first sample
    lies on the call's timeline (ns from the call's start)."""

    pcm: Pcm
    sample_rate_hz: int
    encoding: str
    start_ns: int = 0

    @property
    def duration_ns(self) -> int:
        return self.pcm.size * 1_000_000_000 // self.sample_rate_hz

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns


@dataclass(frozen=True, slots=True)
class Recording:
    """A call as recorded. ``name`` names it in the report and keys its receipt's call id
    (as a keyed hash: the name itself never reaches a receipt); ``paths`` are its files,
    the caller's first for a pair."""

    name: str
    caller: Channel
    agent: Channel
    container: str  # wav or flac
    layout: str  # stereo or mono_pair
    paths: tuple[str, ...]

    @property
    def duration_ns(self) -> int:
        return max(self.caller.end_ns, self.agent.end_ns)

    @property
    def offset_ms(self) -> float:
        """The agent's first sample after the caller's (a pair; 0 for one file)."""
        return (self.agent.start_ns - self.caller.start_ns) / NS_PER_MS


def parse_channels(text: str) -> tuple[str, str]:
    """``caller,agent`` or ``agent,caller``: the roles of the left and right channels."""
    parts = tuple(p.strip() for p in text.split(","))
    if sorted(parts) != sorted(ROLES):
        raise ValueError(f"expected caller,agent or agent,caller, got {text!r}")
    return parts[0], parts[1]


def decode_file(path: str | Path) -> tuple[WavAudio, str]:
    """The samples of one audio file and its container (``wav``, ``flac``)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except IsADirectoryError:
        raise RecordingError("a directory, not a file") from None
    except OSError as exc:
        raise RecordingError(exc.strerror or str(exc)) from None
    if not data:
        raise RecordingError("an empty file (0 bytes)")
    if data[:4] == b"RIFF":
        try:
            return read_wav_bytes(data), "wav"
        except WavError as exc:
            raise RecordingError(str(exc)) from None
    if data[:4] == b"fLaC":
        return _read_flac(p), "flac"
    if data[:4] in (b"RF64", b"RIFX"):
        raise RecordingError(f"a {data[:4].decode()} file, which is not read (only RIFF WAV)")
    raise RecordingError("not a WAV or FLAC file")


def _read_flac(path: Path) -> WavAudio:
    from voxproxy.extras import require

    require("flac", "reading FLAC")
    import numpy as np
    import soundfile

    try:
        with soundfile.SoundFile(str(path)) as f:
            rate = int(f.samplerate)
            frames = f.read(dtype="int16", always_2d=True)
            bits = {"PCM_S8": 8, "PCM_16": 16, "PCM_24": 24}.get(str(f.subtype), 16)
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        raise RecordingError(f"an unreadable FLAC file ({exc})") from None
    channels = [np.ascontiguousarray(frames[:, c]) for c in range(frames.shape[1])]
    return WavAudio(channels, rate, "flac", bits)


def read_stereo(
    path: str | Path, channels: tuple[str, str] = DEFAULT_CHANNELS, name: str | None = None
) -> Recording:
    """A dual-channel recording; ``channels``: the roles of its left and right channels."""
    audio, container = decode_file(path)
    n = len(audio.channels)
    if n != 2:
        hint = (
            " (a mono file is half a call: give it with its other half as a pair)" if n == 1 else ""
        )
        raise RecordingError(f"{n} channel(s), where a call recording has 2{hint}")
    if audio.channels[0].size == 0:
        raise RecordingError("no samples (a header without audio)")
    by_role = dict(zip(channels, audio.channels, strict=True))
    rate, enc = audio.sample_rate_hz, audio.encoding
    return Recording(
        name=name or Path(path).name,
        caller=Channel(by_role["caller"], rate, enc),
        agent=Channel(by_role["agent"], rate, enc),
        container=container,
        layout="stereo",
        paths=(str(path),),
    )


def read_pair(
    caller_path: str | Path, agent_path: str | Path, offset_ms: float, name: str | None = None
) -> Recording:
    """Two mono files, the agent's first sample ``offset_ms`` after the caller's."""
    sides = []
    for role, path in (("caller", caller_path), ("agent", agent_path)):
        try:
            audio, container = decode_file(path)
        except RecordingError as exc:
            raise RecordingError(f"the {role}'s file {Path(path).name}: {exc}") from None
        if len(audio.channels) != 1:
            raise RecordingError(
                f"the {role}'s file {Path(path).name} has {len(audio.channels)} channels, "
                "where one side of a call has 1"
            )
        sides.append((audio, container))
    offset_ns = round(offset_ms * NS_PER_MS)
    (ca, container), (ag, _) = sides
    return Recording(
        name=name or f"{Path(caller_path).name}+{Path(agent_path).name}",
        caller=Channel(ca.channels[0], ca.sample_rate_hz, ca.encoding, max(0, -offset_ns)),
        agent=Channel(ag.channels[0], ag.sample_rate_hz, ag.encoding, max(0, offset_ns)),
        container=container,
        layout="mono_pair",
        paths=(str(caller_path), str(agent_path)),
    )


def recordings_in(paths: list[str], suffixes: tuple[str, ...] = SUFFIXES) -> list[Path]:
    """Every file to analyse: each path given (whatever its suffix), and the files with
    one of ``suffixes`` (the audio ones: ``.wav``, ``.wave``, ``.flac``), sorted, inside
    each directory given, recursively."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out += sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in suffixes)
        else:
            out.append(p)
    return out
