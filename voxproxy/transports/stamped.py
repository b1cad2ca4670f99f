"""When a TCP connection's bytes reached the host: reads stamped by the kernel.

MEASUREMENT.md 2: an edge is timed at the moment its bytes reached the proxy's host, not
when the event loop got round to reading them. An asyncio (or uvloop) transport hands
its protocol the bytes in ``data_received`` and loses the kernel's receive time on the
way. :class:`StampedReader` reads the socket itself instead: it turns on
``SO_TIMESTAMPNS`` (socket(7)), pauses the transport's own reading for good (the
transport still writes, closes and reports the connection lost), and reads a ``dup`` of
the socket's descriptor with ``loop.add_reader`` and ``recvmsg``. Each read's control
message ``SCM_TIMESTAMPNS`` is the kernel's receive time of the data in it, however late
the loop ran: :attr:`StampedReader.rx_ns` holds it, on the monotonic clock, while the
protocol's ``data_received`` runs.

What a TCP read's stamp says. The kernel keeps one time per queued buffer, and merges
buffers that queue up behind each other into one that takes the latest time (on loopback
as on a network): the stamp is when the *last* bytes of the read arrived. A read holding
one message (a loop that keeps up) is exact. A read holding several (the loop ran late
while they queued) times its last byte exactly; the earlier bytes arrived after the
previous read that emptied the socket (:attr:`StampedReader.lo_ns`) and no later than
the stamp: the relay states that span for those messages (``relay.Relay._stamp``).

Where the platform or the connection gives no kernel stamp (not Linux, a TLS leg whose
bytes the TLS layer reads, a socket that refuses the option), :func:`attach` returns
None and the transport reads as before; the shell then stamps each read when the loop
ran it, and how late that may be is the loop's lag (``clock.LagMonitor``), which the
figures' uncertainty carries.

The kernel's stamp is on the wall clock (``CLOCK_REALTIME``); it is moved to the
monotonic clock by the two clocks' difference read at the same moment (as
``transports.webrtc.arrival`` does), so it is off only by what the wall clock was
stepped or slewed between the arrival and the read.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import sys
import time
from typing import Any, Protocol

SO_TIMESTAMPNS = 35  # asm-generic/socket.h (x86, arm): SO_TIMESTAMPNS_OLD, a timespec
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
_TIMESPEC = struct.Struct("@qq")
_ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0
READ_BYTES = 256 * 1024  # one read at most (asyncio's own transports read as much)
# A stamp further back than this is no arrival of the read in hand (a wall clock stepped
# since): the read time is taken instead.
MAX_AGE_NS = 10_000_000_000
SUPPORTED = sys.platform == "linux" and _ANCILLARY > 0


class Reading(Protocol):
    """What :class:`StampedReader` hands the bytes to (an asyncio protocol's part)."""

    def data_received(self, data: bytes) -> None: ...

    def eof_received(self) -> bool | None: ...


def kernel_time(ancillary: list[tuple[int, int, bytes]], wall_ns: int, mono_ns: int) -> int:
    """The kernel's receive time in a read's control messages, on the monotonic clock
    (``wall_ns`` and ``mono_ns``: both clocks read together just after the read), or 0
    when there is none (or it is not a recent one)."""
    for level, kind, value in ancillary:
        if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(value) >= 16:
            sec, nsec = _TIMESPEC.unpack_from(value)
            t = sec * 1_000_000_000 + nsec - (wall_ns - mono_ns)
            if t > mono_ns:
                return mono_ns  # (the two clocks were read a few ns apart)
            return t if t > mono_ns - MAX_AGE_NS else 0
    return 0


class StampedReader:
    """Reads a TCP transport's socket for its protocol, each read stamped on arrival.

    While it runs ``protocol.data_received(data)`` (:attr:`handing`): :attr:`rx_ns`
    is when the read's last bytes reached the host (monotonic ns; the read's own time
    when the kernel gave no stamp: :attr:`kernel` False), :attr:`read_ns` when the loop
    read them, :attr:`lo_ns` the earliest its first bytes may have arrived (the previous
    read that emptied the socket, or the reader's start), :attr:`drained` whether the
    read emptied the socket (so that its stamp is its last byte's) and
    :attr:`paused_since_lo` whether reading was paused since ``lo_ns``. The owner calls
    :meth:`pause_reading` and :meth:`resume_reading` instead of the transport's, and
    :meth:`close` when the connection is lost. At the peer's EOF the protocol's
    ``eof_received`` runs; unless it returns True the transport is closed, as asyncio's
    transports do. A read error aborts the transport (the protocol then hears
    ``connection_lost``).
    """

    __slots__ = (
        "_fd",
        "_loop",
        "_reading",
        "_sock",
        "drained",
        "handing",
        "kernel",
        "kernel_reads",
        "lo_ns",
        "paused_since_lo",
        "protocol",
        "read_ns",
        "reads",
        "rx_ns",
        "transport",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        transport: asyncio.BaseTransport,
        protocol: Reading,
        sock: socket.socket,
    ) -> None:
        self._loop = loop
        self.transport = transport
        self.protocol = protocol
        self._sock: socket.socket | None = sock
        self._fd = sock.fileno()
        self._reading = False
        now = time.monotonic_ns()
        self.rx_ns = now
        self.read_ns = now
        self.lo_ns = now
        self.kernel = False
        self.drained = True
        self.paused_since_lo = False
        self.handing = False  # the protocol's data_received runs with this read's stamps
        self.reads = 0  # reads with data
        self.kernel_reads = 0  # ... the kernel stamped

    @property
    def reading(self) -> bool:
        return self._reading

    def pause_reading(self) -> None:
        if self._reading:
            self._reading = False
            self.paused_since_lo = True
            self._loop.remove_reader(self._fd)

    def resume_reading(self) -> None:
        if not self._reading and self._sock is not None:
            self._reading = True
            self._loop.add_reader(self._fd, self._readable)

    def close(self) -> None:
        """Stop reading and let go of the descriptor (the transport's socket closes when
        both it and this copy are closed: call this when the connection is lost)."""
        sock, self._sock = self._sock, None
        if sock is None:
            return
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._fd)
        sock.close()

    def _readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        if self.transport.is_closing():
            self.pause_reading()  # (as asyncio's transport: no reading once closing)
            return
        before = time.monotonic_ns()
        try:
            data, ancillary, _flags, _addr = sock.recvmsg(READ_BYTES, _ANCILLARY)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            self.transport.abort()  # type: ignore[attr-defined]  # (connection_lost follows)
            return
        if not data:
            self.pause_reading()
            keep_open = self.protocol.eof_received()
            if not keep_open:
                self.transport.close()
            return
        wall = time.time_ns()
        mono = time.monotonic_ns()
        t = kernel_time(ancillary, wall, mono)
        self.reads += 1
        if t:
            self.rx_ns = t
            self.kernel = True
            self.kernel_reads += 1
        else:
            self.rx_ns = mono
            self.kernel = False
        self.read_ns = mono
        drained = len(data) < READ_BYTES
        self.drained = drained
        self.handing = True
        try:
            self.protocol.data_received(data)
        finally:
            self.handing = False
        if drained:
            self.lo_ns = before  # what comes next arrived after this read emptied the socket
            self.paused_since_lo = not self._reading


_KEEP: list[int] = []  # the descriptor of that socket (closed with the process)


def keep_stamping() -> None:
    """Keep the kernel stamping every packet it receives from now on, for the process's
    life: the kernel stamps packets only while some socket asks for stamps, and turns
    that on a moment after the first asks, so the first bytes of a connection accepted
    while no other socket asked would come unstamped. One idle UDP socket that asks
    keeps it on (call where connections are accepted, once or more)."""
    if SUPPORTED and not _KEEP:
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        except OSError:
            return
        _KEEP.append(sock.detach())


def attach(transport: asyncio.BaseTransport, protocol: Reading) -> StampedReader | None:
    """Read ``transport``'s socket for ``protocol`` with kernel receive stamps, from now
    on (call from ``connection_made``); None where that cannot be done (not Linux, not
    a plain TCP socket, a TLS transport): the transport then reads as before."""
    if not SUPPORTED or _old_uvloop(asyncio.get_running_loop()):
        return None
    if transport.get_extra_info("sslcontext") is not None:
        return None
    if transport.get_extra_info("ssl_object") is not None:
        return None
    raw: Any = transport.get_extra_info("socket")
    if raw is None:
        return None
    try:
        if raw.type != socket.SOCK_STREAM or raw.family not in (socket.AF_INET, socket.AF_INET6):
            return None
        fd = os.dup(raw.fileno())
    except (OSError, AttributeError, ValueError):
        return None
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        os.close(fd)
        return None
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        transport.pause_reading()  # type: ignore[attr-defined]
    except Exception:
        sock.close()
        return None
    # uvloop starts its transport reading right after connection_made: paused again on
    # the loop's next turn, before it polls (a read it made meanwhile comes through the
    # transport, unstamped: StampedReader.handing is False then).
    loop.call_soon(_keep_paused, transport)
    reader = StampedReader(loop, transport, protocol, sock)
    reader.resume_reading()
    return reader


UVLOOP_FLOOR = (0, 23)
"""uvloop releases before this one do not keep a transport's reading paused as this
module needs (the transport reads beside the reader: a late read comes unstamped, and a
peer's EOF does not end the connection; CHANGELOG.md): pyproject.toml asks for it, and
under an older one (installed regardless) the transport reads as before."""


def _old_uvloop(loop: asyncio.AbstractEventLoop) -> bool:
    if not type(loop).__module__.startswith("uvloop"):
        return False
    version = sys.modules["uvloop"].__version__
    try:
        return tuple(int(part) for part in version.split(".")[:2]) < UVLOOP_FLOOR
    except ValueError:  # a development version: taken as new enough
        return False


def _keep_paused(transport: Any) -> None:
    if not transport.is_closing():
        transport.pause_reading()
