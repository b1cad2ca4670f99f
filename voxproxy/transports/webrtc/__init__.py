"""The WebRTC transport: voxproxy as a measuring media relay, on aiortc.

DTLS-SRTP keys are negotiated end to end, so a proxy that passed the caller's
SDP through untouched could read nothing. voxproxy therefore terminates each
leg (a back-to-back user agent): it answers the caller with its own
``RTCPeerConnection`` and opens a second one to the agent, which it offers with
the same signaling the caller used on it (it is the agent's WHIP or Pipecat
client). Everything here is the forwarding plane; measurement receives copies
through :class:`RelayObserver` and never holds a packet up.

Signaling, as served to callers and spoken to agents:

- **WHIP** (RFC 9725 section 4): ``POST`` of the SDP offer with
  ``Content-Type: application/sdp``; ``201 Created`` with the SDP answer and a
  ``Location`` header naming the session; ``DELETE`` on that URL ends the
  session (``200``). aiortc gathers every candidate before it answers (its
  ``setLocalDescription`` waits for ICE gathering), so there is no trickle: a
  ``PATCH`` is answered ``405`` as RFC 9725 section 4.3 asks of a session that
  supports neither trickle nor ICE restarts.
- **Pipecat SmallWebRTC** (pipecat ``runner/run.py``): ``POST /api/offer`` with
  JSON ``{sdp, type, pc_id?, restart_pc?, request_data?}``, answered with
  ``{sdp, type, pc_id}``; ``PATCH /api/offer`` with ``{pc_id, candidates}``
  trickles remote candidates. A hang-up is the peer connection closing.
  Reusing a live ``pc_id`` (renegotiation) is answered ``501``.
- The caller's offer is checked and applied first, but answered only once the
  agent has answered ours, so a refusal reaches the caller as an HTTP error
  (the agent's own 4xx/5xx, ``502`` unreachable, ``504`` silent) and a bad
  offer as ``400``/``415``; either way a receipt says what happened and both
  peer connections are closed. CORS is answered for pages on other origins.

Media (audio only; video m-lines are rejected by aiortc's answerer as any other
unsupported kind would be):

- aiortc's receiver holds every audio frame in ``JitterBuffer(capacity=16,
  prefetch=4)`` and only hands it to its decoder thread once four more frames
  have arrived: about 80 ms late at 20 ms packets. A relay cannot afford that,
  and a measurement that wants "audible time = arrival" (MEASUREMENT.md
  section 3) cannot use it. So each receiver is *tapped*: its
  ``_handle_rtp_packet`` (which aiortc's ``RTCDtlsTransport`` calls for every
  decrypted RTP packet) is replaced on the instance by :func:`.media.tap_rtp`, which
  stamps the packet with its datagram's arrival and hands the payload on at once.
  The stock path (jitter buffer, decoder thread) is bypassed entirely. Once DTLS
  is up, an SRTP packet does not even wait for aiortc's queue and task: it is
  unprotected, parsed and handed to the tap where its datagram is read
  (:mod:`.rtpin`, with aiortc's own SRTP session and router).
- The arrival is when the datagram reached the host: the kernel's receive time
  (``SIOCGSTAMPNS`` on the UDP socket right after the loop's read, Linux), not when
  the event loop got round to it (:mod:`.arrival`); data channel messages take their
  last datagram's. Where the kernel gives none, the read time, flagged
  (``RtpIn.kernel``).
- Where both legs send with the same codec, the payloads are forwarded as they
  came, with the RTP timestamps carried over: a relay's leg writes each as the
  packet aiortc's ``RTCRtpSender`` would, at once, in the step that received it
  (:mod:`.rtpout`; where that cannot be, its track returns pre-encoded
  ``av.Packet`` objects, which the sender packs without re-encoding). A copy is
  decoded for measurement only (:class:`MeasuredStream`; Opus straight to 16 kHz
  by libopus), scheduled after the send so that it never delays it. Where the
  codecs differ, the payload is decoded once and re-encoded for the other leg's
  codec, inline (aiortc's sender would run its encoder in a thread pool).
  ``benchmarks/webrtc.py`` measures both paths.
- aiortc falls back to Google's public STUN server when ``iceServers`` is None
  (``RTCIceGatherer.getDefaultIceServers``), so :func:`rtc_configuration` always
  passes an explicit list (empty by default). aioice gathers host candidates
  on every interface address except 127.0.0.1 and has no option to choose
  them; :func:`use_host_addresses` replaces its ``get_host_addresses`` for the
  process (tests and private network namespaces use 127.0.0.1 only).

Data channels are relayed by label, in both directions, messages unchanged: a
channel the caller opens is opened with the same label, ordering, reliability
and subprotocol towards the agent, and the other way round; messages sent
before the other side's channel is open are held (bounded) until it opens.

The package, one module a concern (each imports only those above it)::

    ice               ICE configuration, the host-address monkeypatch, open peer count
    arrival           kernel receive times of the ICE connections' datagrams
    rtpin             SRTP packets handled where their datagrams are read
    opus              libopus through ctypes (Opus straight to 16 kHz)
    codecs            negotiated codecs, RTP packets in, decoding for measurement, encoding
    rtpout            a relay leg's RTP written straight to the socket
    media             the outbound track, the RTP tap, data channels
    peer              AudioPeer (one RTCPeerConnection) and offer checks
    ends              how a call ended (EndCause, EndInfo)
    signaling_client  the agent's side: voxproxy as its WHIP or Pipecat client
    signaling_server  the callers' side: the WHIP and Pipecat HTTP server
    relay             WebRtcRelay (two peers back to back) and its server

Everything public is re-exported here: ``from voxproxy.transports.webrtc import X``.
"""

from __future__ import annotations

from voxproxy.transports.ends import EndCause
from voxproxy.transports.webrtc.codecs import (
    CARRY_MAX_NS,
    PAUSE_NS,
    AudioDecoder,
    AudioEncoder,
    CodecInfo,
    Decimator,
    MeasuredStream,
    RtpIn,
    default_codec,
    encode_clip,
    measurement_rate,
)
from voxproxy.transports.webrtc.ends import EndInfo
from voxproxy.transports.webrtc.ice import (
    open_peer_connections,
    rtc_configuration,
    use_host_addresses,
)
from voxproxy.transports.webrtc.media import (
    CHANNEL_BACKLOG,
    LATENCY_BIN_NS,
    LATENCY_BINS,
    MAX_PACE_MS,
    OUT_QUEUE_PACKETS,
    Channel,
    OutboundTrack,
)
from voxproxy.transports.webrtc.peer import AudioPeer, BadSdp, check_offer
from voxproxy.transports.webrtc.relay import (
    PACE_MS,
    RelayObserver,
    RelayObserverFactory,
    RelayStats,
    WebRtcRelay,
    WebRtcRelayConfig,
    WebRtcRelayServer,
)
from voxproxy.transports.webrtc.signaling_client import (
    PIPECAT_PATH,
    SIGNALINGS,
    WHIP_PATH,
    AgentAnswer,
    Signaling,
    SignalingError,
    hang_up,
    post_offer,
)
from voxproxy.transports.webrtc.signaling_server import (
    MAX_OFFER_BYTES,
    HttpError,
    Offer,
    OpenSession,
    Session,
    SignalingServer,
    add_trickled,
)

__all__ = [
    "CARRY_MAX_NS",
    "CHANNEL_BACKLOG",
    "LATENCY_BINS",
    "LATENCY_BIN_NS",
    "MAX_OFFER_BYTES",
    "MAX_PACE_MS",
    "OUT_QUEUE_PACKETS",
    "PACE_MS",
    "PAUSE_NS",
    "PIPECAT_PATH",
    "SIGNALINGS",
    "WHIP_PATH",
    "AgentAnswer",
    "AudioDecoder",
    "AudioEncoder",
    "AudioPeer",
    "BadSdp",
    "Channel",
    "CodecInfo",
    "Decimator",
    "EndCause",
    "EndInfo",
    "HttpError",
    "MeasuredStream",
    "Offer",
    "OpenSession",
    "OutboundTrack",
    "RelayObserver",
    "RelayObserverFactory",
    "RelayStats",
    "RtpIn",
    "Session",
    "Signaling",
    "SignalingError",
    "SignalingServer",
    "WebRtcRelay",
    "WebRtcRelayConfig",
    "WebRtcRelayServer",
    "add_trickled",
    "check_offer",
    "default_codec",
    "encode_clip",
    "hang_up",
    "measurement_rate",
    "open_peer_connections",
    "post_offer",
    "rtc_configuration",
    "use_host_addresses",
]
