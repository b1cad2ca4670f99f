"""The capture file (``.vxcap``): one call's session inputs, in order, compressed.

A capture holds what the proxy's measurement core was handed for one call (the wire's
messages both ways, or a WebRTC call's decoded audio and data channel messages, each
with the arrival time the core was given; the events posted to the event API; the
agent's answer; the anomalies and errors the proxy noted; the close), so that
:mod:`voxproxy.captures.replay` can hand them to a new session and get the receipt the
live one gave. It holds the call's audio: it is content (docs/captures.md).

Layout, integers little-endian::

    magic    8 bytes  MAGIC
    version  u8       VERSION (a reader refuses a version it does not know)
    codec    u8       CODEC_ZLIB: the body is one zlib stream (RFC 1950: deflate with an
                      Adler-32 check, so a cut or damaged file is told from a whole one)
    length   u32      of the header
    header   JSON     UTF-8: :class:`CaptureHeader` (the call's measurement settings)
    body     records, compressed as one stream

A record is ``kind u8, flags u8, dt i64, length u32`` (:data:`RECORD`, 14 bytes) and
``length`` bytes of payload. ``dt`` is the record's time in nanoseconds since the
previous record's (the first's: since the header's ``start_ns``, the call's start on
the proxy's monotonic clock); records without a time of their own have ``dt`` 0. The
kinds and their payloads: see :class:`Kind`. The last record of a whole capture is
``END``.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from voxproxy.core.analysis.vad import VadConfig
from voxproxy.core.dialects.base import DialectOptions
from voxproxy.core.errors import VoxproxyError
from voxproxy.core.events import StageMark, ToolEvent
from voxproxy.core.ids import keyed_hash
from voxproxy.core.session import SessionConfig
from voxproxy.core.timebase import EpochAnchor
from voxproxy.core.turns import TurnConfig

MAGIC = b"\x93VXCAP\r\n"  # a high byte and CR LF: a file mangled as text is told at once
VERSION = 1
CODEC_ZLIB = 1
SUFFIX = ".vxcap"
PREFIX = struct.Struct("<8sBBI")
RECORD = struct.Struct("<BBqI")
MAX_HEADER_BYTES = 1 << 20
MAX_RECORD_BYTES = 64 << 20  # no message, frame or event comes near (a damaged length)
KEY_CHECK = "voxproxy capture key check"


class Kind(enum.IntEnum):
    """What a record says, and its payload."""

    MESSAGE = 1  # a wire message (``on_message``): its bytes (text: UTF-8, flag TEXT)
    AUDIO = 2  # decoded audio (``on_audio``): u32 rate, u32 wire bytes, s16le samples
    EVENT = 3  # an event from the event API (``on_event``): JSON, at the event's stamp
    UPSTREAM = 4  # the agent answered (``on_upstream_connected``), at its time
    ANOMALY = 5  # the proxy noted an anomaly (``note_anomaly``): JSON kind and count
    ERROR = 6  # the proxy noted a measurement error (``note_measurement_error``)
    LABEL = 7  # WebRTC: the data channel of the messages that follow (UTF-8)
    ANSWER = 8  # what the proxy answered the session's question: JSON q, args, value
    CLOSE = 9  # the call closed (``close``), at its end: JSON terminal, close, dialect
    END = 10  # the capture is whole: JSON call (the receipt's id), added (by the transport)
    # (A session asks its shell (``clock_lag``, ``downstream``) as its receipt is built:
    # the ANSWERs follow the CLOSE.)
    UNMEASURED = 11  # forwarded, counted, not measured (``count_unmeasured``): u64 messages, bytes


# Flags of a record.
AGENT = 1  # the agent's direction (else the caller's)
TEXT = 2  # a text message
SHED = 4  # measurement shed the message's analysis (the proxy was behind)
DISABLED = 8  # measurement was disabled for the call when this came


class CaptureError(VoxproxyError):
    """A file that is not a whole capture this voxproxy reads (one line says why)."""


@dataclass(frozen=True, slots=True)
class CaptureHeader:
    """What a call's measurement was set up with: the transport and the dialect asked
    for (``auto`` detects it), the decoder's options but its secret, the session's
    settings, the call's start on the proxy's monotonic clock and its wall-clock anchor,
    the proxy's link id for the call (its receipt's call id when the wire names none),
    a keyed hash of a constant (``key_check``) that tells whether a replay was given
    the proxy's ``--secret`` (never the secret), and the ``questions`` the session could
    put to the proxy (``clock_lag``, ``downstream``: their answers are ANSWER records)."""

    transport: str
    dialect: str
    start_ns: int
    anchor_mono_ns: int
    anchor_wall_ns: int
    link_id: str
    key_check: str
    sample_rate_hz: int
    agent_sample_rate_hz: int | None
    names: tuple[str, ...] | None
    session: dict[str, Any]
    voxproxy: str
    questions: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        *,
        transport: str,
        dialect: str,
        options: DialectOptions,
        config: SessionConfig,
        start_ns: int,
        anchor: EpochAnchor,
        link_id: str,
        secret: bytes,
        version: str,
        questions: tuple[str, ...] = (),
    ) -> CaptureHeader:
        return cls(
            transport=transport,
            dialect=dialect,
            start_ns=start_ns,
            anchor_mono_ns=anchor.mono_ns,
            anchor_wall_ns=anchor.wall_ns,
            link_id=link_id,
            key_check=key_check(secret),
            sample_rate_hz=options.sample_rate_hz,
            agent_sample_rate_hz=options.agent_sample_rate_hz,
            names=None if options.names is None else tuple(sorted(options.names)),
            session=_settings(config),
            voxproxy=version,
            questions=questions,
        )

    def to_bytes(self) -> bytes:
        """The file's first bytes: the prefix and this header."""
        body = orjson.dumps(dataclasses.asdict(self))
        return PREFIX.pack(MAGIC, VERSION, CODEC_ZLIB, len(body)) + body

    @property
    def anchor(self) -> EpochAnchor:
        return EpochAnchor(mono_ns=self.anchor_mono_ns, wall_ns=self.anchor_wall_ns)

    def session_config(self) -> SessionConfig:
        """The session's settings, as the proxy had them."""
        d = dict(self.session)
        try:
            vad = VadConfig(**d.pop("vad"))
            turns = TurnConfig(**d.pop("turns"))
            return SessionConfig(vad=vad, turns=turns, **d)
        except (KeyError, TypeError, ValueError) as exc:
            raise CaptureError(
                f"measurement settings this voxproxy does not read ({exc})"
            ) from None

    def dialect_options(self, secret: bytes) -> DialectOptions:
        names = None if self.names is None else frozenset(self.names)
        return DialectOptions(
            sample_rate_hz=self.sample_rate_hz,
            agent_sample_rate_hz=self.agent_sample_rate_hz,
            secret=secret,
            names=names,
        )


def key_check(secret: bytes) -> str:
    return keyed_hash(secret, KEY_CHECK, "k_")


def _settings(config: object) -> dict[str, Any]:
    """A (nested) settings dataclass as plain values."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):  # type: ignore[arg-type]
        value = getattr(config, f.name)
        out[f.name] = _settings(value) if dataclasses.is_dataclass(value) else value
    return out


# -- events ----------------------------------------------------------------------------


def event_bytes(ev: ToolEvent | StageMark) -> bytes:
    """An event of the event API as a record's payload (every field: content-free)."""
    fields = {f.name: getattr(ev, f.name) for f in dataclasses.fields(ev)}
    fields["type"] = "stage" if isinstance(ev, StageMark) else "tool"
    return orjson.dumps(fields)


def event_of(payload: bytes) -> ToolEvent | StageMark:
    d = orjson.loads(payload)
    kind = d.pop("type")
    return StageMark(**d) if kind == "stage" else ToolEvent(**d)


# -- reading ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    kind: int
    flags: int
    t_ns: int
    payload: bytes


def sniff(head: bytes) -> bool:
    """Whether a file's first bytes are a capture's."""
    return head.startswith(MAGIC)


def read_header(fh: BinaryIO, name: str) -> CaptureHeader:
    prefix = fh.read(PREFIX.size)
    if len(prefix) < PREFIX.size or not prefix.startswith(MAGIC):
        raise CaptureError(f"{name}: not a voxproxy capture")
    _magic, version, codec, length = PREFIX.unpack(prefix)
    if version != VERSION:
        raise CaptureError(f"{name}: capture version {version}; this voxproxy reads {VERSION}")
    if codec != CODEC_ZLIB:
        raise CaptureError(f"{name}: capture compressed with codec {codec}, unknown here")
    if length > MAX_HEADER_BYTES:
        raise CaptureError(f"{name}: damaged capture (header of {length} bytes)")
    body = fh.read(length)
    if len(body) < length:
        raise CaptureError(f"{name}: truncated capture (its header is cut)")
    try:
        d = orjson.loads(body)
        names = d.get("names")
        d["names"] = None if names is None else tuple(names)
        d["questions"] = tuple(d.get("questions", ()))
        return CaptureHeader(**d)
    except (orjson.JSONDecodeError, TypeError) as exc:
        raise CaptureError(f"{name}: damaged capture header ({exc})") from None


def records(fh: BinaryIO, header: CaptureHeader, name: str) -> Iterator[Record]:
    """The records after the header, in order, decompressed as they are read. Raises
    :class:`CaptureError` on a cut or damaged body (after the records before it)."""
    inflate = zlib.decompressobj()
    buf = bytearray()
    t_ns = header.start_ns
    ended = False
    while True:
        chunk = fh.read(1 << 16)
        try:
            buf += inflate.decompress(chunk) if chunk else inflate.flush()
        except zlib.error as exc:
            raise CaptureError(f"{name}: damaged capture ({exc})") from None
        pos = 0
        while len(buf) - pos >= RECORD.size:
            kind, flags, dt, length = RECORD.unpack_from(buf, pos)
            if length > MAX_RECORD_BYTES or ended:
                raise CaptureError(f"{name}: damaged capture (record {kind} of {length} bytes)")
            end = pos + RECORD.size + length
            if end > len(buf):
                break
            t_ns += dt
            yield Record(kind, flags, t_ns, bytes(buf[pos + RECORD.size : end]))
            ended = kind == Kind.END
            pos = end
        del buf[:pos]
        if not chunk:
            break
    if not inflate.eof or buf or not ended:
        raise CaptureError(
            f"{name}: truncated capture (the proxy stopped before the call ended, or the file "
            "was cut)"
        )


class CaptureFile:
    """An open capture: its :attr:`header`, read at once, and its :meth:`records` as they
    are read. A context manager (``with CaptureFile(path) as f:``) that closes the file."""

    def __init__(self, path: str | Path) -> None:
        self.name = Path(path).name
        try:
            self._fh: BinaryIO = open(path, "rb")  # noqa: SIM115 (closed by close())
        except OSError as exc:
            raise CaptureError(f"{self.name}: {exc.strerror or exc}") from None
        try:
            self.header = read_header(self._fh, self.name)
        except BaseException:
            self._fh.close()
            raise

    def records(self) -> Iterator[Record]:
        return records(self._fh, self.header, self.name)

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> CaptureFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
