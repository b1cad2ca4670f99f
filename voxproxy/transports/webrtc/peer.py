"""One ``RTCPeerConnection`` with a single audio transceiver and any data channels,
and the checks an SDP offer must pass.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence

from aiortc import (
    RTCDataChannel,
    RTCPeerConnection,
    RTCRtpTransceiver,
    RTCSessionDescription,
)
from aiortc.codecs import get_capabilities
from aiortc.sdp import SessionDescription

from voxproxy.core.events import Pcm
from voxproxy.core.timebase import NS_PER_S
from voxproxy.transports.webrtc.arrival import Arrivals, arrivals_of, install
from voxproxy.transports.webrtc.codecs import AudioEncoder, CodecInfo, RtpIn, frame_ticks
from voxproxy.transports.webrtc.ice import LIVE_PEERS, rtc_configuration
from voxproxy.transports.webrtc.media import Channel, OutboundTrack, tap_rtp, watch_reports
from voxproxy.transports.webrtc.rtpin import InlineRtp
from voxproxy.transports.webrtc.rtpout import DirectRtp


class BadSdp(ValueError):
    """An SDP that cannot be used, with the reason to tell the peer."""


def check_offer(sdp: str) -> SessionDescription:
    """Parse an offer and insist on one audio m-line (raises :class:`BadSdp`)."""
    if not sdp.strip():
        raise BadSdp("empty SDP offer")
    try:
        parsed = SessionDescription.parse(sdp)
    except Exception as exc:
        raise BadSdp(f"malformed SDP offer: {exc or type(exc).__name__}") from None
    kinds = [m.kind for m in parsed.media]
    if not parsed.media:
        raise BadSdp("malformed SDP offer: no media section")
    if "audio" not in kinds:
        raise BadSdp(f"the offer has no audio m-line (media: {', '.join(kinds)})")
    for m in parsed.media:
        if m.kind == "audio" and m.port != 0:
            if m.ice is None or not m.ice.usernameFragment or not m.ice.password:
                raise BadSdp("malformed SDP offer: the audio m-line has no ICE credentials")
            if not m.dtls or not m.dtls.fingerprints:
                raise BadSdp("malformed SDP offer: the audio m-line has no DTLS fingerprint")
    return parsed


class AudioPeer:
    """One ``RTCPeerConnection`` with a single audio transceiver and any data channels.

    Incoming RTP goes to :attr:`on_rtp` on arrival (:func:`tap_rtp`); outgoing
    audio is pushed as encoded payloads with :meth:`send_payload` (or as PCM with
    :meth:`send_pcm`, encoded here for the negotiated codec).
    """

    def __init__(
        self,
        *,
        ice_servers: Sequence[str] = (),
        codecs: Sequence[str] | None = None,
        name: str = "peer",
        pace_ms: float = 0.0,
        direct_send: bool = False,
    ) -> None:
        """``pace_ms``: packets pushed with their arrival time leave at that time plus this
        (:class:`OutboundTrack`; a relay's legs). ``direct_send``: without pacing, what
        :meth:`send_payload` is given is written to the socket at once
        (:class:`.rtpout.DirectRtp`; a relay's legs)."""
        self.name = name
        self.pc = RTCPeerConnection(rtc_configuration(ice_servers))
        LIVE_PEERS.add(self.pc)
        self.track = OutboundTrack(round(pace_ms * 1_000_000))
        self._direct_send = direct_send and not self.track.pace_ns
        self._send_codec: tuple[object, CodecInfo] | None = None  # (aiortc's, ours)
        self.codec_prefs = tuple(c.lower() for c in codecs) if codecs else None
        self.transceiver: RTCRtpTransceiver | None = None
        self.on_rtp: Callable[[RtpIn], None] | None = None
        self.on_channel: Callable[[Channel], None] | None = None
        self.on_state: Callable[[str], None] | None = None
        # What the far end reports of our stream: (arrival, jitter ms, round trip ms).
        self.on_report: Callable[[int, float, float | None], None] | None = None
        self.channels: list[Channel] = []
        self.connected_ns: int | None = None
        self.state = "new"
        self.offered_data = False
        # Arrival stamps of our ICE connections' datagrams (kernel or read time), once
        # our candidates are gathered (arrival.install).
        self.arrivals: list[Arrivals] = []
        # Our SRTP packets handled as their datagrams are read (rtpin.InlineRtp).
        self.inline: InlineRtp | None = None
        self._encoder: AudioEncoder | None = None
        self._send_pts = 0
        self._pts_origin_ns: int | None = None
        self.pc.on("connectionstatechange", self._state_changed)
        self.pc.on("datachannel", self._remote_channel)

    # -- negotiation ----------------------------------------------------------------------

    def _prefer(self, transceiver: RTCRtpTransceiver) -> None:
        if not self.codec_prefs:
            return
        caps = get_capabilities("audio").codecs
        chosen = [
            c for name in self.codec_prefs for c in caps if c.mimeType.lower() == f"audio/{name}"
        ]
        if chosen:
            transceiver.setCodecPreferences(chosen)

    def _attach(self, transceiver: RTCRtpTransceiver) -> None:
        self.transceiver = transceiver
        self._deliver = tap_rtp(transceiver, self._rtp)
        watch_reports(transceiver, self._report)
        if self._direct_send:
            self.track.direct = DirectRtp(transceiver.sender)

    def _install(self) -> None:
        """Stamp our datagrams with their arrival, and handle our RTP as it is read."""
        self.arrivals = install(self.pc)
        t = self.transceiver
        if t is not None and self.inline is None:
            arrivals = arrivals_of(t.receiver.transport)
            if arrivals is not None:
                self.inline = arrivals.inline = InlineRtp(t.receiver, self._deliver)

    async def create_offer(
        self, *, direction: str = "sendrecv", data: bool = False, channels: Sequence[str] = ()
    ) -> str:
        """Our offer (complete: aiortc gathers all candidates first)."""
        transceiver = self._ensure_transceiver()
        transceiver.direction = direction
        for label in channels:
            self.open_channel(label)
        if data and not channels:
            # An m=application section without opening a channel yet: the labels are only
            # known once the other leg's channels open. aiortc creates the SCTP transport
            # lazily in createDataChannel; this is that step alone.
            self.pc._RTCPeerConnection__createSctpTransport()  # type: ignore[attr-defined]
        self.offered_data = data or bool(channels)
        await self.pc.setLocalDescription(await self.pc.createOffer())
        self._install()
        return str(self.pc.localDescription.sdp)

    def _ensure_transceiver(self) -> RTCRtpTransceiver:
        """Our audio transceiver, made before any data channel so that both share one
        bundled transport (aiortc bundles SCTP onto the first transceiver's)."""
        if self.transceiver is None:
            transceiver = self.pc.addTransceiver(self.track, direction="sendrecv")
            self._prefer(transceiver)
            self._attach(transceiver)
        assert self.transceiver is not None
        return self.transceiver

    async def accept_answer(self, sdp: str) -> None:
        try:
            await self.pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="answer"))
        except Exception as exc:
            raise BadSdp(f"unusable SDP answer: {exc or type(exc).__name__}") from None

    def _common_codec_check(self, parsed: SessionDescription) -> None:
        """Refuse an offer none of whose audio codecs this peer takes, naming both sides'
        (aiortc's own refusal of it says only that the description failed)."""
        ours = {c.mimeType.lower(): c.mimeType for c in get_capabilities("audio").codecs}
        if self.codec_prefs:
            wanted = {f"audio/{name}" for name in self.codec_prefs}
            ours = {k: v for k, v in ours.items() if k in wanted}
        offered = [
            c for m in parsed.media if m.kind == "audio" and m.port != 0 for c in m.rtp.codecs
        ]
        if offered and not any(c.mimeType.lower() in ours for c in offered):
            names = sorted({f"{c.mimeType.split('/')[-1]}/{c.clockRate}" for c in offered})
            takes = sorted(name.split("/")[-1] for name in ours.values())
            raise BadSdp(
                f"the offer has no audio codec in common with this peer (offered: "
                f"{', '.join(names)}; this peer takes: {', '.join(takes)})"
            )

    async def apply_offer(self, offer_sdp: str) -> None:
        """First half of answering: check and apply the offer (raises :class:`BadSdp`)."""
        parsed = check_offer(offer_sdp)
        self._common_codec_check(parsed)
        self.offered_data = any(m.kind == "application" for m in parsed.media)
        # Our transceiver exists first, with its codec preferences: aiortc's
        # setRemoteDescription takes an unassociated transceiver of the same kind for the
        # offer's audio and filters the common codecs by its preferences there and then.
        transceiver = self._ensure_transceiver()
        try:
            await self.pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
        except Exception as exc:
            raise BadSdp(f"unusable SDP offer: {exc or type(exc).__name__}") from None
        if transceiver.mid is None or not transceiver._codecs:
            raise BadSdp("the offer has no audio codec in common with this peer")

    async def finish_answer(self) -> str:
        """Second half: create and apply our answer (raises :class:`BadSdp`)."""
        try:
            await self.pc.setLocalDescription(await self.pc.createAnswer())
        except Exception as exc:
            raise BadSdp(f"cannot answer this offer: {exc or type(exc).__name__}") from None
        self._install()
        return str(self.pc.localDescription.sdp)

    async def answer(self, offer_sdp: str) -> str:
        """Answer an offer (validated with :func:`check_offer`); raises :class:`BadSdp`."""
        await self.apply_offer(offer_sdp)
        return await self.finish_answer()

    @staticmethod
    def offer_direction(offer_sdp: str) -> str:
        """The direction of the first audio m-line of an offer, from the offerer's side."""
        parsed = SessionDescription.parse(offer_sdp)
        for m in parsed.media:
            if m.kind == "audio":
                return m.direction or "sendrecv"
        return "inactive"

    # -- media ----------------------------------------------------------------------------

    @property
    def send_codec(self) -> CodecInfo | None:
        """The codec this peer sends with (aiortc sends with the first one negotiated)."""
        t = self.transceiver
        if t is None or not t._codecs:
            return None
        first = t._codecs[0]
        cached = self._send_codec
        if cached is None or cached[0] is not first:
            cached = self._send_codec = (first, CodecInfo.of(first))
        return cached[1]

    def send_payload(self, payload: bytes, pts: int, codec: CodecInfo, t_in_ns: int = 0) -> None:
        """Send one payload of ``codec`` (the send codec), its RTP timestamp ``pts`` in
        the codec's clock, that arrived at ``t_in_ns`` (0: our own audio)."""
        self.track.push(payload, pts, codec.time_base, t_in_ns, codec.payload_type)

    def _next_pts(self, codec: CodecInfo) -> int:
        """The RTP timestamp of the next 20 ms we send: contiguous while we send without
        pause, and moved on by the pause when we paused (so the far end hears the gap)."""
        now = time.monotonic_ns()
        if self._pts_origin_ns is None:
            self._pts_origin_ns = now
        wall = (now - self._pts_origin_ns) * codec.clock_rate // NS_PER_S
        ticks = frame_ticks(codec)
        if wall > self._send_pts + 2 * ticks:
            self._send_pts = wall - wall % ticks
        pts = self._send_pts
        self._send_pts += ticks
        return pts

    def send_encoded(self, payload: bytes) -> bool:
        """Send one 20 ms payload already encoded for :attr:`send_codec`."""
        codec = self.send_codec
        if codec is None:
            return False
        self.send_payload(payload, self._next_pts(codec), codec)
        return True

    def encoder(self) -> AudioEncoder | None:
        """An encoder for the negotiated send codec (None before negotiation)."""
        codec = self.send_codec
        if codec is None:
            return None
        if self._encoder is None or self._encoder.codec != codec:
            self._encoder = AudioEncoder(codec)
        return self._encoder

    def send_pcm(self, pcm: Pcm, sample_rate_hz: int) -> list[bytes]:
        """Encode and send; returns the payloads sent (none before negotiation).

        Send whole 20 ms frames: the encoder keeps a partial frame until the next
        call, and every later packet would then lag by it."""
        enc = self.encoder()
        if enc is None:
            return []
        payloads = enc.encode(pcm, sample_rate_hz)
        for p in payloads:
            self.send_payload(p, self._next_pts(enc.codec), enc.codec)
        return payloads

    def _rtp(self, packet: RtpIn) -> None:
        if self.on_rtp is not None:
            self.on_rtp(packet)

    def _report(self, t_ns: int, jitter_ms: float, rtt_ms: float | None) -> None:
        if self.on_report is not None:
            self.on_report(t_ns, jitter_ms, rtt_ms)

    # -- data channels --------------------------------------------------------------------

    def open_channel(
        self,
        label: str,
        *,
        ordered: bool = True,
        max_retransmits: int | None = None,
        max_packet_lifetime: int | None = None,
        protocol: str = "",
    ) -> Channel:
        if self.pc.remoteDescription is None and self.pc.localDescription is None:
            self._ensure_transceiver()  # an offerer: audio first, then the channels
        dc = self.pc.createDataChannel(
            label,
            ordered=ordered,
            maxRetransmits=max_retransmits,
            maxPacketLifeTime=max_packet_lifetime,
            protocol=protocol,
        )
        ch = Channel(dc)
        self.channels.append(ch)
        return ch

    def _remote_channel(self, dc: RTCDataChannel) -> None:
        ch = Channel(dc)
        self.channels.append(ch)
        if self.on_channel is not None:
            self.on_channel(ch)

    # -- life -----------------------------------------------------------------------------

    def _state_changed(self) -> None:
        state = str(self.pc.connectionState)
        self.state = state
        if state == "connected" and self.connected_ns is None:
            self.connected_ns = time.monotonic_ns()
        if self.on_state is not None:
            self.on_state(state)

    @property
    def closed(self) -> bool:
        return bool(self.pc.connectionState == "closed")

    async def close(self) -> None:
        self.on_rtp = None
        self.on_report = None
        self.on_channel = None
        self.track.stop()
        with contextlib.suppress(Exception):
            await self.pc.close()
