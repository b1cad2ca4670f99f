"""``voxproxy mock-agent``: the reference voice agent, for tests, demos and load runs."""

from __future__ import annotations

import argparse
from typing import Any

from voxproxy.commands.parsing import DefaultsShown, host_port, non_negative_float, positive_int


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "mock-agent",
        formatter_class=DefaultsShown,
        help="run the reference voice agent (for tests, demos and load runs)",
        description="A websocket voice agent that answers each caller turn with recorded speech.",
    )
    p.add_argument("--listen", type=host_port, default=("127.0.0.1", 8766), help="HOST:PORT")
    p.add_argument(
        "--transport",
        choices=["websocket", "webrtc"],
        default="websocket",
        help="webrtc: answer WebRTC offers (WHIP at /whip, Pipecat at /api/offer) and talk "
        "over Opus, paced in real time (needs the webrtc extra)",
    )
    p.add_argument(
        "--dialect",
        choices=["raw", "twilio", "openai-realtime"],
        default="raw",
        help="websocket: wire to speak (openai-realtime: as an OpenAI Realtime server)",
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
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the response jitter (the same seed, the same delays)",
    )
    p.add_argument(
        "--post-events-url",
        default=None,
        help="the proxy's event API (http://HOST:PORT): post a simulated tool's events per answer",
    )
    p.add_argument(
        "--events-token",
        default=None,
        help="bearer token for --post-events-url",
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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from voxproxy.mockagent import MockAgentConfig, run_cli
    from voxproxy.mockagent.hearing import load_hypotheses
    from voxproxy.proxy.server import run_loop

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
    if args.transport == "webrtc":
        from voxproxy.extras import require

        require("webrtc", "mock-agent --transport webrtc")
        run_loop(_webrtc_mock_agent(config, host, port))
        return 0
    run_loop(run_cli(config, host, port))
    return 0


async def _webrtc_mock_agent(config: Any, host: str, port: int) -> None:
    from voxproxy.mockagent.base import serve_until_cancelled
    from voxproxy.mockagent.webrtc import WebRtcMockAgent

    banner = (
        "mock-agent answering WebRTC offers on http://{host}:{port}/whip (WHIP) and "
        "http://{host}:{port}/api/offer (Pipecat)"
    )
    await serve_until_cancelled(WebRtcMockAgent(config), host, port, banner)
