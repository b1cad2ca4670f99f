"""Ports for tests, without luck.

A port found free by binding to 0 and closing the socket can be taken by anyone before
the test uses it. So tests let servers bind to port 0 themselves and read back what
they got, and a test that needs "nothing listens here" holds a socket that is bound
but never listens: the port stays reserved and every connection to it is refused.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def refusing_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A TCP port on ``host`` that refuses connections for as long as the block runs."""
    with socket.socket() as s:
        s.bind((host, 0))
        yield int(s.getsockname()[1])
