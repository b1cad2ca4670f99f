"""The relay cuts each leg's stream into frames itself once the handshake is through
(relay.py, "Reading a leg"): whole data frames go to the other leg as the very bytes that
came, whatever the reads' boundaries; every other frame goes through websockets' protocol
as before. Raw sockets on both sides, so that the bytes on the wire are what is compared.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field

import pytest
from support.observers import EndsKept
from support.rawpeers import BINARY, CLOSE, CONT, PING, TEXT, frame, upgrade_request
from support.rawws import accept_handshake
from support.waiting import wait_until
from websockets.utils import apply_mask

from voxproxy.core.events import AGENT_TO_CALLER, CALLER_TO_AGENT, Direction
from voxproxy.transports.ends import EndCause
from voxproxy.transports.websocket import RelayConfig, RelayServer, relay


def keyed_frames(data: bytes | bytearray) -> list[tuple[bytes, bytes, bytes]]:
    """(header up to its masking key, the key, the unmasked payload) of each whole frame
    at the start of ``data``, a server's (no key) or a client's."""
    out = []
    pos = 0
    while len(data) - pos >= 2:
        b1 = data[pos + 1]
        n, at = b1 & 0x7F, pos + 2
        if n == 126:
            n, at = int.from_bytes(data[at : at + 2], "big"), at + 2
        elif n == 127:
            n, at = int.from_bytes(data[at : at + 8], "big"), at + 8
        head = bytes(data[pos:at])
        key = b""
        if b1 & 0x80:
            key, at = bytes(data[at : at + 4]), at + 4
        if at + n > len(data):
            break
        body = bytes(data[at : at + n])
        if key:
            body = apply_mask(body, key)
        out.append((head, key, body))
        pos = at + n
    return out


def unmasked_frames(data: bytes | bytearray) -> list[tuple[int, bytes]]:
    """(first byte, payload) of each whole frame at the start of ``data``."""
    return [(head[0], body) for head, _, body in keyed_frames(data)]


def chunks(data: bytes, rng: random.Random, most: int = 40) -> Iterable[bytes]:
    """``data`` cut at random places (one byte at a time now and then)."""
    pos = 0
    while pos < len(data):
        n = 1 if rng.random() < 0.3 else rng.randint(1, most)
        yield data[pos : pos + n]
        pos += n


@dataclass
class Recorder(EndsKept):
    """A call's observer that keeps what it is told."""

    messages: list[tuple[Direction, bytes | str]] = field(default_factory=list)

    def on_message(self, direction: Direction, payload: bytes | str, t_ns: int) -> bool | None:
        del t_ns
        self.messages.append((direction, payload))
        return True


@dataclass
class RawAgent:
    """What a hand-written agent read after its handshake, and its writer."""

    read: bytearray = field(default_factory=bytearray)
    writer: asyncio.StreamWriter | None = None
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    closed: asyncio.Event = field(default_factory=asyncio.Event)


@asynccontextmanager
async def relay_between(
    after_101: bytes = b"", max_message_bytes: int | None = 1 << 20
) -> AsyncIterator[tuple[int, RawAgent, list[Recorder]]]:
    """A relay on loopback to a raw agent that answers the handshake (with ``after_101``
    in the same write) and records every byte it reads after it."""
    agent = RawAgent()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accept_handshake(reader, writer, after_101)
        agent.writer = writer
        agent.connected.set()
        try:
            while data := await reader.read(1 << 16):
                agent.read += data
        except ConnectionError:
            pass
        finally:
            agent.closed.set()
            await hang_up(writer)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    agent_port = server.sockets[0].getsockname()[1]
    observers: list[Recorder] = []

    def factory(t_ns: int) -> Recorder:
        del t_ns
        observers.append(Recorder())
        return observers[-1]

    relay = RelayServer(
        RelayConfig(
            f"ws://127.0.0.1:{agent_port}",
            close_timeout_s=1.0,
            max_message_bytes=max_message_bytes,
        ),
        factory,
    )
    port = await relay.start("127.0.0.1", 0)
    try:
        yield port, agent, observers
    finally:
        await relay.stop()
        if agent.writer is not None:
            agent.writer.close()
            with suppress(ConnectionError):
                await agent.writer.wait_closed()
        server.close()
        await server.wait_closed()


async def raw_caller(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A caller's connection, through its handshake."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(upgrade_request())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 101 "), head
    return reader, writer


async def hang_up(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with suppress(ConnectionError):
        await writer.wait_closed()


async def read_at_least(reader: asyncio.StreamReader, n: int) -> bytes:
    got = b""
    while len(got) < n:
        more = await asyncio.wait_for(reader.read(1 << 16), 5)
        if not more:
            break
        got += more
    return got


def data_frames(rng: random.Random, masked: bool) -> list[tuple[int, bytes, bytes]]:
    """(opcode, payload, frame bytes) of data frames of every length encoding."""
    out = []
    for n in (0, 1, 125, 126, 127, 400, 65535, 65536, 70000):
        opcode = TEXT if n % 2 else BINARY
        payload = (
            "".join(rng.choice("aé€\U0001f600 ") for _ in range(n)).encode()[:n]
            if opcode == TEXT
            else os.urandom(n)
        )
        mask = os.urandom(4) if masked else None
        out.append((opcode, payload, frame(opcode, payload, mask=mask)))
    return out


def as_received(opcode: int, payload: bytes) -> bytes | str:
    return payload.decode("utf-8", "replace") if opcode == TEXT else payload


async def test_the_callers_frames_reach_the_agent_whole_under_keys_of_the_relays() -> None:
    """Each frame as it came (its header, its length encoding, its payload), but for its
    masking key: the relay, the agent's client, masks with fresh keys of its own."""
    rng = random.Random(5)
    sent = data_frames(rng, masked=True)
    wire = b"".join(f for _, _, f in sent)
    async with relay_between() as (port, agent, observers):
        _, writer = await raw_caller(port)
        await asyncio.wait_for(agent.connected.wait(), 5)
        for piece in chunks(wire, rng, most=3000):
            writer.write(piece)
            if rng.random() < 0.2:
                await writer.drain()
                await asyncio.sleep(0)
        await wait_until(lambda: len(agent.read) >= len(wire), what="the agent to read every frame")
        got = keyed_frames(agent.read)
        came = keyed_frames(wire)
        assert [(head, body) for head, _, body in got] == [(head, body) for head, _, body in came]
        keys = [key for _, key, _ in got]
        assert len(set(keys)) == len(keys)  # a fresh key every frame
        assert all(ours != theirs for ours, (_, theirs, _) in zip(keys, came, strict=True))
        await wait_until(
            lambda: len(observers[0].messages) == len(sent), what="every message measured"
        )
        assert observers[0].messages == [(CALLER_TO_AGENT, as_received(op, p)) for op, p, _ in sent]
        await hang_up(writer)


async def test_the_agents_frames_reach_the_caller_as_the_bytes_that_came() -> None:
    rng = random.Random(7)
    sent = data_frames(rng, masked=False)
    # The first two frames come in the same write as the agent's 101.
    first = b"".join(f for _, _, f in sent[:2])
    rest = b"".join(f for _, _, f in sent[2:])
    async with relay_between(after_101=first) as (port, agent, observers):
        reader, writer = await raw_caller(port)
        await asyncio.wait_for(agent.connected.wait(), 5)
        assert agent.writer is not None
        for piece in chunks(rest, rng, most=3000):
            agent.writer.write(piece)
            if rng.random() < 0.2:
                await agent.writer.drain()
                await asyncio.sleep(0)
        got = await read_at_least(reader, len(first) + len(rest))
        assert got == first + rest
        await wait_until(
            lambda: len(observers[0].messages) == len(sent), what="every message measured"
        )
        assert observers[0].messages == [(AGENT_TO_CALLER, as_received(op, p)) for op, p, _ in sent]
        await hang_up(writer)


async def test_a_caller_with_a_zero_key_does_not_choose_the_bytes_on_the_agents_wire() -> None:
    """RFC 6455 5.3 and 10.3: a client's key must be unpredictable. A caller masking
    with 00000000 would put its payload in clear on the proxy-to-agent wire, where the
    proxy is the client; each frame reaches the agent under a fresh non-zero key of the
    relay's, the same payload unmasked."""
    poison = b"GET /poison HTTP/1.1\r\nHost: agent\r\n\r\n"
    sent = [frame(TEXT, poison, mask=b"\0\0\0\0") for _ in range(8)]
    sent.append(frame(BINARY, os.urandom(70000), mask=b"\0\0\0\0"))  # a 64-bit length
    async with relay_between() as (port, agent, observers):
        _, writer = await raw_caller(port)
        await asyncio.wait_for(agent.connected.wait(), 5)
        for one in sent:
            writer.write(one)
        await wait_until(lambda: len(keyed_frames(agent.read)) == len(sent), what="every frame")
        got = keyed_frames(agent.read)
        assert [(head, body) for head, _, body in got] == [
            (head, body) for head, _, body in keyed_frames(b"".join(sent))
        ]
        keys = [key for _, key, _ in got]
        assert b"\0\0\0\0" not in keys
        assert len(set(keys)) == len(keys)
        assert poison not in bytes(agent.read)
        await wait_until(
            lambda: len(observers[0].messages) == len(sent), what="every message measured"
        )
        assert observers[0].messages[0] == (CALLER_TO_AGENT, poison.decode())
        await hang_up(writer)


def test_a_forked_worker_masks_with_keys_of_its_own() -> None:
    """The proxy forks its workers: a worker must not use the keys its parent drew
    (and may hand out itself, or to another worker)."""
    relay._KEYS.take()  # the parent holds a block of keys now
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.write(write_end, relay._KEYS.take())
        os._exit(0)
    os.close(write_end)
    childs = os.read(read_end, 4)
    os.close(read_end)
    os.waitpid(pid, 0)
    assert len(childs) == 4
    assert childs != relay._KEYS.take()


async def test_pings_and_fragments_go_through_the_protocol_and_the_splice_resumes() -> None:
    mask = b"\x01\x02\x03\x04"
    whole = frame(TEXT, b'{"event":"media"}', mask=mask)
    wire = (
        whole
        + frame(PING, b"are you there", mask=mask)
        + frame(TEXT, b"first half, ", fin=False, mask=mask)
        + frame(PING, b"mid-message", mask=mask)
        + frame(CONT, b"second half", mask=mask)
        + frame(BINARY, b"\x00\x01\x02", mask=mask)
    )
    async with relay_between() as (port, agent, observers):
        reader, writer = await raw_caller(port)
        await asyncio.wait_for(agent.connected.wait(), 5)
        for piece in chunks(wire, random.Random(3), most=7):
            writer.write(piece)
        await writer.drain()
        await wait_until(
            lambda: len(unmasked_frames(agent.read)) == 4, what="the last frame at the agent"
        )
        # Whole frames pass as they came; the fragments, re-masked by the relay's own
        # client side, keep their payloads, their opcodes and their FIN bits.
        assert unmasked_frames(agent.read) == [
            (0x81, b'{"event":"media"}'),
            (0x01, b"first half, "),
            (0x80, b"second half"),
            (0x82, b"\x00\x01\x02"),
        ]
        # Both pings were answered by the relay, per hop.
        pongs = unmasked_frames(await read_at_least(reader, 2 * 2 + 13 + 11))
        assert pongs == [(0x8A, b"are you there"), (0x8A, b"mid-message")]
        await wait_until(lambda: len(observers[0].messages) == 3, what="three messages measured")
        assert [p for _, p in observers[0].messages] == [
            '{"event":"media"}',
            "first half, second half",
            b"\x00\x01\x02",
        ]
        await hang_up(writer)


async def _closed_with(
    wire: bytes, max_message_bytes: int | None = 1 << 20
) -> tuple[int | None, bytes, list[tuple[Direction, bytes | str]]]:
    """Send ``wire`` after a whole frame; the close code the caller got, what the agent
    read, and what was measured."""
    good = frame(TEXT, b"fine", mask=b"\x09\x08\x07\x06")
    async with relay_between(max_message_bytes=max_message_bytes) as (port, agent, observers):
        reader, writer = await raw_caller(port)
        await asyncio.wait_for(agent.connected.wait(), 5)
        writer.write(good + wire)
        answer = await read_at_least(reader, 4)
        code = None
        for b0, body in unmasked_frames(answer):
            if b0 == 0x88:
                code = int.from_bytes(body[:2], "big")
        await hang_up(writer)
        await wait_until(lambda: bool(observers[0].ends), what="the call's end")
        return code, bytes(agent.read), observers[0].messages


async def test_a_caller_frame_without_a_mask_fails_the_connection_as_before() -> None:
    code, at_agent, measured = await _closed_with(frame(TEXT, b"not masked"))
    assert code == 1002
    assert measured == [(CALLER_TO_AGENT, "fine")]
    assert b"not masked" not in at_agent


async def test_reserved_bits_fail_the_connection_as_before() -> None:
    code, at_agent, measured = await _closed_with(frame(TEXT, b"rsv", mask=b"abcd", rsv=4))
    assert code == 1002
    assert measured == [(CALLER_TO_AGENT, "fine")]
    assert b"rsv" not in at_agent


async def test_a_frame_over_the_limit_fails_on_its_header_without_its_payload() -> None:
    # The header says 2 MiB; only 10 bytes of it ever come.
    head = frame(BINARY, b"", mask=b"abcd", size=2 << 20)
    code, at_agent, measured = await _closed_with(head + b"x" * 10, max_message_bytes=1 << 20)
    assert code == 1009
    assert measured == [(CALLER_TO_AGENT, "fine")]
    # The agent got the whole frame before it, then the relay's close: nothing of it.
    assert [b0 for b0, _ in unmasked_frames(at_agent)] == [0x81, 0x88]


# Headers that already break the protocol, each declaring a payload (within the size
# limit unless said) that is never sent: the answer must come at the header.
ALMOST_1MIB = (1 << 20) - 1
CALLER_HEADER_FAULTS = {
    "opcode-3": (frame(3, b"", mask=b"abcd", size=ALMOST_1MIB), 1002),
    "opcode-11": (frame(11, b"", mask=b"abcd", size=100), 1002),
    "reserved-bit": (frame(TEXT, b"", mask=b"abcd", rsv=4, size=ALMOST_1MIB), 1002),
    "unmasked": (frame(BINARY, b"", size=ALMOST_1MIB), 1002),
    "long-ping": (frame(PING, b"", mask=b"abcd", size=ALMOST_1MIB), 1002),
    "fragmented-ping": (frame(PING, b"", fin=False, mask=b"abcd", size=100), 1002),
    "stray-continuation": (frame(CONT, b"", mask=b"abcd", size=ALMOST_1MIB), 1002),
    "over-the-limit": (frame(BINARY, b"", mask=b"abcd", size=2 << 20), 1009),
}


@pytest.mark.parametrize(
    ("header", "expected"), CALLER_HEADER_FAULTS.values(), ids=CALLER_HEADER_FAULTS.keys()
)
async def test_a_caller_frame_with_a_broken_header_is_answered_at_its_header(
    header: bytes, expected: int
) -> None:
    """The caller sends the header alone and waits: the close comes all the same (it
    used to wait for the whole declared payload, which a peer could trickle forever)."""
    code, at_agent, measured = await _closed_with(header)
    assert code == expected
    assert measured == [(CALLER_TO_AGENT, "fine")]
    # The agent got the whole frame before it, then the relay's close.
    assert [b0 for b0, _ in unmasked_frames(at_agent)] == [0x81, 0x88]


AGENT_HEADER_FAULTS = {
    "masked": frame(BINARY, b"", mask=b"abcd", size=ALMOST_1MIB),
    "opcode-3": frame(3, b"", size=ALMOST_1MIB),
    "reserved-bit": frame(BINARY, b"", rsv=2, size=ALMOST_1MIB),
    "long-close": frame(CLOSE, b"", size=ALMOST_1MIB),
}


@pytest.mark.parametrize("header", AGENT_HEADER_FAULTS.values(), ids=AGENT_HEADER_FAULTS.keys())
async def test_an_agent_frame_with_a_broken_header_is_answered_at_its_header(
    header: bytes,
) -> None:
    async with relay_between() as (port, agent, _):
        _, writer = await raw_caller(port)
        await asyncio.wait_for(agent.connected.wait(), 5)
        assert agent.writer is not None
        agent.writer.write(header)

        def close_read() -> bool:
            got = agent.read
            return len(got) >= 2 and len(got) >= 6 + (got[1] & 0x7F)

        await wait_until(close_read, what="the relay's close at the agent")
        ((b0, body),) = unmasked_frames(bytes(agent.read[: 6 + (agent.read[1] & 0x7F)]))
        assert b0 == 0x88
        assert int.from_bytes(body[:2], "big") == 1002
        await hang_up(writer)


async def test_a_close_ends_the_splice_and_what_follows_it_is_not_forwarded() -> None:
    close = frame(CLOSE, (1000).to_bytes(2, "big") + b"bye", mask=b"wxyz")
    after = frame(TEXT, b"after the close", mask=b"wxyz")
    code, at_agent, measured = await _closed_with(close + after)
    assert code == 1000
    assert b"after the close" not in at_agent
    assert measured == [(CALLER_TO_AGENT, "fine")]


async def test_a_stream_that_ends_inside_a_frame_ends_the_call_as_a_vanished_caller() -> None:
    good = frame(TEXT, b"fine", mask=b"\x09\x08\x07\x06")
    cut = frame(TEXT, b"never finished", mask=b"\x01\x01\x01\x01")[:9]
    async with relay_between() as (port, agent, observers):
        _, writer = await raw_caller(port)
        await asyncio.wait_for(agent.connected.wait(), 5)
        writer.write(good + cut)
        await writer.drain()
        await wait_until(lambda: len(observers[0].messages) == 1, what="the whole frame measured")
        writer.write_eof()
        await wait_until(lambda: bool(observers[0].ends), what="the call's end")
        assert observers[0].ends[0].cause is EndCause.CALLER_VANISHED
        assert b"never" not in bytes(agent.read)
        await hang_up(writer)


async def test_the_callers_handshake_and_first_frames_in_one_write() -> None:
    """Frames right behind the request, before the agent has answered: as before, they
    are not forwarded (the agent's side is not open yet), and the call goes on."""
    mask = b"\x05\x06\x07\x08"
    early = frame(TEXT, b"too early", mask=mask)
    later = frame(TEXT, b"in time", mask=mask)
    async with relay_between() as (port, agent, observers):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        request = upgrade_request()
        # The request's blank line cut across two writes, the first frame behind it.
        writer.write(request[:-3])
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(request[-3:] + early)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 101 ")
        await asyncio.wait_for(agent.connected.wait(), 5)
        writer.write(later)
        await wait_until(
            lambda: bool(unmasked_frames(agent.read)), what="the later frame at the agent"
        )
        assert unmasked_frames(agent.read) == [(0x81, b"in time")]
        assert observers[0].messages == [(CALLER_TO_AGENT, "in time")]
        await hang_up(writer)


async def test_a_message_begun_before_the_agent_answered_is_dropped_whole() -> None:
    """A fragment pipelined behind the request (the agent has not answered, so it is not
    forwarded) and its continuation after the 101: the continuation is dropped too (the
    agent's side has no message in progress). It raised inside the relay's read
    callback, and the caller was dropped without a close."""
    mask = b"\x05\x06\x07\x08"
    begun = frame(TEXT, b"begun early, ", fin=False, mask=mask)
    ended = frame(CONT, b"ended late", mask=mask)
    later = frame(TEXT, b"in time", mask=mask)
    async with relay_between() as (port, agent, observers):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(upgrade_request() + begun)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 101 ")
        await asyncio.wait_for(agent.connected.wait(), 5)
        writer.write(ended + later + frame(PING, b"still there?", mask=mask))
        pong = unmasked_frames(await read_at_least(reader, 2 + 12))
        assert pong == [(0x8A, b"still there?")]
        await wait_until(
            lambda: bool(unmasked_frames(agent.read)), what="the later frame at the agent"
        )
        assert unmasked_frames(agent.read) == [(0x81, b"in time")]
        assert observers[0].messages == [(CALLER_TO_AGENT, "in time")]
        await hang_up(writer)
        await wait_until(lambda: bool(observers[0].ends), what="the call's end")
        assert observers[0].ends[0].undelivered == 1
