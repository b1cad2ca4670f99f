"""ICE for every peer connection voxproxy makes (``voxproxy/transports/webrtc/ice.py``):
host candidates on exactly the addresses chosen (and aioice's own choice back), no
STUN/TURN server unless named, the count of open peer connections, and aioice's
per-candidate lines (callers' addresses) kept out of the log."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import aioice.ice
import pytest
from aiortc import RTCPeerConnection
from aiortc.rtcconfiguration import RTCBundlePolicy

from voxproxy.transports.webrtc import ice


@pytest.fixture
def host_addresses() -> Iterator[None]:
    """Whatever choice the process had (tests choose loopback) is put back after."""
    before = ice._host_addresses
    yield
    ice.use_host_addresses(before)


@pytest.mark.usefixtures("host_addresses")
def test_host_candidates_come_from_exactly_the_chosen_addresses_by_family() -> None:
    ice.use_host_addresses(["127.0.0.1", "::1", "10.0.0.7"])
    gather = aioice.ice.get_host_addresses
    assert gather(use_ipv4=True, use_ipv6=False) == ["127.0.0.1", "10.0.0.7"]
    assert gather(use_ipv4=False, use_ipv6=True) == ["::1"]
    assert gather(use_ipv4=True, use_ipv6=True) == ["127.0.0.1", "::1", "10.0.0.7"]
    ice.use_host_addresses([])
    assert aioice.ice.get_host_addresses(use_ipv4=True, use_ipv6=True) == []


@pytest.mark.usefixtures("host_addresses")
def test_none_gives_aioice_its_own_choice_back() -> None:
    ice.use_host_addresses(["127.0.0.1"])
    ice.use_host_addresses(None)
    assert aioice.ice.get_host_addresses is ice._default_host_addresses
    assert ice._host_addresses is None


def test_no_ice_server_unless_named_and_one_bundled_transport() -> None:
    bare = ice.rtc_configuration()
    assert bare.iceServers == [] and bare.bundlePolicy == RTCBundlePolicy.MAX_BUNDLE
    named = ice.rtc_configuration(["stun:127.0.0.1:3478", "turn:127.0.0.1:3479"])
    assert [s.urls for s in named.iceServers] == ["stun:127.0.0.1:3478", "turn:127.0.0.1:3479"]


async def test_open_peer_connections_counts_the_package_s_until_closed() -> None:
    before = ice.open_peer_connections()
    pcs = [RTCPeerConnection(ice.rtc_configuration()) for _ in range(2)]
    stranger = RTCPeerConnection()  # not the package's: not counted
    try:
        for pc in pcs:
            ice.LIVE_PEERS.add(pc)
        assert ice.open_peer_connections() == before + 2
        await pcs[0].close()
        assert ice.open_peer_connections() == before + 1
    finally:
        for pc in (*pcs, stranger):
            await pc.close()
    assert ice.open_peer_connections() == before


def test_aioice_says_nothing_below_a_warning() -> None:
    assert logging.getLogger("aioice").getEffectiveLevel() == logging.WARNING
