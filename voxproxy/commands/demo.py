"""``voxproxy demo``: a mock agent and the proxy, scripted calls through both, receipts."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="start a mock agent and the proxy, run scripted calls through both, show receipts",
    )
    p.add_argument("--out", default="voxproxy-demo", help="directory for receipts and results")
    p.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="calls at once (default: sized for this machine, 8 on two or more CPUs)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from voxproxy.harness.demo import run_demo
    from voxproxy.proxy.server import run_loop

    status: int = run_loop(run_demo(args.out, args.concurrency))
    return status
