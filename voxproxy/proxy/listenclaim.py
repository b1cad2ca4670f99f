"""One proxy per port: the checks made before a proxy takes its listen address.

The workers of one ``voxproxy proxy --workers N`` share their port with
``SO_REUSEPORT``, and the kernel lets any process of the same user join such a port:
a second proxy started on it by mistake would start silently and take a share of the
callers. So before the parent reserves the port for its workers it:

1. **claims the address** (:class:`AddressClaim`): binds a Unix socket in the abstract
   namespace named after the address (``voxproxy/listen/127.0.0.1/8765``). Two binds
   of one name fail, atomically; the name belongs to the network namespace, as the
   port does; it needs no file and the kernel drops it when its holder dies, however
   it dies. The holder's pid is read from a connection to it (``SO_PEERCRED``) for the
   message (Linux only: elsewhere, check 3 alone). The parent lets go of the claim
   when it starts to drain, so that a successor may start while the calls in
   progress finish.
2. **reserves the port** (:func:`reserve_port`): a socket bound with ``SO_REUSEPORT``
   that never listens, so that the port is known (also when asked for 0) and a
   process holding it without ``SO_REUSEPORT`` fails the start here;
3. **checks nothing else listens there** (:func:`check_unserved`): a socket bound
   *without* ``SO_REUSEPORT`` to the address, then closed. It fails when any socket
   listens on the address or one that overlaps it (``0.0.0.0`` and ``127.0.0.1``),
   with ``SO_REUSEPORT`` or not: a proxy of another version, or one started before
   the claim existed. It is bound with ``SO_REUSEADDR``, as listeners are, so that
   connections of an earlier run still in ``TIME_WAIT``, the reserved socket above
   and the connections of a proxy that is draining (its listeners closed) do not
   count.

A single-process proxy (``--workers 1``) listens without ``SO_REUSEPORT``, so the
kernel refuses a second listener itself; :mod:`voxproxy.proxy.server` makes check 3
before it opens the receipts file and its journal, so that a proxy that cannot
listen touches neither (it would have written ``proxy_crashed`` receipts for the
calls the running proxy has in progress).

Checks 1 and 3 fail with :class:`AddressInUse` (an ``OSError``, ``EADDRINUSE``), whose
one line names the address and who serves it: the CLI prints it and exits 2.
"""

from __future__ import annotations

import errno
import socket
import struct
import sys
from typing import Any

from voxproxy.core.errors import VoxproxyError

CLAIM_PREFIX = "voxproxy/listen"


def _address(host: str, port: int) -> tuple[int, Any]:
    """The family and socket address ``host:port`` binds to (as a listener's)."""
    info = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    return info[0][0], info[0][4]


class AddressInUse(VoxproxyError, OSError):
    """Another proxy (or process) serves the address: one line, what to do (the CLI
    prints it and exits 2); an ``OSError`` with ``EADDRINUSE`` to Python callers."""


def _in_use(address: Any, who: str) -> AddressInUse:
    host, port = address[0], address[1]
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    exc = AddressInUse(
        f"{where} is already served by {who}: not starting a second proxy there "
        "(choose another --listen port, or stop it)"
    )
    exc.errno = errno.EADDRINUSE
    return exc


def reserve_port(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` with SO_REUSEPORT that never listens: it holds the
    port (the one picked, for port 0) for the workers' listeners to share."""
    family, address = _address(host, port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        # As asyncio words it for a single process's listener.
        where = f"error while attempting to bind on address {address[:2]!r}"
        raise OSError(exc.errno, f"{where}: {(exc.strerror or '').lower()}") from None
    return sock


def check_unserved(host: str, port: int) -> None:
    """Raise ``EADDRINUSE`` when a socket listens on ``host:port`` (or on an address that
    overlaps it), whether it shares the port (SO_REUSEPORT) or not."""
    family, address = _address(host, port)
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise _in_use(address, "another process") from None


class AddressClaim:
    """This process's claim to serve ``host:port`` (see the module's docstring); another
    claim of the same address, by any process, raises ``EADDRINUSE`` naming its holder."""

    def __init__(self, host: str, port: int) -> None:
        _family, address = _address(host, port)
        self.name = f"\0{CLAIM_PREFIX}/{address[0]}/{address[1]}"
        self._sock: socket.socket | None = None
        if not sys.platform.startswith("linux"):
            return  # no abstract namespace: check_unserved alone keeps the port
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.bind(self.name)
            self._sock.listen(8)  # only for the holder's pid: nothing is ever accepted
        except OSError as exc:
            self.close()
            if exc.errno != errno.EADDRINUSE:
                raise
            holder = _holder(self.name)
            pid = f" (pid {holder})" if holder is not None else ""
            raise _in_use(address, f"another voxproxy proxy{pid}") from None

    def fileno(self) -> int:
        """The claim's descriptor (a forked worker closes its copy: the claim is the
        parent's)."""
        return self._sock.fileno() if self._sock is not None else -1

    def close(self) -> None:
        """Let go of the address (idempotent)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _holder(name: str) -> int | None:
    """The pid of the process that holds the claim ``name``, or None when it cannot be
    told (gone meanwhile, its backlog full)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        try:
            sock.connect(name)
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        except OSError:
            return None
    pid: int = struct.unpack("3i", creds)[0]
    return pid
