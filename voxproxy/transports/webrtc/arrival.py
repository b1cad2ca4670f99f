"""When each datagram reached the host: the kernel's receive time of aiortc's UDP datagrams.

MEASUREMENT.md 2: an edge is timed when its bytes reached the proxy's host, not when
the event loop got round to reading them. aiortc reads its media through aioice:
each UDP socket is an asyncio datagram endpoint whose protocol
(``aioice.ice.StunProtocol``) is handed every datagram in ``datagram_received``,
right after the loop's one ``recvfrom`` of it (asyncio's and uvloop's transports
alike). On Linux the socket then answers ``SIOCGSTAMPNS`` (an ``ioctl``, see
socket(7)) with the kernel's receive time of the last datagram read from it,
which is that very datagram: a datagram read 200 ms late, because the loop was
busy, still says when it arrived. The first such ``ioctl`` on a socket turns the
kernel's receive timestamps on (it answers ``ENOENT`` then), so :func:`install`
asks once for each socket, after aiortc has gathered its candidates and before
any peer has them.

The stamp travels with the datagram: :func:`install` wraps each protocol's
``datagram_received`` to hand on a :class:`Datagram` (``bytes`` with its arrival
time), which aioice queues and aiortc's DTLS transport reads. The wrapped
``recvfrom`` of the ICE connection keeps the stamp of the datagram it just gave
out in the connection's :class:`Arrivals`: aiortc's DTLS transport handles one
datagram at a time, so the RTP packet or data channel message being handled came
in that datagram (:func:`arrival_of`). Nothing of aiortc or aioice is forked: two
methods are replaced on our own peers' instances.

Where there is no kernel stamp (not Linux, a TURN relay's unwrapped data, an
``ioctl`` that fails), the datagram is stamped when the loop read it, as before,
and counted as such: those stamps may be late by the loop's lag at the read, which
the figures' uncertainty states (``clock_lag``). The kernel stamp is on the wall
clock (``CLOCK_REALTIME``); it is moved to the monotonic clock by the two clocks'
difference read at the same moment, so it is off only by what the wall clock was
stepped or slewed between the arrival and the read (microseconds, save a step).
"""

from __future__ import annotations

import fcntl
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

SIOCGSTAMPNS = 0x8907  # linux/sockios.h: struct timespec of the last datagram read
_TIMESPEC = struct.Struct("@qq")
_ZERO = bytes(_TIMESPEC.size)
# A kernel stamp further back than this is not a datagram just read (a clock stepped
# since): the read time is taken instead.
MAX_AGE_NS = 10_000_000_000
_ATTR = "_voxproxy_arrivals"


class Datagram(bytes):
    """A datagram's bytes with its arrival: ``rx_ns`` (monotonic ns) and whether the
    kernel gave it (``kernel``) or it is the moment the loop read it."""

    rx_ns: int
    kernel: bool


class Arrivals:
    """The arrival stamps of one ICE connection's datagrams: the one handled now
    (``last_ns``, ``last_kernel``), and how many came with a kernel stamp or without.

    ``inline``, when set, is offered each datagram as it is read, with its stamp, before
    aioice sees it: True when it handled the datagram itself (:mod:`.rtpin`), which then
    goes no further."""

    __slots__ = ("fallback", "inline", "kernel", "last_kernel", "last_ns")

    def __init__(self) -> None:
        self.last_ns = 0
        self.last_kernel = False
        self.kernel = 0
        self.fallback = 0
        self.inline: Callable[[bytes, int, bool], bool] | None = None


def kernel_stamp_ns(fd: int) -> int | None:
    """The kernel's receive time of the last datagram read from ``fd`` (wall clock,
    ns), or None where the platform or the socket gives none."""
    try:
        raw = fcntl.ioctl(fd, SIOCGSTAMPNS, _ZERO)
    except OSError:
        return None
    sec, nsec = _TIMESPEC.unpack(raw)
    return int(sec) * 1_000_000_000 + int(nsec)


def stamp(fd: int | None) -> tuple[int, bool]:
    """When the datagram just read from ``fd`` arrived, on the monotonic clock, and
    whether the kernel said so (else: now, the read)."""
    now = time.monotonic_ns()
    if fd is not None:
        wall = kernel_stamp_ns(fd)
        if wall is not None:
            t = wall - (time.time_ns() - now)
            if now - MAX_AGE_NS < t <= now:
                return t, True
    return now, False


def _socket_fd(protocol: Any) -> int | None:
    if sys.platform != "linux":
        return None
    transport = getattr(protocol, "transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    try:
        return int(sock.fileno()) if sock is not None else None
    except Exception:
        return None


def _stamp_protocol(protocol: Any, arrivals: Arrivals | None = None) -> None:
    """Hand on each datagram ``protocol`` receives as a :class:`Datagram`, or to
    ``arrivals.inline`` where that takes it."""
    if getattr(protocol, _ATTR, False):
        return
    fd = _socket_fd(protocol)
    if fd is not None:
        kernel_stamp_ns(fd)  # the first ask turns the socket's receive timestamps on
    received = protocol.datagram_received
    a = arrivals if arrivals is not None else Arrivals()

    def datagram_received(data: bytes, addr: Any) -> None:
        t, kernel = stamp(fd)
        inline = a.inline
        if inline is not None and inline(data, t, kernel):
            if kernel:
                a.kernel += 1
            else:
                a.fallback += 1
            return
        d = Datagram(data)
        d.rx_ns = t
        d.kernel = kernel
        received(d, addr)

    protocol.datagram_received = datagram_received
    setattr(protocol, _ATTR, True)


def _stamp_connection(conn: Any) -> Arrivals:
    """Keep, in ``conn``'s :class:`Arrivals`, the stamp of the datagram it gave out last."""
    arrivals: Arrivals | None = getattr(conn, _ATTR, None)
    if arrivals is None:
        arrivals = Arrivals()
        setattr(conn, _ATTR, arrivals)
        recvfrom = conn.recvfrom
        a = arrivals

        async def stamped_recvfrom() -> tuple[bytes, int]:
            data, component = await recvfrom()
            t = getattr(data, "rx_ns", None)
            if t is None:
                a.last_ns, a.last_kernel = time.monotonic_ns(), False
            else:
                a.last_ns, a.last_kernel = t, data.kernel
            if a.last_kernel:
                a.kernel += 1
            else:
                a.fallback += 1
            return data, component

        conn.recvfrom = stamped_recvfrom
    for protocol in list(getattr(conn, "_protocols", ())):
        _stamp_protocol(protocol, arrivals)
    return arrivals


def _ice_connections(pc: Any) -> list[Any]:
    """The aioice connections under a peer connection's transports (audio and SCTP)."""
    dtls = [t.receiver.transport for t in pc.getTransceivers()]
    if pc.sctp is not None:
        dtls.append(pc.sctp.transport)
    conns: list[Any] = []
    for d in dtls:
        conn = getattr(getattr(d, "transport", None), "_connection", None)
        if conn is not None and all(conn is not c for c in conns):
            conns.append(conn)
    return conns


def install(pc: Any) -> list[Arrivals]:
    """Stamp every datagram of ``pc`` with its arrival (call once its candidates are
    gathered, i.e. after ``setLocalDescription``; again is harmless)."""
    return [_stamp_connection(conn) for conn in _ice_connections(pc)]


def arrivals_of(dtls_transport: Any) -> Arrivals | None:
    """The :class:`Arrivals` of the ICE connection under ``dtls_transport``, if stamped."""
    conn = getattr(getattr(dtls_transport, "transport", None), "_connection", None)
    return getattr(conn, _ATTR, None)


def arrival_of(dtls_transport: Any) -> tuple[int, bool]:
    """The arrival of the datagram ``dtls_transport`` is handling now (monotonic ns) and
    whether the kernel stamped it; now, unstamped, where :func:`install` did not reach."""
    conn = getattr(getattr(dtls_transport, "transport", None), "_connection", None)
    arrivals: Arrivals | None = getattr(conn, _ATTR, None)
    if arrivals is None or not arrivals.last_ns:
        return time.monotonic_ns(), False
    return arrivals.last_ns, arrivals.last_kernel
