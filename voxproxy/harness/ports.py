"""A free TCP port on loopback, for a server in another process that must be told its
port before it starts.

Racy by nature (bind to 0, read the port, close: another process may take it before
the server binds it), so it is for tests, benchmarks and the harness only; a server in
this process binds to port 0 itself and reads back what it got.
"""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listened on a moment ago."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
