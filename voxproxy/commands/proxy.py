"""``voxproxy proxy``: the measuring proxy in front of an agent.

Parses its flags (each also ``VOXPROXY_PROXY_`` + the flag, see :mod:`voxproxy.cli`) into a
:class:`voxproxy.proxy.server.ServeConfig` (:func:`serve_config`) and runs
:func:`voxproxy.proxy.workers.serve`, for either transport: websocket (the default) or
webrtc (``--transport webrtc``, the webrtc extra).
"""

from __future__ import annotations

import argparse
import ssl
from typing import Any

from voxproxy.commands._inputs import DEFAULT_RECEIPTS
from voxproxy.commands.parsing import (
    EnvParser,
    add_transport_arguments,
    byte_size,
    duration_s,
    host_port,
    non_negative_float,
    non_negative_int,
    positive_int,
    upstream_url,
)
from voxproxy.core.errors import ConfigError

# Defaults a staging deployment can live with: idle calls (and the agent sessions behind
# them) are not held forever, and one process does not take more calls than a core carries.
DEFAULT_MAX_CALLS = 200
DEFAULT_IDLE_TIMEOUT_S = 120.0


def add_parser(sub: Any) -> None:
    """``voxproxy proxy`` and its flags. Long, but a list: one call per flag, no logic."""
    p: EnvParser = sub.add_parser(
        "proxy",
        help="run the measuring websocket proxy in front of an agent",
        description="Forward calls to the agent unchanged and write one receipt per call.",
        usage="%(prog)s --upstream URL [--listen HOST:PORT] [--dialect WIRE] [options]",
    )
    g = _Groups(p)
    g.call.add_env_argument(
        "--listen",
        metavar="HOST:PORT",
        type=host_port,
        default=("127.0.0.1", 8765),
        help="HOST:PORT to accept callers on",
    )
    g.call.add_env_argument(
        "--upstream",
        metavar="URL",
        type=upstream_url,
        required=True,
        help="the agent's ws:// or wss:// URL; with --transport webrtc, its http(s):// "
        "signaling URL (a WHIP endpoint, or Pipecat's .../api/offer)",
    )
    g.call.add_env_argument(
        "--dialect",
        choices=["raw", "twilio", "telnyx", "plivo", "vonage", "exotel", "openai-realtime", "auto"],
        default="auto",
        help="the wire spoken on the call; auto detects it from the first messages",
    )
    g.receipts.add_env_argument(
        "--receipts",
        metavar="FILE",
        default=DEFAULT_RECEIPTS,
        help="JSON-lines file the receipts are appended to; a journal of the calls in progress "
        "is kept beside it (FILE.open-calls), so that after a crash the next start writes "
        "their receipts (terminal proxy_crashed)",
    )
    g.receipts.add_env_argument(
        "--store",
        metavar="FILE",
        default=None,
        help="also write receipts to this SQLite store (query it with `voxproxy receipts`)",
    )
    g.receipts.add_env_argument(
        "--policy",
        default=None,
        metavar="FILE|PROFILE",
        help="verdict policy: a YAML file, or a profile: auto (default; an outcome check "
        "is required only of calls that carried task events), latency-only (reachability, "
        "turn timing, interruption), task-outcome (every gate, an outcome check required); "
        "each receipt carries its verdict, the policy hash and the gates it was held to",
    )
    g.measure.add_env_argument(
        "--sample-rate",
        metavar="HZ",
        type=positive_int,
        default=16000,
        help="raw: caller audio rate in Hz",
    )
    g.measure.add_env_argument(
        "--agent-sample-rate",
        metavar="HZ",
        type=positive_int,
        default=None,
        help="raw: agent audio rate in Hz (default: the caller's)",
    )
    g.receipts.add_env_argument(
        "--secret",
        metavar="KEY",
        default=None,
        help="key for pseudonymous call ids (HMAC); without it a random per-process key is used",
    )
    g.call.add_env_argument(
        "--pass-path",
        choices=["auto", "yes", "no"],
        default="auto",
        help="append the caller's request path to the upstream's (auto: only when the "
        "upstream URL has no path of its own, e.g. ws://agent:8766/); the query is "
        "--pass-query's",
    )
    g.call.add_env_argument(
        "--pass-query",
        choices=["yes", "no"],
        default="yes",
        help="pass the caller's query string to the agent, after the upstream URL's own "
        "(default yes: /media/stream?tenant=42 reaches --upstream wss://a/stream as "
        "/stream?tenant=42)",
    )
    g.limits.add_env_argument(
        "--max-message-bytes",
        metavar="BYTES",
        type=positive_int,
        default=1 << 20,
        help="largest message accepted from either side; larger ones close the call with 1009",
    )
    g.limits.add_env_argument(
        "--max-calls",
        metavar="N",
        type=non_negative_int,
        default=DEFAULT_MAX_CALLS,
        help="calls in progress at most (0: no limit); a caller over the limit is refused at "
        "the handshake (webrtc: its offer) with HTTP 503 and Retry-After (no agent session, no "
        "receipt; counted and logged), about what one proxy core carries in real time",
    )
    g.limits.add_env_argument(
        "--workers",
        metavar="N",
        type=positive_int,
        default=None,
        help="processes serving --listen, sharing its port (SO_REUSEPORT), one receipts file, "
        "one /metrics and one event API; --max-calls is each worker's. Default: one per CPU "
        "this process may run on (websocket), 1 (webrtc); 1 serves in this process",
    )
    g.limits.add_ms(
        "--max-loop-lag-ms",
        100.0,
        help="refuse a new caller (HTTP 503, Retry-After) while the proxy's event loop runs "
        "this many ms late (the median of its readings over the last second, of three at "
        "least) while its own thread does the work (half a core or more: a loop kept waiting "
        "by other work on the machine refuses nobody), or while its measurement is shedding "
        "or more than 300 ms behind: the calls it has stay transparent (0: no such refusal; "
        "both transports; default 100)",
    )
    g.limits.add_seconds(
        "--idle-timeout",
        DEFAULT_IDLE_TIMEOUT_S,
        help="close a call (1001, receipt idle_timeout) after this many seconds without media "
        "either way; pings, pongs and unfinished frames do not count (0: never)",
    )
    g.limits.add_seconds(
        "--stall-timeout",
        30.0,
        help="drop a peer that reads nothing for this many seconds while the proxy has data "
        "for it, as if it had vanished (0: never)",
    )
    g.limits.add_seconds(
        "--handshake-timeout",
        10.0,
        help="seconds to wait for the agent's handshake before answering the caller 504; also "
        "how long a caller's handshake request, and the headers of any request to the HTTP "
        "listeners (WHIP, event API, /metrics), may take to arrive",
    )
    g.limits.add_seconds(
        "--drain-timeout",
        10.0,
        help="on SIGTERM, seconds to let calls finish before closing them with 1001",
    )
    g.measure.add_ms(
        "--downstream-offset-ms",
        0.0,
        help="constant added to agent playout times for what the proxy cannot see "
        "(jitter buffer, handset; webrtc: the caller's playout floor, docs/measurement.md)",
        signed=True,
    )
    g.measure.add_ms(
        "--max-uncertainty-ms",
        50.0,
        help="withhold a figure (null, reason clock_lag, caller_noise, agent_noise, "
        "caller_edge_ambiguous, agent_edge_ambiguous or downstream_jitter) whose "
        "uncertainty exceeds this: the detector's own 4 ms plus how late the proxy's clock "
        "readings ran near its edges (a busy CPU) plus what noise may hide of them (webrtc: "
        "plus what the caller's jitter buffer may add past --downstream-offset-ms); default 50",
    )
    g.measure.add_ms(
        "--response-timeout-ms",
        8000.0,
        help="no agent onset by then: no response",
        signed=True,
    )
    g.measure.add_ms(
        "--barge-in-window-ms",
        2000.0,
        help="agent audio that ends within this window after a barge-in counts as stopped",
        signed=True,
    )
    g.measure.add_env_argument(
        "--vad-mode", type=int, choices=[0, 1, 2, 3], default=3, help="webrtcvad mode"
    )
    g.call.add_env_argument(
        "--tls-cert", metavar="FILE", default=None, help="certificate file: serve wss://"
    )
    g.call.add_env_argument(
        "--tls-key", metavar="FILE", default=None, help="private key file for --tls-cert"
    )
    g.call.add_env_argument(
        "--upstream-ca",
        metavar="FILE",
        default=None,
        help="CA file to verify a wss:// agent (default: system CAs)",
    )
    g.obs.add_env_argument(
        "--log-level", metavar="LEVEL", default="info", help="debug, info, warning or error"
    )
    _add_webrtc(g)
    _add_observability(g)
    _add_captures(g)
    p.set_defaults(func=_cmd_proxy)


class _Groups:
    """``voxproxy proxy --help``'s headings, in the order it shows them."""

    def __init__(self, p: EnvParser) -> None:
        self.call = p.add_group("the call", "where callers come in and where they go")
        self.receipts = p.add_group("receipts and verdicts")
        self.limits = p.add_group("capacity and limits")
        self.measure = p.add_group("measurement")
        self.webrtc = p.add_group("webrtc (with --transport webrtc)")
        self.obs = p.add_group("observability and logs")
        self.capture = p.add_group(
            "captures (each call's audio and messages, on disk: off unless --capture)"
        )


def _add_captures(g: _Groups) -> None:
    from voxproxy.captures.writer import DEFAULT_MAX_BYTES, DEFAULT_MAX_CALLS

    g.capture.add_env_argument(
        "--capture",
        metavar="DIR",
        default=None,
        help="write each call's wire (both ways, with arrival times: its audio and content) "
        "to DIR/CALL.vxcap, readable by its owner only, for voxproxy analyze to measure "
        "again (docs/captures.md)",
    )
    g.capture.add_env_argument(
        "--capture-max-calls",
        metavar="N",
        type=positive_int,
        default=DEFAULT_MAX_CALLS,
        help="keep the newest N captures in DIR (the oldest are removed)",
    )
    g.capture.add_env_argument(
        "--capture-max-bytes",
        metavar="SIZE",
        type=byte_size,
        default=f"{DEFAULT_MAX_BYTES >> 30}G",
        help="keep at most SIZE of captures in DIR (bytes, or 500M, 2G; the oldest are "
        "removed; a call larger is not kept)",
    )
    g.capture.add_env_argument(
        "--capture-max-age",
        metavar="AGE",
        type=duration_s,
        default=None,
        help="remove captures older than AGE (seconds, or 30m, 12h, 7d), also while no "
        "call comes; none by default",
    )


def _add_webrtc(g: _Groups) -> None:
    add_transport_arguments(
        g.call.add_env_argument,
        "websocket: relay websocket messages; webrtc: answer callers' WebRTC offers (WHIP "
        "at /whip, Pipecat at /api/offer) and relay media and data channels to the agent",
        "webrtc: how the proxy offers to the agent (WHIP, RFC 9725, or Pipecat SmallWebRTC)",
    )
    g.webrtc.add_env_argument(
        "--ice-host",
        metavar="ADDRS",
        default=None,
        help="webrtc: comma-separated addresses to gather ICE host candidates on "
        "(default: every interface address but loopback, as aioice does)",
    )
    g.webrtc.add_env_argument(
        "--ice-server",
        metavar="URLS",
        default=None,
        help="webrtc: comma-separated STUN/TURN URLs (default: none; nothing is contacted)",
    )
    g.webrtc.add_seconds(
        "--ice-timeout",
        15.0,
        help="webrtc: seconds for both legs' media to connect after the answer",
    )
    g.webrtc.add_env_argument(
        "--agent-codecs",
        metavar="CODECS",
        default=None,
        help="webrtc: comma-separated audio codecs to offer the agent, in order (opus, pcmu, "
        "pcma, g722; default: all). Where the legs' codecs differ the proxy transcodes",
    )
    g.webrtc.add_env_argument(
        "--pace-ms",
        metavar="MS",
        type=_pace_ms,
        default=0.0,
        help="webrtc: send each packet this long after it arrived, so that a stall of the "
        "proxy shorter than this leaves no burst for the far end's jitter buffer (0-100; "
        "default 0: at once)",
    )


def _pace_ms(text: str) -> float:
    from voxproxy.transports.webrtc import MAX_PACE_MS

    value = non_negative_float(text)
    if value > MAX_PACE_MS:
        raise argparse.ArgumentTypeError(f"at most {MAX_PACE_MS:g}")
    return value


def _add_observability(g: _Groups) -> None:
    g.obs.add_env_argument(
        "--otel",
        action="store_true",
        default=False,
        help="export traces and metrics over OTLP, configured by the standard OTEL_* variables "
        "(also on when OTEL_EXPORTER_OTLP_ENDPOINT is set; OTEL_SDK_DISABLED=true turns it off)",
    )
    g.obs.add_env_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        type=host_port,
        default=None,
        help="HOST:PORT to serve Prometheus metrics on (/metrics; an empty HOST is loopback)",
    )
    g.obs.add_env_argument(
        "--events-listen",
        metavar="HOST:PORT",
        type=host_port,
        default=None,
        help="HOST:PORT of the event API for tool, state and outcome events "
        f"(needs --events-token; with a token alone: {EVENTS_DEFAULT[0]}:{EVENTS_DEFAULT[1]})",
    )
    g.obs.add_env_argument(
        "--event-names",
        metavar="NAMES",
        default=None,
        help="comma-separated tool and field names written as they are into receipts, spans "
        "and the gen_ai_tool_name label (from the event API and the OpenAI Realtime wire); "
        "any other name is replaced by its keyed hash (default: names of letters and "
        "_ . : / - without digits, up to 48 characters, are kept; in metrics, the first 32 "
        "such, the rest counted as _OTHER). operation_id is always hashed",
    )
    g.obs.add_env_argument(
        "--events-token",
        metavar="TOKEN",
        default=None,
        help="bearer token the event API requires (at least 16 characters); enables the API",
    )


def _proxy_config(args: argparse.Namespace) -> Any:
    from voxproxy.core.dialects.base import DialectOptions
    from voxproxy.proxy.websocket import ProxyConfig
    from voxproxy.transports.websocket import RelayConfig

    upstream_ssl = None
    if args.upstream_ca:
        upstream_ssl = ssl.create_default_context(cafile=args.upstream_ca)
    pass_path = {"auto": None, "yes": True, "no": False}[args.pass_path]
    relay = RelayConfig(
        upstream=args.upstream,
        pass_path=pass_path,
        pass_query=args.pass_query == "yes",
        max_message_bytes=args.max_message_bytes,
        handshake_timeout_s=args.handshake_timeout,
        idle_timeout_s=args.idle_timeout or None,
        upstream_ssl=upstream_ssl,
        max_calls=args.max_calls if args.max_calls > 0 else None,
        stall_timeout_s=args.stall_timeout or None,
    )
    return ProxyConfig(
        relay=relay,
        dialect=args.dialect,
        dialect_options=DialectOptions(
            sample_rate_hz=args.sample_rate,
            agent_sample_rate_hz=args.agent_sample_rate,
            names=_names(args),
        ),
        session=_session_config(args),
        secret=args.secret.encode() if args.secret else None,
        max_loop_lag_ms=args.max_loop_lag_ms or None,
    )


def _session_config(args: argparse.Namespace) -> Any:
    """The measurement settings both transports take from the command line."""
    from voxproxy.core.analysis.vad import VadConfig
    from voxproxy.core.session import SessionConfig
    from voxproxy.core.turns import TurnConfig

    return SessionConfig(
        vad=VadConfig(mode=args.vad_mode),
        turns=TurnConfig(
            response_timeout_ms=args.response_timeout_ms,
            barge_in_window_ms=args.barge_in_window_ms,
        ),
        downstream_offset_ms=args.downstream_offset_ms,
        max_uncertainty_ms=args.max_uncertainty_ms,
    )


def _server_ssl(args: argparse.Namespace) -> ssl.SSLContext | None:
    if not args.tls_cert:
        if args.tls_key:
            raise ConfigError("--tls-key needs --tls-cert")
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load --tls-cert/--tls-key: {exc}") from exc
    return ctx


EVENTS_DEFAULT = ("127.0.0.1", 8767)


def _events_listen(args: argparse.Namespace) -> tuple[str, int] | None:
    """Where the event API listens, or None; refuses to run it without a token."""
    from voxproxy.proxy.eventapi import MIN_TOKEN_CHARS

    token = args.events_token
    if not token:
        if args.events_listen is not None:
            raise ConfigError(
                "--events-listen needs --events-token (or VOXPROXY_PROXY_EVENTS_TOKEN): "
                "the event API does not run without a token"
            )
        return None
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"--events-token must be at least {MIN_TOKEN_CHARS} characters")
    listen: tuple[str, int] = args.events_listen or EVENTS_DEFAULT
    return listen


def _names(args: argparse.Namespace) -> frozenset[str] | None:
    """``--event-names``: the declared vocabulary of tool and field names, or None."""
    return frozenset(_csv(args.event_names)) if args.event_names else None


def _csv(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


def _webrtc_config(args: argparse.Namespace) -> Any:
    from voxproxy.core.dialects.base import DialectOptions
    from voxproxy.httpserve import HEADER_TIMEOUT_S
    from voxproxy.proxy.webrtc import WebRtcProxyConfig
    from voxproxy.transports.webrtc import WebRtcRelayConfig

    if not args.upstream.startswith(("http://", "https://")):
        raise ConfigError(
            f"--transport webrtc needs the agent's http(s):// signaling URL, got {args.upstream!r}"
        )
    if args.dialect not in ("auto", "openai-realtime"):
        raise ConfigError(
            "--transport webrtc measures data channels as auto (oai-events is OpenAI Realtime) "
            f"or openai-realtime; got --dialect {args.dialect}"
        )
    relay = WebRtcRelayConfig(
        upstream=args.upstream,
        signaling=args.signaling,
        signaling_timeout_s=args.handshake_timeout,
        ice_timeout_s=args.ice_timeout,
        idle_timeout_s=args.idle_timeout or None,
        ice_servers=_csv(args.ice_server),
        agent_codecs=_csv(args.agent_codecs) or None,
        max_calls=args.max_calls if args.max_calls > 0 else None,
        header_timeout_s=args.handshake_timeout or HEADER_TIMEOUT_S,
        pace_ms=args.pace_ms,
    )
    return WebRtcProxyConfig(
        relay=relay,
        dialect=args.dialect,
        dialect_options=DialectOptions(names=_names(args)),
        session=_session_config(args),
        secret=args.secret.encode() if args.secret else None,
        max_loop_lag_ms=args.max_loop_lag_ms or None,
    )


def serve_config(args: argparse.Namespace) -> Any:
    """The :class:`voxproxy.proxy.server.ServeConfig` that ``voxproxy proxy ARGS`` runs."""
    from voxproxy.proxy.server import EventsConfig, ServeConfig
    from voxproxy.telemetry import TelemetryConfig, otlp_requested

    webrtc = getattr(args, "transport", "websocket") == "webrtc"
    if webrtc:
        from voxproxy.extras import require

        require("webrtc", "--transport webrtc")
        proxy = _webrtc_config(args)
        if args.tls_cert:
            raise ConfigError("--tls-cert is not supported with --transport webrtc yet")
        tls = None
    else:
        if not args.upstream.startswith(("ws://", "wss://")):
            raise ConfigError(f"--upstream must be a ws:// or wss:// URL, got {args.upstream!r}")
        proxy = _proxy_config(args)
        tls = _server_ssl(args)
    from voxproxy.httpserve import HEADER_TIMEOUT_S

    events_listen = _events_listen(args)
    events = None
    if events_listen is not None:
        events = EventsConfig(
            args.events_token,
            events_listen,
            names=_names(args),
            header_timeout_s=args.handshake_timeout or HEADER_TIMEOUT_S,
        )
    return ServeConfig(
        proxy,
        listen=args.listen,
        receipts=args.receipts,
        store=args.store,
        policy=args.policy,
        tls=tls,
        telemetry=TelemetryConfig(
            otlp=args.otel or otlp_requested(),
            metrics_listen=args.metrics_listen,
            tool_names=_names(args),
        ),
        events=events,
        drain_timeout_s=args.drain_timeout,
        watch_fds=True,
        ice_hosts=_csv(args.ice_host) if webrtc else (),
        workers=_workers(args, webrtc),
        capture=_capture(args),
    )


def _capture(args: argparse.Namespace) -> Any:
    """``--capture DIR``'s settings (the directory made, or refused, here: one line)."""
    if not args.capture:
        return None
    from pathlib import Path

    from voxproxy.captures.writer import CaptureSettings, prepare_directory

    settings = CaptureSettings(
        Path(args.capture), args.capture_max_calls, args.capture_max_bytes, args.capture_max_age
    )
    prepare_directory(settings.directory)
    return settings


def _workers(args: argparse.Namespace, webrtc: bool) -> int:
    if args.workers is not None:
        return int(args.workers)
    if webrtc:
        return 1
    from voxproxy.proxy.workers import default_workers

    return default_workers()


def _cmd_proxy(args: argparse.Namespace) -> int:
    """``voxproxy proxy``: parse, then :func:`voxproxy.proxy.workers.serve`."""
    from voxproxy.proxy.workers import serve

    serve(serve_config(args))
    return 0
