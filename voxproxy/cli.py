"""The ``voxproxy`` command: a thin layer over the Python API.

Every flag of ``voxproxy proxy`` can also be set with an environment variable
named ``VOXPROXY_`` + the flag in upper case with dashes as underscores
(``--receipts`` -> ``VOXPROXY_RECEIPTS``); a flag given on the command line wins.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import errno
import gc
import json
import logging
import os
import re
import signal
import ssl
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from voxproxy import __version__
from voxproxy.errors import ConfigError, VoxproxyError

log = logging.getLogger("voxproxy")


def _env(flag: str) -> str:
    return "VOXPROXY_" + flag.lstrip("-").upper().replace("-", "_")


class _EnvDefaults(argparse.ArgumentParser):
    """An ArgumentParser whose options fall back to VOXPROXY_* environment variables, that
    names the closest flag for a mistyped one, and errs in one line, not a usage dump."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if any(isinstance(a, argparse._SubParsersAction) for a in self._actions):
            return super().parse_known_args(args, namespace)  # its subcommands check
        known = {o for action in self._actions for o in action.option_strings}
        for token in list(args if args is not None else sys.argv[1:]):
            if token == "--":
                break
            flag = token.split("=", 1)[0]
            if flag.startswith("--") and flag not in known:
                close = difflib.get_close_matches(flag, sorted(known), n=1)
                hint = f"; did you mean {close[0]}?" if close else ""
                self.error(f"unknown option {flag}{hint}")
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def add_env_argument(self, flag: str, **kwargs: Any) -> None:
        env = _env(flag)
        help_text = kwargs.pop("help", "")
        default = kwargs.get("default")
        if env in os.environ:
            raw = os.environ[env]
            kind: Callable[[str], Any] = kwargs.get("type", str)
            if kwargs.get("action") == "store_true":
                kwargs["default"] = raw.lower() in ("1", "true", "yes", "on")
            else:
                try:
                    kwargs["default"] = kind(raw)
                except (ValueError, argparse.ArgumentTypeError) as exc:
                    raise ConfigError(f"{env}={raw!r}: {exc}") from exc
                kwargs.pop("required", None)
        if isinstance(default, tuple) and len(default) == 2:
            default = f"{default[0]}:{default[1]}"  # HOST:PORT as it is typed
        shown = f" (default: {default})" if default not in (None, False) else ""
        self.add_argument(flag, help=f"{help_text}{shown} [env {env}]", **kwargs)


def host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host or "127.0.0.1", int(port)


def ws_url(value: str) -> str:
    if not value.startswith(("ws://", "wss://")):
        raise argparse.ArgumentTypeError(f"expected a ws:// or wss:// URL, got {value!r}")
    return value


def upstream_url(value: str) -> str:
    """The agent's URL: ws:// or wss:// (websocket), http:// or https:// (webrtc signaling)."""
    if not value.startswith(("ws://", "wss://", "http://", "https://")):
        raise argparse.ArgumentTypeError(
            f"expected a ws://, wss://, http:// or https:// URL, got {value!r}"
        )
    return value


def redact_url(url: str) -> str:
    """``url`` fit for a log line: no credentials, no query (either may carry a token)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    auth = "***@" if parts.username is not None or parts.password is not None else ""
    query = "?***" if parts.query else ""
    return f"{parts.scheme}://{auth}{host}{port}{parts.path}{query}"


def positive_int(value: str) -> int:
    n = int(value)
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return n


def non_negative_int(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return n


def non_negative_float(value: str) -> float:
    x = float(value)
    if x < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return x


# -- proxy --------------------------------------------------------------------------------

# Defaults a staging deployment can live with: idle calls (and the agent sessions behind
# them) are not held forever, and one process does not take more calls than a core carries.
DEFAULT_MAX_CALLS = 200
DEFAULT_IDLE_TIMEOUT_S = 120.0


def _add_proxy(sub: Any) -> None:
    p: _EnvDefaults = sub.add_parser(
        "proxy",
        help="run the measuring websocket proxy in front of an agent",
        description="Forward calls to the agent unchanged and write one receipt per call.",
    )
    p.add_env_argument(
        "--listen",
        type=host_port,
        default=("127.0.0.1", 8765),
        help="HOST:PORT to accept callers on",
    )
    p.add_env_argument(
        "--upstream",
        type=upstream_url,
        required=True,
        help="the agent's ws:// or wss:// URL; with --transport webrtc, its http(s):// "
        "signaling URL (a WHIP endpoint, or Pipecat's .../api/offer)",
    )
    p.add_env_argument(
        "--dialect",
        choices=["raw", "twilio", "telnyx", "plivo", "vonage", "exotel", "openai-realtime", "auto"],
        default="auto",
        help="the wire spoken on the call; auto detects it from the first messages",
    )
    p.add_env_argument(
        "--receipts",
        default="receipts.jsonl",
        help="JSON-lines file the receipts are appended to; a journal of the calls in progress "
        "is kept beside it (FILE.open-calls), so that after a crash the next start writes "
        "their receipts (terminal proxy_crashed)",
    )
    p.add_env_argument(
        "--store",
        default=None,
        help="also write receipts to this SQLite store (query it with `voxproxy receipts`)",
    )
    p.add_env_argument(
        "--policy",
        default=None,
        metavar="FILE|PROFILE",
        help="verdict policy: a YAML file, or a profile: auto (default; an outcome check "
        "is required only of calls that carried task events), latency-only (reachability, "
        "turn timing, interruption), task-outcome (every gate, an outcome check required); "
        "each receipt carries its verdict, the policy hash and the gates it was held to",
    )
    p.add_env_argument(
        "--sample-rate", type=positive_int, default=16000, help="raw: caller audio rate in Hz"
    )
    p.add_env_argument(
        "--agent-sample-rate",
        type=positive_int,
        default=None,
        help="raw: agent audio rate in Hz (default: the caller's)",
    )
    p.add_env_argument(
        "--secret",
        default=None,
        help="key for pseudonymous call ids (HMAC); without it a random per-process key is used",
    )
    p.add_env_argument(
        "--pass-path",
        choices=["auto", "yes", "no"],
        default="auto",
        help="append the caller's request path to the upstream's (auto: only when the "
        "upstream URL has no path of its own, e.g. ws://agent:8766/); the query is "
        "--pass-query's",
    )
    p.add_env_argument(
        "--pass-query",
        choices=["yes", "no"],
        default="yes",
        help="pass the caller's query string to the agent, after the upstream URL's own "
        "(default yes: /media/stream?tenant=42 reaches --upstream wss://a/stream as "
        "/stream?tenant=42)",
    )
    p.add_env_argument(
        "--max-message-bytes",
        type=positive_int,
        default=1 << 20,
        help="largest message accepted from either side; larger ones close the call with 1009",
    )
    p.add_env_argument(
        "--max-calls",
        type=non_negative_int,
        default=DEFAULT_MAX_CALLS,
        help="calls in progress at most (0: no limit); a caller over the limit is refused at "
        "the handshake (webrtc: its offer) with HTTP 503 and Retry-After (no agent session, no "
        "receipt; counted and logged). The default is about what one proxy core carries in "
        "real time",
    )
    p.add_env_argument(
        "--max-loop-lag-ms",
        type=non_negative_float,
        default=100.0,
        help="refuse a new caller (HTTP 503, Retry-After) while the proxy's event loop runs "
        "this many ms late (the median of its readings over the last second), or while its "
        "measurement is shedding: the calls it has stay transparent (0: no such refusal; "
        "websocket transport; default 100)",
    )
    p.add_env_argument(
        "--idle-timeout",
        type=non_negative_float,
        default=DEFAULT_IDLE_TIMEOUT_S,
        help="close a call (1001, receipt idle_timeout) after this many seconds without media "
        "either way; pings, pongs and unfinished frames do not count (0: never)",
    )
    p.add_env_argument(
        "--stall-timeout",
        type=non_negative_float,
        default=30.0,
        help="drop a peer that reads nothing for this many seconds while the proxy has data "
        "for it, as if it had vanished (0: never)",
    )
    p.add_env_argument(
        "--handshake-timeout",
        type=non_negative_float,
        default=10.0,
        help="seconds to wait for the agent's handshake before answering the caller 504; also "
        "how long a caller's handshake request, and the headers of any request to the HTTP "
        "listeners (WHIP, event API, /metrics), may take to arrive",
    )
    p.add_env_argument(
        "--drain-timeout",
        type=non_negative_float,
        default=10.0,
        help="on SIGTERM, seconds to let calls finish before closing them with 1001",
    )
    p.add_env_argument(
        "--downstream-offset-ms",
        type=float,
        default=0.0,
        help="constant added to agent playout times for what the proxy cannot see "
        "(jitter buffer, handset)",
    )
    p.add_env_argument(
        "--max-uncertainty-ms",
        type=non_negative_float,
        default=50.0,
        help="withhold a figure (null, reason clock_lag, caller_noise or agent_noise) whose "
        "uncertainty exceeds this: the detector's own 10 ms plus how late the proxy's clock "
        "readings ran near its edges (a busy CPU) plus what noise may hide of them; default 50",
    )
    p.add_env_argument(
        "--response-timeout-ms",
        type=float,
        default=8000.0,
        help="no agent onset by then: no response",
    )
    p.add_env_argument(
        "--barge-in-window-ms",
        type=float,
        default=2000.0,
        help="agent audio that ends within this window after a barge-in counts as stopped",
    )
    p.add_env_argument(
        "--vad-mode", type=int, choices=[0, 1, 2, 3], default=3, help="webrtcvad mode"
    )
    p.add_env_argument("--tls-cert", default=None, help="certificate file: serve wss://")
    p.add_env_argument("--tls-key", default=None, help="private key file for --tls-cert")
    p.add_env_argument(
        "--upstream-ca", default=None, help="CA file to verify a wss:// agent (default: system CAs)"
    )
    p.add_env_argument("--log-level", default="info", help="debug, info, warning or error")
    _add_webrtc(p)
    _add_observability(p)
    p.set_defaults(func=_cmd_proxy)


def _add_webrtc(p: _EnvDefaults) -> None:
    p.add_env_argument(
        "--transport",
        choices=["websocket", "webrtc"],
        default="websocket",
        help="websocket: relay websocket messages; webrtc: answer callers' WebRTC offers (WHIP "
        "at /whip, Pipecat at /api/offer) and relay media and data channels to the agent",
    )
    p.add_env_argument(
        "--signaling",
        choices=["whip", "pipecat"],
        default="whip",
        help="webrtc: how the proxy offers to the agent (WHIP, RFC 9725, or Pipecat SmallWebRTC)",
    )
    p.add_env_argument(
        "--ice-host",
        default=None,
        help="webrtc: comma-separated addresses to gather ICE host candidates on "
        "(default: every interface address but loopback, as aioice does)",
    )
    p.add_env_argument(
        "--ice-server",
        default=None,
        help="webrtc: comma-separated STUN/TURN URLs (default: none; nothing is contacted)",
    )
    p.add_env_argument(
        "--ice-timeout",
        type=non_negative_float,
        default=15.0,
        help="webrtc: seconds for both legs' media to connect after the answer",
    )
    p.add_env_argument(
        "--agent-codecs",
        default=None,
        help="webrtc: comma-separated audio codecs to offer the agent, in order (opus, pcmu, "
        "pcma, g722; default: all). Where the legs' codecs differ the proxy transcodes",
    )


def _add_observability(p: _EnvDefaults) -> None:
    p.add_env_argument(
        "--otel",
        action="store_true",
        default=False,
        help="export traces and metrics over OTLP, configured by the standard OTEL_* variables "
        "(also on when OTEL_EXPORTER_OTLP_ENDPOINT is set; OTEL_SDK_DISABLED=true turns it off)",
    )
    p.add_env_argument(
        "--metrics-listen",
        type=host_port,
        default=None,
        help="HOST:PORT to serve Prometheus metrics on (/metrics; an empty HOST is loopback)",
    )
    p.add_env_argument(
        "--metrics-legacy-ms",
        action="store_true",
        default=False,
        help="also serve the latency histograms of voxproxy 0.1 in milliseconds "
        "(voxproxy_turn_ttfs_milliseconds ...) beside the seconds ones; for one release",
    )
    p.add_env_argument(
        "--events-listen",
        type=host_port,
        default=None,
        help="HOST:PORT of the event API for tool, state and outcome events "
        f"(needs --events-token; with a token alone: {EVENTS_DEFAULT[0]}:{EVENTS_DEFAULT[1]})",
    )
    p.add_env_argument(
        "--event-names",
        default=None,
        help="comma-separated tool and field names the event API writes into receipts as they "
        "are; any other name is replaced by its keyed hash (default: names of letters and "
        "_ . : / - without digits, up to 48 characters, are kept). operation_id is always hashed",
    )
    p.add_env_argument(
        "--events-token",
        default=None,
        help="bearer token the event API requires (at least 16 characters); enables the API",
    )


def _proxy_config(args: argparse.Namespace) -> Any:
    from voxproxy.dialects.base import DialectOptions
    from voxproxy.proxy import ProxyConfig
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
            sample_rate_hz=args.sample_rate, agent_sample_rate_hz=args.agent_sample_rate
        ),
        session=_session_config(args),
        secret=args.secret.encode() if args.secret else None,
        max_loop_lag_ms=args.max_loop_lag_ms or None,
    )


def _session_config(args: argparse.Namespace) -> Any:
    """The measurement settings both transports take from the command line."""
    from voxproxy.analysis.vad import VadConfig
    from voxproxy.session import SessionConfig
    from voxproxy.turns import TurnConfig

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


async def _start_services(
    args: argparse.Namespace,
    proxy: Any,
    telemetry: Any,
    journal: Any,
    left: Any,
    session: Any,
    events_listen: tuple[str, int] | None,
) -> Any:
    """What both proxies start beside their listener: telemetry (and /metrics), the
    crash journal with the receipts a killed proxy left owed, the event API."""
    from voxproxy.eventapi import EventApi
    from voxproxy.httpserve import HEADER_TIMEOUT_S
    from voxproxy.proxy import recover_crashed

    await telemetry.start()
    _log_metrics_listener(telemetry)
    proxy.journal = journal
    if left:
        recover_crashed(proxy, left, session)
    if events_listen is None:
        return None
    events_api = EventApi(
        proxy.live,
        proxy.secret,
        args.events_token,
        header_timeout_s=args.handshake_timeout or HEADER_TIMEOUT_S,
        names=frozenset(_csv(args.event_names)) if args.event_names else None,
    )
    await events_api.start(*events_listen)
    return events_api


def _log_metrics_listener(telemetry: object) -> None:
    """Say where /metrics is served (the port actually bound, also when asked for 0)."""
    listen = getattr(getattr(telemetry, "config", None), "metrics_listen", None)
    port = getattr(telemetry, "metrics_port", None)
    if listen is not None and port is not None:
        log.info("metrics on http://%s:%d/metrics", listen[0], port)


def _events_listen(args: argparse.Namespace) -> tuple[str, int] | None:
    """Where the event API listens, or None; refuses to run it without a token."""
    from voxproxy.eventapi import MIN_TOKEN_CHARS

    token = args.events_token
    if not token:
        if args.events_listen is not None:
            raise ConfigError(
                "--events-listen needs --events-token (or VOXPROXY_EVENTS_TOKEN): "
                "the event API does not run without a token"
            )
        return None
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"--events-token must be at least {MIN_TOKEN_CHARS} characters")
    listen: tuple[str, int] = args.events_listen or EVENTS_DEFAULT
    return listen


async def _keep_alive(journal: Any) -> None:
    """Tell the call journal the process is alive, so that a crash is placed in time."""
    import time

    from voxproxy.receipts.journal import ALIVE_INTERVAL_S

    while True:
        journal.alive(time.time_ns())
        await asyncio.sleep(ALIVE_INTERVAL_S)


def _watch_fds() -> asyncio.Task[None]:
    """Raise the open-files limit as far as allowed, log it, and watch it (see fdwatch)."""
    from voxproxy.fdwatch import raise_fd_limit, watch_fds

    limit = raise_fd_limit()
    if limit is not None:
        log.info("open files: up to %d", limit)
    return asyncio.get_running_loop().create_task(watch_fds())


def _csv(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


def _webrtc_config(args: argparse.Namespace) -> Any:
    from voxproxy.dialects.base import DialectOptions
    from voxproxy.httpserve import HEADER_TIMEOUT_S
    from voxproxy.proxy_webrtc import WebRtcProxyConfig
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
    )
    return WebRtcProxyConfig(
        relay=relay,
        dialect=args.dialect,
        dialect_options=DialectOptions(),
        session=_session_config(args),
        secret=args.secret.encode() if args.secret else None,
    )


def _cmd_proxy_webrtc(args: argparse.Namespace) -> int:
    """``voxproxy proxy --transport webrtc``: the same receipts, sinks and telemetry."""
    from voxproxy.proxy_webrtc import WebRtcProxy
    from voxproxy.receipts.journal import CallJournal
    from voxproxy.receipts.model import Receipt
    from voxproxy.receipts.policy import load_policy
    from voxproxy.receipts.store import ReceiptStore
    from voxproxy.receipts.verdict import judged
    from voxproxy.receipts.writer import ReceiptWriter
    from voxproxy.telemetry import TelemetryConfig, make_telemetry, otlp_requested
    from voxproxy.transports.webrtc import use_host_addresses

    config = _webrtc_config(args)
    if args.tls_cert:
        raise ConfigError("--tls-cert is not supported with --transport webrtc yet")
    host, port = args.listen
    policy = load_policy(args.policy)
    events_listen = _events_listen(args)
    if args.ice_host:
        use_host_addresses(_csv(args.ice_host))

    async def main() -> None:
        journal = CallJournal.beside(args.receipts)
        left = journal.open()  # calls a killed proxy left open
        writer = ReceiptWriter(args.receipts, on_written=journal.written)
        store = ReceiptStore(args.store) if args.store else None
        sinks: list[Callable[[Receipt], None]] = [writer.write]
        if store is not None:
            sinks.append(store.write)
        telemetry = make_telemetry(
            TelemetryConfig(
                otlp=args.otel or otlp_requested(),
                metrics_listen=args.metrics_listen,
                legacy_ms_metrics=args.metrics_legacy_ms,
            )
        )
        proxy = WebRtcProxy(
            config, sinks=sinks, telemetry=telemetry, judge=lambda r: judged(r, policy)
        )
        events_api = await _start_services(
            args, proxy, telemetry, journal, left, config.session, events_listen
        )
        bound = await proxy.start(host, port)
        log.info(
            "voxproxy %s (webrtc) answering offers on http://%s:%d/whip and /api/offer -> %s "
            "(%s), receipts to %s",
            __version__,
            host,
            bound,
            redact_url(config.relay.upstream),
            config.relay.signaling,
            args.receipts,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        fds = _watch_fds()
        alive = loop.create_task(_keep_alive(journal))
        await stop.wait()
        fds.cancel()
        alive.cancel()
        log.info(
            "shutting down: draining %d call(s) for up to %.0f s", proxy.active, args.drain_timeout
        )
        if events_api is not None:
            await events_api.stop()
        try:
            await proxy.stop(args.drain_timeout)
            await telemetry.aclose()
        finally:
            writer.close()
            journal.close()
            log.info("%d receipt(s) written to %s", writer.written, args.receipts)
            if store is not None:
                store.close()
            refused = proxy.server.admission.refused
            if refused:
                log.info("%d offer(s) refused at capacity", refused)

    _run(main())
    return 0


def _cmd_proxy(args: argparse.Namespace) -> int:
    if getattr(args, "transport", "websocket") == "webrtc":
        return _cmd_proxy_webrtc(args)
    if not args.upstream.startswith(("ws://", "wss://")):
        raise ConfigError(f"--upstream must be a ws:// or wss:// URL, got {args.upstream!r}")
    from voxproxy.proxy import Proxy
    from voxproxy.receipts.journal import CallJournal
    from voxproxy.receipts.model import Receipt
    from voxproxy.receipts.policy import load_policy
    from voxproxy.receipts.store import ReceiptStore
    from voxproxy.receipts.verdict import judged
    from voxproxy.receipts.writer import ReceiptWriter
    from voxproxy.telemetry import TelemetryConfig, make_telemetry, otlp_requested

    config = _proxy_config(args)
    server_ssl = _server_ssl(args)
    host, port = args.listen
    policy = load_policy(args.policy)
    events_listen = _events_listen(args)

    async def main() -> None:
        journal = CallJournal.beside(args.receipts)
        left = journal.open()  # calls a killed proxy left open
        writer = ReceiptWriter(args.receipts, on_written=journal.written)
        store = ReceiptStore(args.store) if args.store else None
        sinks: list[Callable[[Receipt], None]] = [writer.write]
        if store is not None:
            sinks.append(store.write)
        telemetry = make_telemetry(
            TelemetryConfig(
                otlp=args.otel or otlp_requested(),
                metrics_listen=args.metrics_listen,
                legacy_ms_metrics=args.metrics_legacy_ms,
            )
        )
        # One verdict per receipt, given before the sinks and telemetry see it.
        proxy = Proxy(config, sinks=sinks, telemetry=telemetry, judge=lambda r: judged(r, policy))
        events_api = await _start_services(
            args, proxy, telemetry, journal, left, config.session, events_listen
        )
        bound = await proxy.start(host, port, server_ssl)  # with its LagMonitor
        # Everything built at startup lives as long as the process: keep it out of the
        # cyclic garbage collector's full passes (they would rescan it under load).
        gc.freeze()
        scheme = "wss" if server_ssl else "ws"
        log.info(
            "voxproxy %s listening on %s://%s:%d -> %s (dialect %s), receipts to %s",
            __version__,
            scheme,
            host,
            bound,
            redact_url(config.relay.upstream),
            config.dialect,
            args.receipts,
        )
        log.info(
            "verdicts under policy %s (version %s)%s",
            policy.hash,
            policy.version,
            f"; receipts also stored in {args.store}" if store is not None else "",
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        fds = _watch_fds()
        alive = loop.create_task(_keep_alive(journal))
        await stop.wait()
        fds.cancel()
        alive.cancel()
        log.info(
            "shutting down: draining %d call(s) for up to %.0f s", proxy.active, args.drain_timeout
        )
        try:
            if events_api is not None:
                await events_api.stop()
            await proxy.stop(args.drain_timeout)
            await telemetry.aclose()
        finally:
            # Whatever failed above, the receipts already handed to the writers reach the disk.
            writer.close()
            journal.close()
            log.info("%d receipt(s) written to %s", writer.written, args.receipts)
            if store is not None:
                store.close()
                log.info("%d receipt(s) stored in %s", store.written, args.store)
            if proxy.refused_calls:
                log.info("%d caller(s) refused at capacity", proxy.refused_calls)

    _run(main())
    return 0


# -- mock agent ---------------------------------------------------------------------------


def _add_mock_agent(sub: Any) -> None:
    p: _EnvDefaults = sub.add_parser(
        "mock-agent",
        help="run the reference voice agent (for tests, demos and load runs)",
        description="A websocket voice agent that answers each caller turn with recorded speech.",
    )
    p.add_argument("--listen", type=host_port, default=("127.0.0.1", 8766), help="HOST:PORT")
    p.add_argument(
        "--dialect",
        choices=["raw", "twilio", "openai-realtime"],
        default="raw",
        help="wire to speak (openai-realtime: as an OpenAI Realtime server)",
    )
    p.add_argument("--sample-rate", type=positive_int, default=16000, help="raw: audio rate in Hz")
    p.add_argument("--delay-ms", type=non_negative_float, default=600.0, help="response delay")
    p.add_argument("--jitter-ms", type=non_negative_float, default=0.0, help="± response jitter")
    p.add_argument(
        "--send-mode", choices=["paced", "burst"], default="paced", help="real time or ahead of it"
    )
    p.add_argument(
        "--barge-in",
        choices=["flush", "silent", "never"],
        default="flush",
        help="on barge-in: stop and flush, stop without a flush, or never stop",
    )
    p.add_argument(
        "--reaction-ms", type=non_negative_float, default=150.0, help="barge-in reaction time"
    )
    p.add_argument("--seed", type=int, default=0, help="seed for jitter")
    p.add_argument(
        "--post-events-url",
        default=os.environ.get("VOXPROXY_POST_EVENTS_URL"),
        help="the proxy's event API (http://HOST:PORT): post a simulated tool's events per "
        "answer [env VOXPROXY_POST_EVENTS_URL]",
    )
    p.add_argument(
        "--events-token",
        default=os.environ.get("VOXPROXY_EVENTS_TOKEN"),
        help="bearer token for --post-events-url [env VOXPROXY_EVENTS_TOKEN]",
    )
    p.add_argument(
        "--tool-latency-ms",
        type=non_negative_float,
        default=300.0,
        help="simulated tool: tool.started -> tool.finished",
    )
    p.add_argument(
        "--transcripts",
        action="store_true",
        help="raw and openai-realtime: report what the agent heard in each caller turn "
        "(it recognizes the fixture clip; built-in imperfect texts unless --hypotheses)",
    )
    p.add_argument(
        "--hypotheses",
        default=None,
        metavar="FILE",
        help="with --transcripts: YAML/JSON mapping caller clip name -> the text the agent "
        "hears for it (clips not listed are heard perfectly)",
    )
    p.set_defaults(func=_cmd_mock_agent)


def _cmd_mock_agent(args: argparse.Namespace) -> int:
    from voxproxy.mockagent import MockAgentConfig, run_cli
    from voxproxy.mockagent.hearing import load_hypotheses

    config = MockAgentConfig(
        dialect=args.dialect,
        sample_rate_hz=args.sample_rate,
        delay_ms=args.delay_ms,
        jitter_ms=args.jitter_ms,
        send_mode=args.send_mode,
        barge_in=args.barge_in,
        reaction_ms=args.reaction_ms,
        seed=args.seed,
        post_events_url=args.post_events_url,
        events_token=args.events_token,
        tool_latency_ms=args.tool_latency_ms,
        transcripts=args.transcripts,
        transcript_hypotheses=load_hypotheses(args.hypotheses) if args.hypotheses else None,
    )
    host, port = args.listen
    _run(run_cli(config, host, port))
    return 0


# -- schema -------------------------------------------------------------------------------


def _add_schema(sub: Any) -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of a voxproxy document")
    p.add_argument("document", choices=["receipt"], help="which document")
    p.set_defaults(func=_cmd_schema)


def _cmd_schema(args: argparse.Namespace) -> int:
    from voxproxy.receipts.model import Receipt

    del args
    print(json.dumps(Receipt.model_json_schema(by_alias=True), indent=2))
    return 0


# -- demo ---------------------------------------------------------------------------------


def _add_demo(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="start a mock agent and the proxy, run scripted calls through both, show receipts",
    )
    p.add_argument("--out", default="voxproxy-demo", help="directory for receipts and results")
    p.set_defaults(func=_cmd_demo)


def _cmd_demo(args: argparse.Namespace) -> int:
    from voxproxy.demo import run_demo

    status: int = _run(run_demo(args.out))
    return status


# -- main ---------------------------------------------------------------------------------


def _run(coro: Any) -> Any:
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="voxproxy",
        description="Measure voice agents on the wire: time-to-first-sound, barge-in stop "
        "latency, one content-free receipt per call.",
    )
    parser.add_argument("--version", action="version", version=f"voxproxy {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_EnvDefaults)
    _add_proxy(sub)
    _add_mock_agent(sub)
    _add_schema(sub)
    _add_demo(sub)
    import importlib

    from voxproxy.commands import MODULES

    for name in MODULES:
        importlib.import_module(f"voxproxy.commands.{name}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        from voxproxy.commands.load_merge import rewrite_argv  # `load merge` -> `load-merge`

        args = parser.parse_args(rewrite_argv(list(sys.argv[1:] if argv is None else argv)))
        level = getattr(args, "log_level", "info").upper()
        logging.basicConfig(
            level=getattr(logging, level, logging.INFO),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        logging.getLogger("websockets").setLevel(logging.WARNING)
        logging.getLogger("matplotlib").setLevel(logging.WARNING)
        result: int = args.func(args)
        return result
    except VoxproxyError as exc:
        print(f"voxproxy: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        # The common mistakes (a port already in use, a path that cannot be written)
        # deserve one line that says what to fix, not a traceback.
        if exc.errno not in _USER_ERRNOS:
            raise
        print(f"voxproxy: error: {_describe_os_error(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


_USER_ERRNOS = frozenset(
    {
        errno.EADDRINUSE,
        errno.EADDRNOTAVAIL,
        errno.EACCES,
        errno.EPERM,
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EROFS,
        errno.EEXIST,
    }
)


def _describe_os_error(exc: OSError) -> str:
    text = re.sub(r"^\[Errno \d+\] ", "", str(exc))
    if exc.errno == errno.EADDRINUSE:
        return f"{text}: another process listens there; choose another port or stop it"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"{text}: that address is not on this machine"
    if exc.errno in (errno.EEXIST, errno.ENOTDIR) and exc.filename:
        return f"{exc.filename}: a file stands where a directory is needed"
    return text


if __name__ == "__main__":
    sys.exit(main())
