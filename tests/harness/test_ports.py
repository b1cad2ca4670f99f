"""voxproxy.harness.ports: a TCP port on loopback that nothing listened on a moment ago."""

from __future__ import annotations

import socket

from voxproxy.harness.ports import free_port


def test_a_free_port_can_be_bound_on_loopback_right_after() -> None:
    port = free_port()
    assert 0 < port < 65536
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))  # raises if it were taken
        assert sock.getsockname()[1] == port


def test_a_port_being_listened_on_is_never_given() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        assert all(free_port("127.0.0.1") != taken for _ in range(20))
