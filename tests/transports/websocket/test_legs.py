"""Every way a leg of a call fails ends the call (legs.py, "how a call ends"): within the
close timeout while the failing peer keeps its TCP open, with the other side told (a
close frame with a sensible code, or an HTTP status during the handshake), the
admission slot freed, what the other side sent after it could no longer be forwarded
counted (anomaly ``undelivered``), and exactly one receipt with the right terminal.

Raw sockets on both sides (tests/support/rawpeers.py): the failing peer writes bytes a
websocket library would refuse to write, and never closes its socket itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

import pytest
from support.faultkit import running_proxy, settle
from support.observers import EndsKept
from support.rawpeers import (
    BINARY,
    CALLER_MASK,
    TEXT,
    RawAgents,
    RawPeer,
    close_frame,
    frame,
    raw_agents,
    raw_caller,
    refused_status,
)
from support.rawws import accept_handshake
from support.waiting import wait_until

from voxproxy.core.events import Direction
from voxproxy.core.receipt import Receipt
from voxproxy.proxy.websocket import Proxy
from voxproxy.transports.websocket import RelayConfig, RelayServer

PCM = b"\x01\x00" * 160  # 10 ms of 16 kHz audio, barely audible
AFTER = 3  # audio messages the other side sends once it was told
LIMIT = 1 << 16  # max_message_bytes
FLOOD = b"x" * 60_000  # a text frame the raw dialect counts as malformed, cheaply
RELAY = {
    "close_timeout_s": 0.3,
    "stall_timeout_s": 0.3,
    "handshake_timeout_s": 1.0,
    "max_message_bytes": LIMIT,
    "max_calls": 1,
}


@dataclass(frozen=True)
class LegFailure:
    """One way a leg fails once the call is up: ``leg``'s peer writes ``wire`` (or
    half-closes, resets, or stops reading while the other side floods)."""

    leg: str  # "caller" or "agent": the peer that fails
    terminal: str
    told: int  # the close code the other side gets
    wire: bytes = b""
    how: str = "write"  # "write", "eof", "reset" or "stall"


def agent_case(terminal: str, told: int, wire: bytes = b"", how: str = "write") -> LegFailure:
    return LegFailure("agent", terminal, told, wire, how)


def caller_case(terminal: str, told: int, wire: bytes = b"", how: str = "write") -> LegFailure:
    return LegFailure("caller", terminal, told, wire, how)


M = CALLER_MASK
LEG_FAILURES = {
    # The agent (a server: its frames must not be masked).
    "agent-masked-frame": agent_case("protocol_error", 1014, frame(BINARY, PCM, mask=M)),
    "agent-rsv-bits": agent_case("protocol_error", 1014, frame(BINARY, PCM, rsv=4)),
    "agent-bad-opcode": agent_case("protocol_error", 1014, frame(3, b"?")),
    "agent-bad-close-code": agent_case("protocol_error", 1014, close_frame(1005)),
    "agent-oversized-frame": agent_case(
        "message_too_big", 1009, frame(BINARY, b"", size=LIMIT + 1) + b"x" * 10
    ),
    "agent-close-keeps-tcp": agent_case("agent_closed", 4000, close_frame(4000, b"bye")),
    "agent-half-close": agent_case("agent_vanished", 1014, how="eof"),
    "agent-reset": agent_case("agent_vanished", 1014, how="reset"),
    "agent-stall": agent_case("agent_vanished", 1014, how="stall"),
    # The caller (a client: its frames must be masked).
    "caller-unmasked-frame": caller_case("protocol_error", 1002, frame(BINARY, PCM)),
    "caller-rsv-bits": caller_case("protocol_error", 1002, frame(BINARY, PCM, mask=M, rsv=4)),
    "caller-bad-opcode": caller_case("protocol_error", 1002, frame(3, b"?", mask=M)),
    "caller-bad-close-code": caller_case("protocol_error", 1002, close_frame(1005, mask=M)),
    "caller-oversized-frame": caller_case(
        "message_too_big", 1009, frame(BINARY, b"", mask=M, size=LIMIT + 1) + b"x" * 10
    ),
    "caller-close-keeps-tcp": caller_case("caller_closed", 4000, close_frame(4000, mask=M)),
    "caller-half-close": caller_case("caller_vanished", 1001, how="eof"),
    "caller-reset": caller_case("caller_vanished", 1001, how="reset"),
    "caller-stall": caller_case("caller_vanished", 1001, how="stall"),
}


@asynccontextmanager
async def a_call(
    agents: RawAgents,
) -> AsyncIterator[tuple[RawPeer, RawPeer, list[Receipt], Proxy]]:
    """A call through a proxy (``raw`` dialect, short timeouts, one call at most) that
    has carried audio both ways: its caller, its agent, the receipts, the proxy."""
    async with running_proxy(agents.url, "raw", b"k", **RELAY) as (port, receipts, proxy):
        caller = await raw_caller(port)
        agent = await asyncio.wait_for(agents.connections.get(), 10)
        caller.send(BINARY, PCM)
        assert await asyncio.wait_for(agent.read_frame(), 10) == (0x82, PCM)
        agent.send(BINARY, PCM)
        assert await asyncio.wait_for(caller.read_frame(), 10) == (0x82, PCM)
        try:
            yield caller, agent, receipts, proxy
        finally:
            await caller.hang_up()


def only_receipt(receipts: list[Receipt], proxy: Proxy) -> Receipt:
    """The call's one receipt, once the proxy holds nothing more of it (its admission
    slot included)."""
    assert len(receipts) == 1, [r.terminal for r in receipts]
    assert proxy.server.admission.active == 0
    return receipts[0]


@pytest.mark.parametrize("case", LEG_FAILURES.values(), ids=LEG_FAILURES.keys())
async def test_a_failing_leg_ends_the_call_and_tells_the_other_side(case: LegFailure) -> None:
    async with raw_agents() as agents, a_call(agents) as (caller, agent, receipts, proxy):
        failing, other = (agent, caller) if case.leg == "agent" else (caller, agent)
        flood = None
        if case.how == "write":
            failing.writer.write(case.wire)
        elif case.how == "eof":
            failing.writer.write_eof()
        elif case.how == "reset":
            failing.reset()
        else:  # the failing peer reads nothing more while the other side sends
            flood = asyncio.create_task(other.flood(FLOOD))
        told = await asyncio.wait_for(other.read_close(), 10)
        if flood is not None:
            flood.cancel()
            await asyncio.gather(flood, return_exceptions=True)
        assert told == case.told
        # Told, the other side still sends audio before it answers the close: nothing
        # can take it any more, and it is counted.
        for _ in range(AFTER):
            other.send(BINARY, PCM)
        other.send_close(case.told)
        # The failing peer keeps its socket open all along (only a reset dropped it).
        await settle(receipts, 1, proxy)
        r = only_receipt(receipts, proxy)
        assert r.terminal == case.terminal
        told_code = r.close.caller_code if case.leg == "agent" else r.close.agent_code
        assert told_code == case.told
        undelivered = r.anomalies.get("undelivered", 0)
        if flood is None:
            assert undelivered == AFTER
        else:  # (the flood the proxy read after the stalled peer was dropped counts too)
            assert undelivered >= AFTER


async def _refuse_403(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 3\r\n\r\nno\n")


async def _bad_accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    writer.write(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: bm90IHRoZSBhY2NlcHQga2V5IQ==\r\n\r\n"
    )


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    del writer
    await reader.readuntil(b"\r\n\r\n")


async def _hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    writer.close()


HANDSHAKE_FAILURES = {
    "agent-refuses": (_refuse_403, 403, "upstream_refused"),
    "agent-bad-accept": (_bad_accept, 502, "upstream_unreachable"),
    "agent-silent": (_silent, 504, "upstream_timeout"),
    "agent-hangs-up": (_hang_up, 502, "upstream_unreachable"),
}


@pytest.mark.parametrize(
    ("handshake", "status", "terminal"), HANDSHAKE_FAILURES.values(), ids=HANDSHAKE_FAILURES.keys()
)
async def test_a_failing_agent_handshake_ends_the_call_and_answers_the_caller(
    handshake: object, status: int, terminal: str
) -> None:
    # The caller's first audio comes right behind its request: it can never be forwarded.
    early = frame(BINARY, PCM, mask=CALLER_MASK) * AFTER
    async with (
        raw_agents(handshake) as agents,  # type: ignore[arg-type]
        running_proxy(agents.url, "raw", b"k", **RELAY) as (port, receipts, proxy),
    ):
        assert await refused_status(port, after=early) == status
        await settle(receipts, 1, proxy)
        r = only_receipt(receipts, proxy)
        assert r.terminal == terminal
        assert r.anomalies.get("undelivered", 0) == AFTER


async def test_the_slot_a_failed_call_held_serves_the_next_caller() -> None:
    """One call at most: after an agent's protocol error (its socket kept open) the next
    caller is served, and its call goes through."""
    async with raw_agents(accept_handshake) as agents:
        async with a_call(agents) as (caller, agent, receipts, proxy):
            agent.writer.write(frame(BINARY, PCM, mask=CALLER_MASK))
            assert await asyncio.wait_for(caller.read_close(), 10) == 1014
            caller.send_close(1014)
            await settle(receipts, 1, proxy)
            port = proxy.server.server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            second = await raw_caller(port)
            other_agent = await asyncio.wait_for(agents.connections.get(), 10)
            second.send(TEXT, b'{"type": "start", "sample_rate": 16000}')
            b0, body = await asyncio.wait_for(other_agent.read_frame(), 10)
            assert (b0 & 0x0F, body) == (TEXT, b'{"type": "start", "sample_rate": 16000}')
            await second.hang_up()


# -- a flooding leg takes its share of the loop, no more ------------------------------------

TINY = frame(TEXT, b"ping", mask=CALLER_MASK)  # 10 bytes


@dataclass
class Logged(EndsKept):
    """A call's observer that writes what it is told into one log shared by the calls
    (so that the order across calls shows), and may act on the call's n-th message."""

    name: str
    log: list[str]
    on_nth: tuple[int, Callable[[], None]] | None = None
    seen: int = 0

    def on_message(self, direction: Direction, payload: bytes | str, t_ns: int) -> bool | None:
        del direction, t_ns
        self.seen += 1
        self.log.append(self.name)
        if self.on_nth is not None and self.seen == self.on_nth[0]:
            self.on_nth[1]()
        return True


async def _drain(peer: RawPeer) -> None:
    with suppress(ConnectionError):
        while await peer.reader.read(1 << 16):
            pass


@pytest.mark.slow
async def test_a_big_read_is_taken_a_share_at_a_time_and_another_call_goes_between() -> None:
    """One read of 9,000 tiny frames (below the rate bound: each is measured) is handed
    to the relay a share per turn of the loop, its connection's reading paused, and a
    frame another caller sends once the flood's 100th message is measured is forwarded
    before the flood's last. On 938dcc8 the whole read went through in one go, however
    long it took (and uvloop hands a busy socket up to 32 reads of 256 KiB in a row)."""
    flood_frames = 9000
    log: list[str] = []
    observers: list[Logged] = []
    second: list[RawPeer] = []

    def factory(t_ns: int) -> Logged:
        del t_ns
        name = "flood" if not observers else "other"
        # The other caller's frame is written once the flood's 100th message is measured.
        trigger = (100, lambda: second[0].send(BINARY, PCM)) if not observers else None
        observers.append(Logged(name, log, trigger))
        return observers[-1]

    async with raw_agents() as agents:
        relay = RelayServer(RelayConfig(agents.url, close_timeout_s=0.3), factory)
        port = await relay.start("127.0.0.1", 0)
        try:
            flooder = await raw_caller(port)
            drains = [asyncio.create_task(_drain(await agents.connections.get()))]
            second.append(await raw_caller(port))
            drains.append(asyncio.create_task(_drain(await agents.connections.get())))
            here = flooder.writer.get_extra_info("sockname")
            (call,) = [
                r for r in relay.relays if r.caller.transport.get_extra_info("peername") == here
            ]
            # One read, as uvloop or asyncio would hand it to the connection.
            call.caller.data_received(TINY * flood_frames)
            assert not call.caller.reading()  # its share taken: paused
            await wait_until(
                lambda: log.count("flood") == flood_frames and "other" in log, 30, "both calls"
            )
            assert log.index("other") < len(log) - 1 - log[::-1].index("flood")
            await wait_until(call.caller.reading, 10, "reading resumed")
            for peer in (flooder, second[0]):
                await peer.hang_up()
            await wait_until(lambda: all(o.ends for o in observers), 10, "both calls' ends")
            assert observers[0].ends[0].over_rate == (0, 0)  # (below the bound)
            for task in drains:
                task.cancel()
        finally:
            await relay.stop()


@pytest.mark.slow
async def test_a_caller_over_the_message_rate_is_forwarded_counted_and_not_measured() -> None:
    """2,000 tiny frames with at most 100 messages a second measured: each is forwarded
    and in the receipt's traffic, those beyond the bound counted (``messages_over_rate``)
    and not measured (the ``raw`` dialect counts each measured one as malformed)."""
    flood_frames = 2000
    async with (
        raw_agents() as agents,
        running_proxy(agents.url, "raw", b"k", close_timeout_s=0.3, max_messages_per_s=100) as (
            port,
            receipts,
            proxy,
        ),
    ):
        caller = await raw_caller(port)
        agent = await asyncio.wait_for(agents.connections.get(), 10)
        caller.writer.write(TINY * flood_frames)
        got = b""
        while len(got) < len(TINY * flood_frames):  # every frame reaches the agent
            got += await asyncio.wait_for(agent.reader.read(1 << 16), 10)
        caller.send_close(1000)
        assert await asyncio.wait_for(caller.read_close(), 10) == 1000
        await caller.hang_up()
        await settle(receipts, 1, proxy)
        r = only_receipt(receipts, proxy)
        over = r.anomalies["messages_over_rate"]
        assert over >= flood_frames // 2  # (100 a second measured: 10 s to measure half)
        assert over + r.anomalies["malformed"] == flood_frames
        assert r.traffic.caller_to_agent_messages == flood_frames
