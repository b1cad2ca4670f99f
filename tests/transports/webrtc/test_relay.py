"""The WebRTC relay over loopback: payloads unchanged, channels by label, bad input.

Every case ends with no peer connection left open, counted twice: by the
transport's own registry and by a census of live ``RTCPeerConnection`` objects.
"""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from support.groundtruth import NEVER_WITHHELD
from support.ports import refusing_port
from support.waiting import wait_until
from support.webrtckit import open_counts, webrtc_proxy

from voxproxy.clips import clip
from voxproxy.core.receipt import Receipt
from voxproxy.loadgen.caller import Say, Silence, WaitAgentEnd
from voxproxy.loadgen.webrtc import WebRtcCaller, WebRtcCallerConfig
from voxproxy.mockagent import MockAgentConfig
from voxproxy.mockagent.webrtc import WebRtcMockAgent
from voxproxy.simcall.webrtc import payload_key
from voxproxy.transports.webrtc import (
    OUT_QUEUE_PACKETS,
    AudioPeer,
    Channel,
    Offer,
    SignalingServer,
    add_trickled,
    post_offer,
)

pytestmark = pytest.mark.slow

SHORT = [Say(clip("caller_yes")), WaitAgentEnd(quiet_ms=300, start_timeout_ms=4000)]


async def _receipt(receipts: list[Receipt], n: int = 1) -> Receipt:
    await wait_until(lambda: len(receipts) >= n, 10.0, "a receipt")
    return receipts[n - 1]


async def test_payloads_pass_unchanged_and_channels_are_relayed_by_label() -> None:
    receipts: list[Receipt] = []
    before = open_counts()
    async with WebRtcMockAgent(MockAgentConfig(delay_ms=400)) as agent:
        async with webrtc_proxy(agent.url(), receipts) as proxy:
            caller = WebRtcCaller(
                WebRtcCallerConfig(
                    proxy.url(), channels=("oai-events", "rtvi"), channel_greeting="hello"
                ),
                SHORT,
            )
            rec = await caller.run_webrtc()
            receipt = await _receipt(receipts)
    assert rec.error is None, rec.error
    log = agent.calls[0]
    # Every payload of the answer reached the caller byte for byte (none re-encoded).
    keys = {c.key for c in log.chunks}
    assert keys and keys <= set(rec.arrivals)
    stats = proxy.relay_stats[0]
    assert stats.transcoded == (0, 0)
    assert stats.passthrough[0] > 20 and stats.passthrough[1] > 20
    # Both channels were opened towards the agent under their labels; the agent's echoes
    # came back on the same channels.
    assert sorted(log.channel_messages) == [("oai-events", "hello"), ("rtvi", "hello")]
    assert sorted(rec.channel_messages) == [("oai-events", "echo:hello"), ("rtvi", "echo:hello")]
    assert receipt.transport == "webrtc"
    assert receipt.terminal == "caller_closed"
    assert receipt.close.upstream_status == 201
    # The relay's own delay, a figure apart: every packet each way, stamped by the kernel.
    fwd = receipt.forwarding
    assert fwd is not None
    for d, n in (
        (fwd.caller_to_agent, stats.passthrough[0]),
        (fwd.agent_to_caller, stats.passthrough[1]),
    ):
        # (less the few a leg's queue may still hold, or have dropped, at the hang-up)
        assert d.arrival == "kernel" and n - OUT_QUEUE_PACKETS <= d.messages <= n
        assert d.p50_ms is not None and d.max_ms is not None and 0 <= d.p50_ms <= d.max_ms
    assert receipt.upstream_connect_ms is not None
    # The two channel messages on oai-events are not OpenAI events: counted as unknown.
    assert receipt.traffic.caller_to_agent_messages > 20
    assert [t.kind for t in receipt.turns] == ["response"]
    assert open_counts() == before


async def test_an_agent_channel_is_relayed_to_the_caller() -> None:
    """A channel the agent opens reaches the caller under its label, both ways."""
    peers: list[AudioPeer] = []
    got: list[str | bytes] = []

    class Session:
        def __init__(self, peer: AudioPeer) -> None:
            self.id = "s1"
            self.peer = peer

        async def hang_up(self) -> None:
            await self.peer.close()

        async def add_candidates(self, candidates: list[dict[str, object]]) -> None:
            await add_trickled(self.peer.pc, candidates)  # type: ignore[arg-type]

    async def open_session(offer: Offer) -> tuple[str, Session]:
        peer = AudioPeer(name="agent")
        peers.append(peer)
        answer = await peer.answer(offer.sdp)

        def connected(state: str) -> None:
            if state == "connected":
                ch = peer.open_channel("server-events")
                ch.on_message = lambda m, t: got.append(m)
                ch.send("from the agent")

        peer.on_state = connected
        return answer, Session(peer)

    server = SignalingServer(open_session)  # type: ignore[arg-type]
    await server.start()
    receipts: list[Receipt] = []
    try:
        async with webrtc_proxy(server.url(), receipts) as proxy:
            caller = AudioPeer(name="caller")
            caller_got: list[tuple[str, str | bytes]] = []

            def on_channel(ch: Channel) -> None:
                ch.on_message = lambda m, t: (caller_got.append((ch.label, m)), ch.send("ack"))

            caller.on_channel = on_channel
            caller.open_channel("chat")  # the proxy only offers SCTP to the agent if we do
            async with aiohttp.ClientSession() as http:
                answer = await post_offer(http, proxy.url(), "whip", await caller.create_offer())
                await caller.accept_answer(answer.sdp)
                await wait_until(lambda: bool(got), 10.0)
                assert answer.session_url is not None
                async with http.delete(answer.session_url) as resp:
                    assert resp.status == 200
            await caller.close()
            receipt = await _receipt(receipts)
    finally:
        for p in peers:
            await p.close()
        await server.stop()
    assert caller_got == [("server-events", "from the agent")]
    assert got == ["ack"]
    assert receipt.terminal == "caller_closed"
    assert receipt.close.initiator == "caller"


async def test_codecs_that_differ_are_transcoded() -> None:
    receipts: list[Receipt] = []
    async with WebRtcMockAgent(MockAgentConfig(delay_ms=400), codecs=("pcmu",)) as agent:
        # Every figure published (a busy machine's clock lag would withhold it): this
        # test is about the answer being measured through two codecs.
        proxied = webrtc_proxy(agent.url(), receipts, max_uncertainty_ms=NEVER_WITHHELD)
        async with proxied as proxy:
            rec = await WebRtcCaller(WebRtcCallerConfig(proxy.url()), SHORT).run_webrtc()
            receipt = await _receipt(receipts)
    assert rec.error is None, rec.error
    stats = proxy.relay_stats[0]
    assert stats.passthrough == (0, 0)
    assert stats.transcoded[0] > 20 and stats.transcoded[1] > 20
    # The answer was heard through two codecs (Opus -> PCMU at the agent, back to Opus).
    assert rec.agent_spurts
    assert [t.kind for t in receipt.turns] == ["response"]
    assert receipt.turns[0].ttfs_ms is not None


async def test_pipecat_signaling_on_both_legs() -> None:
    receipts: list[Receipt] = []
    async with WebRtcMockAgent(MockAgentConfig(delay_ms=400)) as agent:
        async with webrtc_proxy(agent.url("pipecat"), receipts, signaling="pipecat") as proxy:
            caller = WebRtcCaller(
                WebRtcCallerConfig(proxy.url("pipecat"), signaling="pipecat"), SHORT
            )
            rec = await caller.run_webrtc()
            receipt = await _receipt(receipts)
    assert rec.error is None, rec.error
    assert agent.calls[0].signaling == "pipecat"
    assert receipt.close.upstream_status == 200
    # No DELETE in Pipecat's signaling: the hang-up is the caller's peer connection closing.
    assert receipt.terminal == "caller_closed"
    assert [t.kind for t in receipt.turns] == ["response"]


# -- bad input ----------------------------------------------------------------------------


async def _post_raw(url: str, body: str, content_type: str = "application/sdp") -> tuple[int, str]:
    async with aiohttp.ClientSession() as http:
        async with http.post(url, data=body.encode(), headers={"Content-Type": content_type}) as r:
            return r.status, await r.text()


async def _bad_offer(body: str) -> tuple[int, str, Receipt]:
    """Offer ``body`` to a proxy: its status and text, and the call's receipt, which
    must say bad_offer; the agent is never bothered and nothing is left open."""
    receipts: list[Receipt] = []
    before = open_counts()
    async with WebRtcMockAgent() as agent:
        async with webrtc_proxy(agent.url(), receipts) as proxy:
            status, text = await _post_raw(proxy.url(), body)
            receipt = await _receipt(receipts)
    assert receipt.terminal == "bad_offer"
    assert agent.calls == []  # the agent was never bothered
    assert open_counts() == before
    return status, text, receipt


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("v=0\r\nthis is not sdp\r\n", "malformed SDP offer"),
        ("", "empty SDP offer"),
    ],
)
async def test_a_malformed_offer_is_a_400_with_a_receipt(body: str, reason: str) -> None:
    status, text, receipt = await _bad_offer(body)
    assert status == 400 and reason in text, text
    assert receipt.close.initiator == "caller"


async def test_an_offer_without_audio_is_a_400_with_a_receipt() -> None:
    peer = AudioPeer(name="data-only")
    peer.pc.createDataChannel("chat")
    await peer.pc.setLocalDescription(await peer.pc.createOffer())
    offer = peer.pc.localDescription.sdp
    await peer.close()
    status, text, _ = await _bad_offer(offer)
    assert status == 400 and "no audio m-line" in text, text


async def test_wrong_content_type_and_unknown_session() -> None:
    receipts: list[Receipt] = []
    async with WebRtcMockAgent() as agent:
        async with webrtc_proxy(agent.url(), receipts) as proxy:
            status, text = await _post_raw(proxy.url(), "v=0", "text/plain")
            assert status == 415 and "application/sdp" in text
            status, _ = await _post_raw(proxy.url("pipecat"), "not json", "application/json")
            assert status == 400
            async with aiohttp.ClientSession() as http:
                async with http.delete(proxy.url() + "/nope") as r:
                    assert r.status == 404
                async with http.patch(proxy.url() + "/nope") as r:
                    assert r.status == 405
    assert receipts == []  # nothing was offered, nothing to report


@pytest.mark.parametrize(
    ("case", "status", "terminal"),
    [
        ("refuses", 503, "upstream_refused"),
        ("unreachable", 502, "upstream_unreachable"),
        ("silent", 504, "upstream_timeout"),
    ],
)
async def test_an_agent_that_fails_is_an_http_error_with_a_receipt(
    case: str, status: int, terminal: str
) -> None:
    receipts: list[Receipt] = []
    before = open_counts()
    config = MockAgentConfig(refuse_status=503 if case == "refuses" else None)
    agent = WebRtcMockAgent(config, answer_delay_ms=3000 if case == "silent" else 0)
    await agent.start()
    caller = AudioPeer(name="caller")
    offer = await caller.create_offer()
    try:
        with refusing_port() as dead:  # nothing listens there, and nothing can start to
            url = agent.url() if case != "unreachable" else f"http://127.0.0.1:{dead}/whip"
            async with webrtc_proxy(url, receipts, signaling_timeout_s=1.0) as proxy:
                got, text = await _post_raw(proxy.url(), offer)
                receipt = await _receipt(receipts)
    finally:
        await caller.close()
        await agent.stop()
    assert got == status, text
    expected = {
        "refuses": "the agent refused the call: HTTP 503",
        "unreachable": "the agent is unreachable",
        "silent": "did not answer the offer in time",
    }[case]
    assert expected in text, text
    assert receipt.terminal == terminal
    if case == "refuses":
        assert receipt.close.upstream_status == 503
        assert receipt.close.initiator == "agent"
    assert receipt.upstream_connect_ms is None
    assert open_counts() == before


async def test_ice_that_never_connects_ends_the_call_with_a_receipt() -> None:
    """The caller takes its answer and vanishes before ICE: the proxy gives up in time."""
    receipts: list[Receipt] = []
    before = open_counts()
    async with WebRtcMockAgent(MockAgentConfig(delay_ms=400)) as agent:
        async with webrtc_proxy(agent.url(), receipts, ice_timeout_s=2.0) as proxy:
            caller = AudioPeer(name="caller")
            offer = await caller.create_offer()
            await caller.close()  # its sockets are gone: no ICE check will ever be answered
            async with aiohttp.ClientSession() as http:
                answer = await post_offer(http, proxy.url(), "whip", offer)
            assert answer.status == 201
            receipt = await _receipt(receipts)
            # The agent leg was closed too, and the agent told (WHIP DELETE).
            await wait_until(lambda: not agent.active, 5.0)
    assert receipt.terminal == "ice_failed"
    assert receipt.close.initiator == "caller"
    assert receipt.turns == []
    assert open_counts() == before


async def test_proxy_shutdown_ends_live_calls_with_receipts() -> None:
    receipts: list[Receipt] = []
    before = open_counts()
    async with WebRtcMockAgent(MockAgentConfig(delay_ms=400)) as agent:
        proxy_cm = webrtc_proxy(agent.url(), receipts)
        proxy = await proxy_cm.__aenter__()
        caller = WebRtcCaller(
            WebRtcCallerConfig(proxy.url()), [Say(clip("caller_yes")), Silence(5000)]
        )
        task = asyncio.create_task(caller.run_webrtc())
        await wait_until(lambda: proxy.active == 1 and bool(agent.active), 10.0)
        # Live: the caller's audio is reaching the agent through the proxy.
        await wait_until(lambda: agent.calls[0].caller_packets > 0, 10.0, "caller audio")
        await proxy_cm.__aexit__(None, None, None)
        receipt = await _receipt(receipts)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        if caller.peer is not None:
            await caller.peer.close()
    assert receipt.terminal == "proxy_shutdown"
    assert receipt.close.initiator == "proxy"
    assert open_counts() == before


def test_payload_keys_tell_payloads_apart() -> None:
    assert payload_key(b"a") != payload_key(b"b")
    assert len(payload_key(b"x" * 100)) == 12


async def test_cors_lets_a_page_on_another_origin_offer() -> None:
    receipts: list[Receipt] = []
    async with WebRtcMockAgent() as agent:
        async with webrtc_proxy(agent.url(), receipts) as proxy:
            origin = {"Origin": "http://127.0.0.1:9"}
            async with aiohttp.ClientSession() as http:
                async with http.options(proxy.url(), headers=origin) as r:
                    assert r.status == 204
                    assert r.headers["Access-Control-Allow-Origin"] == origin["Origin"]
                    assert "POST" in r.headers["Access-Control-Allow-Methods"]
                    assert "Content-Type" in r.headers["Access-Control-Allow-Headers"]
                headers = {**origin, "Content-Type": "application/sdp"}
                async with http.post(proxy.url(), data=b"v=0\r\n", headers=headers) as r:
                    assert r.status == 400
                    assert r.headers["Access-Control-Expose-Headers"] == "Location"
            await _receipt(receipts)


async def test_offers_over_max_calls_are_refused_with_503_before_any_agent_session() -> None:
    """``max_calls`` holds for WebRTC too: an offer over the cap gets 503 and Retry-After,
    and costs no peer connection, no offer to the agent and no receipt."""
    receipts: list[Receipt] = []
    before = open_counts()
    config = MockAgentConfig(refuse_status=503)
    # Holds the first call while five offers are refused: 4 s was not enough for them on a
    # busy machine (the hold ran out and the fifth was admitted).
    agent = WebRtcMockAgent(config, answer_delay_ms=8000)  # under signaling_timeout_s (10)
    await agent.start()
    caller = AudioPeer(name="caller")
    offer = await caller.create_offer()
    try:
        async with webrtc_proxy(agent.url(), receipts, max_calls=1) as proxy:
            first = asyncio.create_task(_post_raw(proxy.url(), offer))
            await wait_until(lambda: len(agent.calls) == 1, 5.0)
            peers = open_counts()
            refused = []
            for _ in range(5):
                async with aiohttp.ClientSession() as http:
                    async with http.post(
                        proxy.url(),
                        data=offer.encode(),
                        headers={"Content-Type": "application/sdp"},
                    ) as resp:
                        refused.append((resp.status, resp.headers.get("Retry-After")))
                assert open_counts() == peers  # no peer connection was made for it
            status, _ = await first
            await _receipt(receipts)
            assert proxy.server.admission.active == 0
            assert proxy.server.admission.refused == 5
    finally:
        await caller.close()
        await agent.stop()
    assert refused == [(503, "1")] * 5
    assert status == 503  # the first call: refused by the agent, as it was told to
    assert len(agent.calls) == 1  # the refused offers never reached the agent
    assert [r.terminal for r in receipts] == ["upstream_refused"]
    assert open_counts() == before
