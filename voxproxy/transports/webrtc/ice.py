"""ICE for every peer connection voxproxy makes: an explicit configuration (no STUN
server unless named), the process-wide choice of host addresses (a monkeypatch of
aioice), and the count of open peer connections.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence

import aioice.ice
from aiortc import (
    RTCConfiguration,
    RTCIceServer,
    RTCPeerConnection,
)
from aiortc.rtcconfiguration import RTCBundlePolicy

# aioice logs every candidate pair, with the caller's IP address and port, at INFO: a
# caller's address is personal data, so its INFO lines are off (warnings still show).
logging.getLogger("aioice").setLevel(logging.WARNING)


_default_host_addresses = aioice.ice.get_host_addresses


_host_addresses: tuple[str, ...] | None = None


def use_host_addresses(addresses: Sequence[str] | None) -> None:
    """Gather ICE host candidates on exactly ``addresses`` (None: aioice's default).

    aioice (0.9 to 0.13) reads ``aioice.ice.get_host_addresses`` at gathering
    time and leaves 127.0.0.1 out; this replaces that function for the whole
    process. Tests and browser runs inside a private network namespace pass
    ``["127.0.0.1"]`` so that no packet leaves loopback.
    """
    global _host_addresses
    _host_addresses = tuple(addresses) if addresses is not None else None
    if _host_addresses is None:
        aioice.ice.get_host_addresses = _default_host_addresses
        return
    chosen = list(_host_addresses)

    def chosen_addresses(use_ipv4: bool, use_ipv6: bool) -> list[str]:
        return [a for a in chosen if (":" in a and use_ipv6) or (":" not in a and use_ipv4)]

    aioice.ice.get_host_addresses = chosen_addresses


def rtc_configuration(ice_servers: Sequence[str] = ()) -> RTCConfiguration:
    """An explicit configuration: no STUN/TURN server unless named, one bundled transport."""
    return RTCConfiguration(
        iceServers=[RTCIceServer(urls=u) for u in ice_servers],
        bundlePolicy=RTCBundlePolicy.MAX_BUNDLE,
    )


LIVE_PEERS: weakref.WeakSet[RTCPeerConnection] = weakref.WeakSet()
"""The peer connections this package made (any role), while they live."""


def open_peer_connections() -> int:
    """Peer connections made by this module (any role) that are not closed yet."""
    return sum(1 for pc in list(LIVE_PEERS) if pc.connectionState != "closed")
