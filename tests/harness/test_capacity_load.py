"""benchmarks/capacity_load.py: its hand-made frames are RFC 6455's (websockets reads what
it writes, it reads what websockets writes, however the reads are cut), and its callers
and agent carry real-time calls, directly and through voxproxy."""

from __future__ import annotations

import random

import pytest
from support.benchmarks import load_benchmark
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Request
from websockets.server import ServerProtocol
from websockets.uri import parse_uri

SIZES = (0, 1, 125, 126, 127, 300, 65535, 65536, 70000)  # each length encoding and its edges


def _open_pair() -> tuple[ClientProtocol, ServerProtocol]:
    client = ClientProtocol(parse_uri("ws://127.0.0.1/"), max_size=None)
    server = ServerProtocol(max_size=None)
    client.send_request(client.connect())
    server.receive_data(b"".join(client.data_to_send()))
    (request,) = server.events_received()
    assert isinstance(request, Request)
    server.send_response(server.accept(request))
    client.receive_data(b"".join(server.data_to_send()))
    client.events_received()
    return client, server


def test_its_frames_are_what_websockets_reads() -> None:
    load = load_benchmark("capacity_load")
    client, server = _open_pair()
    rng = random.Random(7)
    for n in SIZES:
        text = bytes(rng.randrange(32, 127) for _ in range(n))
        server.receive_data(load.frame(load.TEXT, text, rng.randbytes(4)))  # a caller's
        client.receive_data(load.frame(load.TEXT, text))  # the agent's
        for proto in (server, client):
            (event,) = proto.events_received()
            assert isinstance(event, Frame) and event.opcode is Opcode.TEXT, n
            assert event.data == text and event.fin, n
    # A client masks (RFC 6455 5.3), a server does not.
    assert load.frame(load.TEXT, b"x", b"abcd")[1] & 0x80 and not (
        load.frame(load.TEXT, b"x")[1] & 0x80
    )


def test_it_reads_what_websockets_writes_however_the_reads_are_cut() -> None:
    load = load_benchmark("capacity_load")
    client, server = _open_pair()
    rng = random.Random(11)
    sent: list[tuple[int, bytes]] = []
    for n in SIZES:
        text = bytes(rng.randrange(32, 127) for _ in range(n)).decode()
        client.send_text(text.encode())
        server.send_text(text.encode())
        sent.append((load.TEXT, text.encode()))
    client.send_ping(b"p")
    server.send_ping(b"p")
    sent.append((load.PING, b"p"))
    for wire in (b"".join(client.data_to_send()), b"".join(server.data_to_send())):
        got: list[tuple[int, bytes]] = []
        rest = b""
        at = 0
        while at < len(wire):
            step = rng.choice((1, 2, 3, 7, 100, 5000))
            frames, rest = load.cut_frames(rest + wire[at : at + step])
            got += frames
            at += step
        assert rest == b"" and got == sent


@pytest.mark.slow
@pytest.mark.parametrize("path", ["direct", "voxproxy"])
def test_its_calls_run_directly_and_through_voxproxy(path: str) -> None:
    capacity = load_benchmark("capacity")
    run = capacity.measure(path, 4, 0.5, 1.0)
    if run.refused and path == "voxproxy":
        # The proxy refused a caller as overloaded: on a machine busy with other work its
        # loop runs late, which is the benchmark's signal, not this test's subject (the
        # load's calls). Said out loud; a second run decides.
        print(f"voxproxy refused {run.refused} of 4 callers as overloaded; once more")
        run = capacity.measure(path, 4, 0.5, 1.0)
    assert run.errors == 0 and run.opened == 4 and run.refused == 0
    # Both ways, a message a 20 ms frame per call: about 4 x 2 x 50 in the second measured.
    assert 200 <= run.messages <= 600, run.messages
    assert run.shed == 0.0
