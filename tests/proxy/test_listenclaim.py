"""One proxy per port: the address claim, and the check that nothing else listens."""

from __future__ import annotations

import errno
import os
import socket

import pytest

from voxproxy.core.errors import VoxproxyError
from voxproxy.proxy.listenclaim import AddressClaim, AddressInUse, check_unserved, reserve_port


def _listener(host: str, port: int = 0, reuse_port: bool = True) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen()
    return sock


def test_an_address_is_claimed_once_and_the_refusal_names_the_holder() -> None:
    with reserve_port("127.0.0.1", 0) as reserved:
        port = reserved.getsockname()[1]
        claim = AddressClaim("127.0.0.1", port)
        try:
            with pytest.raises(AddressInUse) as info:
                AddressClaim("localhost", port)  # the same address, spelled otherwise
            other = AddressClaim("127.0.0.2", port)  # another address: its own claim
            other.close()
        finally:
            claim.close()
        AddressClaim("127.0.0.1", port).close()  # let go of: free again
    exc = info.value
    assert isinstance(exc, OSError) and isinstance(exc, VoxproxyError)
    assert exc.errno == errno.EADDRINUSE
    assert str(exc) == (
        f"127.0.0.1:{port} is already served by another voxproxy proxy (pid {os.getpid()}): "
        "not starting a second proxy there (choose another --listen port, or stop it)"
    )


def test_a_listener_sharing_the_port_or_overlapping_it_is_seen() -> None:
    with _listener("127.0.0.1") as shared:  # SO_REUSEPORT: the kernel would let us join
        port = shared.getsockname()[1]
        with reserve_port("127.0.0.1", port):  # ... indeed
            with pytest.raises(AddressInUse, match="by another process"):
                check_unserved("127.0.0.1", port)
    with _listener("0.0.0.0") as wildcard:
        with pytest.raises(AddressInUse):
            check_unserved("127.0.0.1", wildcard.getsockname()[1])


def test_what_is_not_a_listener_does_not_count() -> None:
    with reserve_port("127.0.0.1", 0) as reserved:  # our own reservation, never listening
        port = reserved.getsockname()[1]
        check_unserved("127.0.0.1", port)
        # A draining proxy: its listener closed, a call it accepted still open.
        listener = _listener("127.0.0.1", port)
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = listener.accept()
        listener.close()
        try:
            check_unserved("127.0.0.1", port)
        finally:
            client.close()
            accepted.close()
