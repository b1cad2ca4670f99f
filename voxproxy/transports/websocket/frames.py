"""Cutting one leg's websocket byte stream into frames (RFC 6455 5.2), on bytes alone;
and a client's frame masked anew.

The relay reads a leg's frames itself once its handshake is through (relay.py,
"Reading a leg"). :class:`FrameCutter` is that reading, kept apart from sockets and
from websockets' protocol objects so that it can be tested on byte strings (against
websockets' own parser as the oracle, tests/transports/websocket/test_frames.py).
Fed whatever bytes a read brought, it returns the cuts they complete, in order:

* :class:`Splice`: a whole text or binary frame that is a message by itself
  (unfragmented, reserved bits clear, masked as its sender must mask, within the size
  limit): the relay writes it to the other leg and hands its payload to measurement;
* :class:`Handover`: any other whole frame (control frames, fragments): for the leg's
  websockets protocol, which answers pings, carries closes and reassembles fragments;
* :class:`Failure`: a frame whose header already breaks the protocol: the leg's
  connection is to be failed with ``code``, as websockets would fail it on that frame
  (1002: an unknown opcode, reserved bits set, the wrong masking for its sender, a
  control frame longer than 125 bytes or fragmented, a fragment out of sequence; 1009:
  over the size limit), without waiting for the payload its header declares (a peer
  could otherwise hold an invalid frame open for as long as it trickles it).

A client's frame goes on with a key of the relay's own (:func:`masked_anew`,
:class:`MaskKeys`): the relay is the agent's client, and RFC 6455 (5.3, 10.3) asks a
client for a fresh, unpredictable key for every frame, so that no sender (here, the
caller, who chose the key it came with) controls the bytes on the proxy-to-agent wire.

Every byte fed comes out exactly once: the cuts' ``data`` in order, then
:attr:`FrameCutter.pending` (the start of a frame not yet whole). The cutter keeps
the fragmentation state of the stream (a message in progress, and its size so far),
as websockets' protocol does, so that it judges every frame as that protocol would.
Its limits are its own (:meth:`FrameCutter.for_leg`: the relay's config), not read off
a protocol object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

try:  # websockets' C masking, as its own frames use it (else its pure-Python one)
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover (a build of websockets without its C speedups)
    from websockets.utils import apply_mask

from voxproxy.transports.websocket.config import RelayConfig

TEXT: Final = 0x1
BINARY: Final = 0x2
_OPCODES: Final = frozenset({0x0, 0x1, 0x2, 0x8, 0x9, 0xA})  # RFC 6455 5.2 (11.8)
PROTOCOL_ERROR: Final = 1002  # close codes, RFC 6455 7.4.1
MESSAGE_TOO_BIG: Final = 1009


class Splice:
    """A whole data frame that is a message by itself, as the bytes that came.

    ``data[head:]`` is its payload (masked with ``data[head - 4 : head]`` when the
    sender is a client); ``text`` says whether it is a text frame.
    """

    __slots__ = ("data", "head", "text")

    def __init__(self, data: bytes, head: int, text: bool) -> None:
        self.data = data
        self.head = head
        self.text = text


class Handover:
    """A whole frame for the leg's protocol (a control frame, a fragment)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class Failure:
    """The stream breaks the protocol at a frame's header: fail it with ``code``.

    ``data`` is every byte fed from that frame's first byte on; the cutter takes no
    more frames after a failure (each later feed is answered with a failure too).
    """

    __slots__ = ("code", "data", "reason")

    def __init__(self, code: int, reason: str, data: bytes) -> None:
        self.code = code
        self.reason = reason
        self.data = data


Cut = Splice | Handover | Failure


class FrameCutter:
    """One direction of a websocket connection, cut into frames (see the module)."""

    __slots__ = ("_buf", "_failure", "_mask_bit", "_max_size", "_message_size")

    def __init__(self, *, masked: bool, max_size: int | None) -> None:
        """``masked``: the sender is a client, whose frames must be masked (RFC 6455
        5.1); ``max_size``: the most bytes a message may have (None: no limit)."""
        self._mask_bit = 0x80 if masked else 0
        self._max_size = max_size
        self._buf = bytearray()  # the start of a frame not yet whole
        self._message_size: int | None = None  # a fragmented message's bytes so far
        self._failure: Failure | None = None

    @classmethod
    def for_leg(cls, config: RelayConfig, *, from_client: bool) -> FrameCutter:
        """The cutter for a leg whose sender is the caller (a client) or the agent."""
        return cls(masked=from_client, max_size=config.max_message_bytes)

    @property
    def pending(self) -> bytes:
        """The bytes fed that no cut holds yet: the start of the next frame."""
        return bytes(self._buf)

    @property
    def in_message(self) -> bool:
        """Whether a fragmented message has begun and not ended."""
        return self._message_size is not None

    def feed(self, data: bytes) -> list[Cut]:
        """The cuts that ``data``, after what was fed before, completes."""
        failure = self._failure
        if failure is not None:
            return [Failure(failure.code, failure.reason, data)]
        pending = self._buf
        buf: bytes | bytearray = data
        if pending:
            pending += data
            buf = pending
        cuts: list[Cut] = []
        n = len(buf)
        pos = 0
        while n - pos >= 2:
            b0 = buf[pos]
            b1 = buf[pos + 1]
            usual = b0 == 0x81 or b0 == 0x82  # a whole text or binary frame, RSV clear
            # Judged in websockets' order (Frame.parse, Frame.check, Protocol.recv_frame),
            # each as soon as its bytes are in: the opcode and the mask bit, the length
            # against the limit, then the rest of the header against the stream's state.
            if not usual and b0 & 0x0F not in _OPCODES:
                return self._fail(cuts, buf, pos, PROTOCOL_ERROR, "invalid opcode")
            if b1 & 0x80 != self._mask_bit:
                return self._fail(cuts, buf, pos, PROTOCOL_ERROR, "incorrect masking")
            size = b1 & 0x7F
            head = pos + 2
            if size == 126:
                if n - pos < 4:
                    break
                size = buf[head] << 8 | buf[head + 1]
                head += 2
            elif size == 127:
                if n - pos < 10:
                    break
                size = int.from_bytes(buf[head : head + 8], "big")
                head += 8
            so_far = self._message_size
            limit = self._max_size
            if limit is not None and size > (limit if so_far is None else limit - so_far):
                reason = f"frame of {size} bytes over the limit of {limit}"
                return self._fail(cuts, buf, pos, MESSAGE_TOO_BIG, reason)
            if not usual or so_far is not None:
                wrong = _header_error(b0, size, so_far)
                if wrong is not None:
                    return self._fail(cuts, buf, pos, PROTOCOL_ERROR, wrong)
            if b1 & 0x80:
                head += 4
            end = head + size
            if end > n:
                break
            if pos == 0 and end == n and type(buf) is bytes:
                frame = buf  # the whole read is this frame: no copy
            else:
                with memoryview(buf) as view:
                    frame = bytes(view[pos:end])
            if usual:  # (valid, so outside a fragmented message)
                cuts.append(Splice(frame, head - pos, b0 == 0x81))
            else:
                opcode = b0 & 0x0F
                if opcode in (TEXT, BINARY):
                    self._message_size = size  # (a first fragment: FIN clear)
                elif opcode == 0:
                    assert so_far is not None
                    self._message_size = None if b0 & 0x80 else so_far + size
                cuts.append(Handover(frame))
            pos = end
        if pending:
            del pending[:pos]
        elif pos < n:
            pending += buf[pos:]
        return cuts

    def _fail(
        self, cuts: list[Cut], buf: bytes | bytearray, pos: int, code: int, reason: str
    ) -> list[Cut]:
        failure = Failure(code, reason, bytes(buf[pos:]))
        self._failure = failure
        self._buf = bytearray()
        cuts.append(failure)
        return cuts


def _header_error(b0: int, size: int, so_far: int | None) -> str | None:
    """What is wrong with a frame whose first byte is ``b0`` and payload ``size`` bytes,
    ``so_far`` bytes into a fragmented message (None: none begun), or None. The words
    are websockets' own for the same faults."""
    opcode = b0 & 0x0F
    if b0 & 0x70:
        return "reserved bits must be 0"
    if opcode >= 0x8:
        if size > 125:
            return "control frame too long"
        if not b0 & 0x80:
            return "fragmented control frame"
    elif opcode:
        if so_far is not None:
            return "expected a continuation frame"
    elif so_far is None:
        return "unexpected continuation frame"
    return None


class MaskKeys:
    """Masking keys for a client's frames: 4 bytes each, fresh for every frame and
    unpredictable (RFC 6455 5.3), taken from ``source`` (the operating system's random
    generator, handed in by the relay) a block at a time: one call for 1024 keys
    instead of one a frame. :meth:`forget` drops what is left of the block (a forked
    process must not use the keys its parent may use too)."""

    __slots__ = ("_block", "_pos", "_source")

    BLOCK: Final = 4096

    def __init__(self, source: Callable[[int], bytes]) -> None:
        self._source = source
        self._block = b""
        self._pos = 0

    def take(self) -> bytes:
        """A key never handed out before."""
        pos = self._pos
        if pos >= len(self._block):
            self._block = self._source(self.BLOCK)
            pos = 0
        self._pos = pos + 4
        return self._block[pos : pos + 4]

    def forget(self) -> None:
        self._block = b""
        self._pos = 0


def masked_anew(cut: Splice, key: bytes) -> tuple[bytes, bytes]:
    """A client's whole frame with ``key`` in place of its own, and its payload.

    The header stays as it came (opcode, length and its encoding); the payload is
    unmasked with the sender's key and masked with ``key``. Returned: the frame to
    write, and the unmasked payload (for measurement)."""
    data = cut.data
    head = cut.head
    payload = apply_mask(data[head:], data[head - 4 : head])
    return b"".join((data[: head - 4], key, apply_mask(payload, key))), payload
