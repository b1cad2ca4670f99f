"""The frame cutter (voxproxy/transports/websocket/frames.py) on byte strings, with
websockets' own parser as the oracle: random frame sequences in every length encoding
(non-minimal ones too), masked with random keys and with 00000000, fed in random read
cuts, are cut into exactly the frames websockets parses, each routed as the relay
must route it; a protocol that sees only the cutter's hand-overs and failures ends in
the same place as one that sees the whole stream."""

from __future__ import annotations

import random
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.frames import Frame, Opcode
from websockets.protocol import Protocol, Side, State
from websockets.streams import StreamReader
from websockets.utils import apply_mask

from voxproxy.transports.websocket import RelayConfig, frames

CONT, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
SIZES = (0, 1, 2, 125, 126, 127, 128, 65535, 65536, 70000)  # every length encoding's edges
PROPERTY = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass(frozen=True)
class Spec:
    """One frame to lay out: what its header says and how its length is written."""

    opcode: int
    size: int
    fin: bool = True
    rsv: int = 0
    masked: bool = True
    zero_key: bool = False
    form: int = 0  # 0: the shortest length encoding; 2 or 8: that many length bytes
    seed: int = 0

    def lay(self) -> tuple[bytes, int]:
        """The frame's bytes and its header's length (the masking key included)."""
        rng = random.Random(self.seed)
        payload = rng.randbytes(self.size)
        head = bytes([(0x80 if self.fin else 0) | self.rsv << 4 | self.opcode])
        bit = 0x80 if self.masked else 0
        n = self.size
        form = self.form if self.form else (0 if n < 126 else 2 if n < 1 << 16 else 8)
        if form == 0:
            head += bytes([bit | n])
        elif form == 2:
            head += bytes([bit | 126]) + n.to_bytes(2, "big")
        else:
            head += bytes([bit | 127]) + n.to_bytes(8, "big")
        if self.masked:
            key = b"\0\0\0\0" if self.zero_key else rng.randbytes(4)
            head += key
            payload = apply_mask(payload, key)
        return head + payload, len(head)


def forms(size: int) -> st.SearchStrategy[int]:
    """The length encodings that can carry ``size`` (RFC 6455 5.2 asks for the shortest;
    websockets, like most, takes any)."""
    if size < 126:
        return st.sampled_from((0, 0, 2, 8))
    if size < 1 << 16:
        return st.sampled_from((0, 0, 8))
    return st.just(0)


@st.composite
def specs(
    draw: st.DrawFn,
    opcode: int,
    *,
    masked: bool,
    fin: bool = True,
    small: bool = False,
) -> Spec:
    size = draw(
        st.integers(0, 125) if small else st.one_of(st.sampled_from(SIZES), st.integers(0, 300))
    )
    return Spec(
        opcode,
        size,
        fin=fin,
        masked=masked,
        zero_key=draw(st.booleans()),
        form=draw(forms(size)),
        seed=draw(st.integers(0, 2**32)),
    )


@st.composite
def valid_streams(draw: st.DrawFn, masked: bool) -> list[Spec]:
    """Messages (whole, or fragmented with control frames between the fragments) and
    control frames, as a sender that keeps the protocol would send them."""
    out: list[Spec] = []
    control = st.sampled_from((PING, PONG))
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(("whole", "fragmented", "control")))
        if kind == "control":
            out.append(draw(specs(draw(control), masked=masked, small=True)))
            continue
        opcode = draw(st.sampled_from((TEXT, BINARY)))
        if kind == "whole":
            out.append(draw(specs(opcode, masked=masked)))
            continue
        pieces = draw(st.integers(1, 4))
        for i in range(pieces + 1):
            last = i == pieces
            out.append(draw(specs(opcode if i == 0 else CONT, masked=masked, fin=last)))
            if not last and draw(st.booleans()):
                out.append(draw(specs(draw(control), masked=masked, small=True)))
    return out


def read_cuts(stream: bytes, sizes: list[int]) -> list[bytes]:
    """``stream`` as reads of ``sizes`` bytes, taken in turn."""
    reads, pos, i = [], 0, 0
    while pos < len(stream):
        n = sizes[i % len(sizes)]
        reads.append(stream[pos : pos + n])
        pos += n
        i += 1
    return reads


def parse_one(data: bytes, masked: bool) -> Frame:
    """websockets' parser on ``data``, which must hold exactly one frame."""
    reader = StreamReader()
    reader.feed_data(data)
    parser = Frame.parse(reader.read_exact, mask=masked, max_size=None)
    try:
        next(parser)
    except StopIteration as done:
        assert not reader.buffer, "bytes left after the frame"
        frame: Frame = done.value
        return frame
    raise AssertionError("not a whole frame")


def oracle(masked: bool, max_size: int | None) -> Protocol:
    """websockets' protocol on the receiving side of a sender that masks or not."""
    return Protocol(Side.SERVER if masked else Side.CLIENT, state=State.OPEN, max_size=max_size)


def received(protocol: Protocol) -> list[tuple[Opcode, bytes, bool]]:
    return [(f.opcode, bytes(f.data), f.fin) for f in protocol.events_received()]


def code(protocol: Protocol) -> int | None:
    """The close code the protocol sent (None: none sent)."""
    return None if protocol.close_sent is None else int(protocol.close_sent.code)


def cut_all(cutter: frames.FrameCutter, reads: list[bytes]) -> list[frames.Cut]:
    """The cuts of ``reads`` fed in turn, up to a failure (the relay feeds no more)."""
    cuts: list[frames.Cut] = []
    for piece in reads:
        cuts += cutter.feed(piece)
        if cuts and isinstance(cuts[-1], frames.Failure):
            break
    return cuts


def replay(cuts: list[frames.Cut], masked: bool, max_size: int | None) -> Protocol:
    """A protocol that sees what the relay gives it: every frame until it stops
    reading frames (the spliced ones too: for them it keeps no state), and a failure."""
    protocol = oracle(masked, max_size)
    for cut in cuts:
        if protocol.state is not State.OPEN:
            break
        if isinstance(cut, frames.Failure):
            protocol.fail(cut.code, cut.reason)
        else:
            protocol.receive_data(cut.data)
    return protocol


@given(
    masked=st.booleans(),
    stream=st.data(),
    sizes=st.lists(st.integers(1, 80_000), min_size=1, max_size=12),
)
@PROPERTY
def test_every_frame_is_cut_as_websockets_parses_it(
    masked: bool, stream: st.DataObject, sizes: list[int]
) -> None:
    specs_ = stream.draw(valid_streams(masked))
    laid = [s.lay()[0] for s in specs_]
    wire = b"".join(laid)
    cutter = frames.FrameCutter(masked=masked, max_size=None)
    cuts = cut_all(cutter, read_cuts(wire, sizes))
    assert cutter.pending == b""
    assert [c.data for c in cuts] == laid  # one cut a frame, each the bytes that came
    expected = oracle(masked, None)
    expected.receive_data(wire)
    parsed = received(expected)
    assert len(parsed) == len(cuts)
    in_message = False
    for cut, (opcode, payload, fin), spec in zip(cuts, parsed, specs_, strict=True):
        parsed = parse_one(cut.data, masked)
        assert (parsed.opcode, bytes(parsed.data), parsed.fin) == (opcode, payload, fin)
        spliceable = opcode in (Opcode.TEXT, Opcode.BINARY) and fin and not in_message
        if spliceable:
            assert isinstance(cut, frames.Splice)
            assert cut.text == (opcode is Opcode.TEXT)
            body = cut.data[cut.head :]
            if masked:
                body = apply_mask(body, cut.data[cut.head - 4 : cut.head])
            assert body == payload
            assert cut.head == spec.lay()[1]
        else:
            assert isinstance(cut, frames.Handover)
        if opcode in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
            in_message = not fin
    assert cutter.in_message == in_message


@given(masked=st.booleans(), stream=st.data(), sizes=st.lists(st.integers(1, 300), min_size=1))
@PROPERTY
def test_every_byte_comes_out_once_whatever_the_reads(
    masked: bool, stream: st.DataObject, sizes: list[int]
) -> None:
    """Cut at any read boundary, short of the whole stream too: the cuts then what is
    pending are the bytes fed, in order."""
    wire = b"".join(s.lay()[0] for s in stream.draw(valid_streams(masked)))
    upto = stream.draw(st.integers(0, len(wire)))
    cutter = frames.FrameCutter(masked=masked, max_size=None)
    cuts = cut_all(cutter, read_cuts(wire[:upto], sizes))
    assert b"".join(c.data for c in cuts) + cutter.pending == wire[:upto]


@given(
    masked=st.booleans(),
    stream=st.data(),
    limit=st.sampled_from((0, 1, 125, 126, 300, 65535, 65536)),
    sizes=st.lists(st.integers(1, 5000), min_size=1, max_size=8),
)
@PROPERTY
def test_the_size_limit_as_websockets_applies_it(
    masked: bool, stream: st.DataObject, limit: int, sizes: list[int]
) -> None:
    """A frame over the limit (a message's fragments counted together, control frames
    within a message included, as websockets counts) fails the stream with 1009, at its
    header: its payload never needs to come."""
    specs_ = stream.draw(valid_streams(masked))
    wire = b"".join(s.lay()[0] for s in specs_)
    expected = oracle(masked, limit)
    expected.receive_data(wire)
    cutter = frames.FrameCutter(masked=masked, max_size=limit)
    cuts = cut_all(cutter, read_cuts(wire, sizes))
    got = replay(cuts, masked, limit)
    assert received(got) == received(expected)
    assert code(got) == code(expected)
    failures = [c for c in cuts if isinstance(c, frames.Failure)]
    if expected.close_sent is None:
        assert not failures
        return
    assert [f.code for f in failures] == [1009] == [expected.close_sent.code]
    # The failing frame's header alone is enough.
    at = len(b"".join(c.data for c in cuts[:-1]))
    spec = next(s for s, pos in _offsets(specs_) if pos == at)
    header = wire[: at + spec.lay()[1]]
    again = cut_all(frames.FrameCutter(masked=masked, max_size=limit), read_cuts(header, sizes))
    assert isinstance(again[-1], frames.Failure) and again[-1].code == 1009


@st.composite
def any_frames(draw: st.DrawFn, masked: bool) -> Spec:
    """A frame of any header: every opcode, reserved bits, either masking, control
    frames of any length, fragments in or out of sequence."""
    opcode = draw(st.integers(0, 15))
    size = draw(st.one_of(st.sampled_from((0, 125, 126, 65536)), st.integers(0, 200)))
    return Spec(
        opcode,
        size,
        fin=draw(st.booleans()),
        rsv=draw(st.sampled_from((0, 0, 0, 1, 2, 4, 7))),
        masked=draw(st.sampled_from((masked, masked, not masked))),
        zero_key=draw(st.booleans()),
        form=draw(forms(size)),
        seed=draw(st.integers(0, 2**32)),
    )


@given(
    masked=st.booleans(),
    stream=st.data(),
    limit=st.sampled_from((None, 100, 1 << 20)),
    sizes=st.lists(st.integers(1, 3000), min_size=1, max_size=8),
)
@PROPERTY
def test_a_broken_stream_fails_as_websockets_fails_it_at_the_header(
    masked: bool, stream: st.DataObject, limit: int | None, sizes: list[int]
) -> None:
    """Valid frames, then frames of any header: the protocol that sees the cutter's
    hand-overs and failures receives the same frames and sends the same close code as
    one that sees the whole stream; and a failure needs only the failing frame's
    header (its payload, which websockets reads first for some faults, never)."""
    specs_ = stream.draw(valid_streams(masked)) + stream.draw(
        st.lists(any_frames(masked), min_size=1, max_size=4)
    )
    wire = b"".join(s.lay()[0] for s in specs_)
    expected = oracle(masked, limit)
    expected.receive_data(wire)
    cuts = cut_all(frames.FrameCutter(masked=masked, max_size=limit), read_cuts(wire, sizes))
    got = replay(cuts, masked, limit)
    parsed = received(expected)
    assert received(got) == parsed
    assert code(got) == code(expected)
    if expected.parser_exc is None:
        return  # no fault, or a close frame received (and echoed)
    failing, at = _offsets(specs_)[len(parsed)]
    if failing.opcode == CLOSE:
        return  # a close frame's payload is the protocol's to judge
    # Any other fault is in the header: the cutter failed there, and needs no more.
    assert isinstance(cuts[-1], frames.Failure)
    assert len(b"".join(c.data for c in cuts[:-1])) == at
    header = wire[: at + failing.lay()[1]]
    again = cut_all(frames.FrameCutter(masked=masked, max_size=limit), read_cuts(header, sizes))
    assert isinstance(again[-1], frames.Failure) and again[-1].code == code(expected)


def _offsets(specs_: list[Spec]) -> list[tuple[Spec, int]]:
    out, pos = [], 0
    for spec in specs_:
        out.append((spec, pos))
        pos += len(spec.lay()[0])
    return out


def test_a_read_that_is_one_frame_is_cut_without_a_copy() -> None:
    wire, _ = Spec(BINARY, 300, seed=1).lay()
    (cut,) = frames.FrameCutter(masked=True, max_size=None).feed(wire)
    assert isinstance(cut, frames.Splice) and cut.data is wire


def test_the_cutters_limits_are_the_relays_config() -> None:
    config = RelayConfig("ws://127.0.0.1:9/", max_message_bytes=100)
    caller, _ = Spec(TEXT, 101).lay()
    agent, _ = Spec(TEXT, 100, masked=False).lay()
    (failed,) = frames.FrameCutter.for_leg(config, from_client=True).feed(caller)
    assert isinstance(failed, frames.Failure) and failed.code == 1009
    (whole,) = frames.FrameCutter.for_leg(config, from_client=False).feed(agent)
    assert isinstance(whole, frames.Splice)


def test_after_a_failure_every_feed_fails() -> None:
    cutter = frames.FrameCutter(masked=True, max_size=10)
    head = Spec(BINARY, 11).lay()[0][:6]
    assert [type(c) for c in cutter.feed(head)] == [frames.Failure]
    (again,) = cutter.feed(b"more")
    assert isinstance(again, frames.Failure) and again.data == b"more" and again.code == 1009


@given(
    spec=st.sampled_from((TEXT, BINARY)).flatmap(lambda op: specs(op, masked=True)),
    key=st.binary(min_size=4, max_size=4),
)
@PROPERTY
def test_a_client_frame_masked_anew_is_the_same_frame_under_the_new_key(
    spec: Spec, key: bytes
) -> None:
    wire, head = spec.lay()
    (cut,) = frames.FrameCutter(masked=True, max_size=None).feed(wire)
    assert isinstance(cut, frames.Splice)
    out, payload = frames.masked_anew(cut, key)
    assert len(out) == len(wire)
    assert out[: head - 4] == wire[: head - 4]  # the header as it came
    assert out[head - 4 : head] == key
    before, after = parse_one(wire, True), parse_one(out, True)
    assert (after.opcode, after.data, after.fin) == (before.opcode, before.data, before.fin)
    assert payload == before.data


def test_mask_keys_are_drawn_a_block_at_a_time_and_forgotten_on_demand() -> None:
    draws: list[int] = []

    def source(n: int) -> bytes:
        draws.append(n)
        return random.Random(len(draws)).randbytes(n)

    keys = frames.MaskKeys(source)
    taken = [keys.take() for _ in range(frames.MaskKeys.BLOCK // 4 + 1)]
    assert draws == [frames.MaskKeys.BLOCK, frames.MaskKeys.BLOCK]
    assert all(len(k) == 4 for k in taken)
    assert b"".join(taken[:-1]) == random.Random(1).randbytes(frames.MaskKeys.BLOCK)
    keys.forget()
    keys.take()
    assert len(draws) == 3
