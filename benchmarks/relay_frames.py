"""The websocket relay's frame path alone: CPU and instructions per message forwarded.

One process holds a :class:`~voxproxy.transports.websocket.RelayServer` (with a
do-nothing observer, as ``overhead.py``'s ``forward-only`` path: the payload is still
unmasked and handed over), a raw caller and a raw agent on loopback. They go in lock
step: the caller sends a masked Twilio-sized ``media`` text frame, the agent answers
each with an unmasked one, and neither sends the next before the last arrived, so that
every read holds one frame and two runs do the same work. Reported per message (each
direction's frames counted): the process's CPU time (caller and agent included:
compare builds, not absolute figures), and with ``--callgrind`` the instructions
valgrind's callgrind counts, the difference between a run of ``--messages`` and a run
of a tenth of them divided by the messages between (start-up cancels out). CPU time on
a shared machine drifts by tens of per cent; instruction counts do not, so a change to
the frame path is judged by them. The build is the one on ``PYTHONPATH``: run this
script with an older checkout's path to compare.

Run:  PYTHONPATH=. .venv/bin/python benchmarks/relay_frames.py [--messages 20000] [--callgrind]
Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

import benchkit
import record

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # support.rawws

_REQUEST = (
    b"GET /call HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)
_MEDIA = (
    b'{"event":"media","streamSid":"MZ00000000000000000000000000000000","media":'
    b'{"track":"inbound","chunk":"1","timestamp":"20","payload":"' + b"/" * 212 + b'"}}'
)


def _text_frame(payload: bytes, key: bytes | None) -> bytes:
    n = len(payload)
    head = bytes([0x81, (0x80 if key else 0) | 126]) + n.to_bytes(2, "big")
    if key is None:
        return head + payload
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


class _Sink:
    """A leg's transport that takes every write and sends nothing."""

    written = 0

    def write(self, data: bytes) -> None:
        self.written += len(data)

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _run(messages: int, on_sockets: bool) -> float:
    """``messages`` round trips through a relay; the process CPU seconds they took.

    ``on_sockets``: over loopback, in lock step; else the relay's read callbacks are
    called with one frame each, its legs' transports swapped for sinks once the call is
    up: the frame path alone, with no system call and no event-loop turn."""
    from support.rawws import accept_handshake

    from voxproxy.transports.websocket import RelayConfig, RelayServer

    caller_frames = [_text_frame(_MEDIA, os.urandom(4)) for _ in range(64)]
    reply = _text_frame(_MEDIA, None)
    size = len(caller_frames[0])
    done = asyncio.Event()
    rounds = messages if on_sockets else 1

    async def agent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accept_handshake(reader, writer)
        for _ in range(rounds):
            await reader.readexactly(size)
            writer.write(reply)
        await done.wait()
        writer.close()

    server = await asyncio.start_server(agent, "127.0.0.1", 0)
    agent_port = server.sockets[0].getsockname()[1]
    url = f"ws://127.0.0.1:{agent_port}"
    # Every message measured, as in a call at a real rate (this one runs far faster than
    # any: a build with the relay's flood bound would otherwise stop measuring).
    unbounded: dict[str, Any] = {"max_messages_per_s": None} if _has_rate_bound(RelayConfig) else {}
    relays = RelayServer(RelayConfig(url, **unbounded), lambda t_ns: benchkit.NullObserver())
    port = await relays.start("127.0.0.1", 0)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_REQUEST)
    await reader.readuntil(b"\r\n\r\n")
    start = time.process_time()
    for i in range(rounds):
        writer.write(caller_frames[i % 64])
        await reader.readexactly(len(reply))
    if not on_sockets:
        (relay,) = relays.relays
        caller, agent_leg = relay.caller, relay.agent
        assert agent_leg is not None
        real = caller.transport, agent_leg.transport
        caller.transport = agent_leg.transport = _Sink()  # type: ignore[assignment]
        data = relay.data
        start = time.process_time()
        for i in range(messages):
            data(caller, caller_frames[i % 64])
            data(agent_leg, reply)
        caller.transport, agent_leg.transport = real
    cpu = time.process_time() - start
    done.set()
    writer.close()
    await relays.stop()
    server.close()
    return cpu


def _has_rate_bound(config: type) -> bool:
    return "max_messages_per_s" in {f.name for f in dataclasses.fields(config)}


def _counted(messages: int, on_sockets: bool) -> int:
    """Instructions of a child run of ``messages`` under callgrind."""
    argv = [__file__, "--child", str(messages), *(("--sockets",) if on_sockets else ())]
    return benchkit.callgrind(argv)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20000, help="round trips")
    parser.add_argument("--callgrind", action="store_true", help="count instructions too")
    parser.add_argument("--sockets", action="store_true", help="over loopback (noisier)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    record.add_flag(parser)
    args = parser.parse_args()
    import uvloop

    if args.child is not None:
        uvloop.run(_run(args.child, args.sockets))
        return
    from voxproxy.transports.websocket import relay

    cpu = uvloop.run(_run(args.messages, args.sockets))
    result: dict[str, object] = {
        "relay": str(Path(relay.__file__).resolve().parent),
        "messages": 2 * args.messages,
        "path": "sockets" if args.sockets else "frame path",
        "cpu_per_msg_us": round(cpu / (2 * args.messages) * 1e6, 2),
    }
    print(f"relay at {result['relay']}")
    print(f"{result['path']}: CPU per message: {result['cpu_per_msg_us']} µs")
    if args.callgrind:
        small = max(1, args.messages // 10)
        extra = _counted(args.messages, args.sockets) - _counted(small, args.sockets)
        per = extra / (2 * (args.messages - small))
        result["instructions_per_msg"] = round(per)
        print(f"instructions per message (callgrind): {per:.0f}")
    record.finish("relay_frames", result, args)


if __name__ == "__main__":
    main()
